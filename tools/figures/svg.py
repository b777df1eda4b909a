# SPDX-License-Identifier: GPL-2.0
"""A few SVG helpers for the docs' pictures (tools/figures/*.py), written
by hand with Python's standard library only, as tools/demo/plot.py is:
boxes, text, arrows. Output is deterministic (same input, same bytes), so
that a test can compare the committed picture with what its script
draws."""

from html import escape

FONT = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""


class Svg:
    def __init__(self, width, height, title):
        self.w, self.h = width, height
        self.parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}">',
            f"<title>{escape(title)}</title>",
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" '
            'refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
            'fill="#444"/></marker></defs>',
            f'<rect width="{width}" height="{height}" fill="white"/>']

    def box(self, x, y, w, h, fill="#f4f4f4", stroke="#555", dash=False,
            rx=6, label=None):
        d = ' stroke-dasharray="5,4"' if dash else ""
        lab = f' data-label="{escape(label)}"' if label else ""
        self.parts.append(
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{rx}" '
            f'fill="{fill}" stroke="{stroke}"{d}{lab}/>')

    def text(self, x, y, s, size=12, anchor="start", weight="normal",
             color="#222", italic=False):
        st = ' font-style="italic"' if italic else ""
        self.parts.append(
            f'<text x="{x}" y="{y}" font-size="{size}" {FONT} '
            f'text-anchor="{anchor}" font-weight="{weight}" '
            f'fill="{color}"{st}>{escape(s)}</text>')

    def lines(self, x, y, rows, size=12, anchor="start", **kw):
        """Text rows from y down, size + 4 apart; the first bold when kw
        says so via a leading '*'."""
        for i, r in enumerate(rows):
            bold = r.startswith("*")
            self.text(x, y + i * (size + 4), r.lstrip("*"), size, anchor,
                      "bold" if bold else "normal", **kw)

    def arrow(self, x1, y1, x2, y2, label=None, color="#444", dash=False,
              both=False, lx=None, ly=None, anchor="middle"):
        d = ' stroke-dasharray="4,3"' if dash else ""
        start = ' marker-start="url(#arrow)"' if both else ""
        self.parts.append(
            f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" '
            f'stroke="{color}" stroke-width="1.4"{d}{start} '
            f'marker-end="url(#arrow)"/>')
        if label:
            self.text(lx if lx is not None else (x1 + x2) / 2 + 4,
                      ly if ly is not None else (y1 + y2) / 2 - 4, label,
                      11, anchor, color="#333")

    def path(self, points, label=None, dash=False, color="#444", lx=None,
             ly=None, anchor="start", both=False):
        """An arrow along the points [(x, y), ...], ending at the last."""
        d = ' stroke-dasharray="4,3"' if dash else ""
        start = ' marker-start="url(#arrow)"' if both else ""
        pts = " ".join(f"{x},{y}" for x, y in points)
        self.parts.append(
            f'<polyline points="{pts}" fill="none" stroke="{color}" '
            f'stroke-width="1.4"{d}{start} marker-end="url(#arrow)"/>')
        if label:
            self.text(lx, ly, label, 11, anchor, color="#333")

    def line(self, x1, y1, x2, y2, color="#bbb", dash=True, width=1):
        d = ' stroke-dasharray="3,3"' if dash else ""
        self.parts.append(
            f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" '
            f'stroke="{color}" stroke-width="{width}"{d}/>')

    def rect(self, x, y, w, h, fill, opacity=1.0):
        self.parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" '
            f'height="{h:.1f}" fill="{fill}" fill-opacity="{opacity}"/>')

    def write(self, path):
        with open(path, "w") as f:
            f.write("\n".join(self.parts + ["</svg>"]) + "\n")
