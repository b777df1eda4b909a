# SPDX-License-Identifier: GPL-2.0
"""The pinned engine and trainer releases, for tests that read their
sources (tests/engines/pins.txt; fetched by tests/engines/fetch.py).

    from pinned import release, find, params
    sgl = release("sglang")               # sgl.version, sgl.root
    node = find("sglang", "sglang/srt/managers/scheduler.py",
                "Scheduler.get_new_batch_prefill")
    node.where                            # "sglang 0.5.23 .../scheduler.py:1234"
    params(node)                          # [("self", None), ("x", "1"), ...]

Nothing here imports the releases: they are read as text and parsed with
ast, so no torch or CUDA is needed. A name that is not there raises
Drift, whose message names the release, the file and what was looked
for: a test that relies on a call site fails with the real file:line.
"""

import ast
import os

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SRC = os.environ.get("GPUSLEEP_ENGINES",
                     os.path.join(REPO, "build", "engines")) + "/src"


class Drift(AssertionError):
    """A pinned release does not have what gpusleep relies on."""


class Release:
    def __init__(self, name):
        self.name = name
        self.root = os.path.join(SRC, name)
        try:
            with open(os.path.join(self.root, ".pinned")) as f:
                _, self.version, self.file, self.sha256 = f.read().split()
        except OSError as e:
            raise Drift(f"{name}: not fetched ({e}); run "
                        "tests/engines/fetch.py") from None
        self._trees = {}
        # a wheel that ships its package under NAME-VER.data/purelib/
        # (OpenRLHF's): paths are relative to that folder
        self.src = self.root
        for d in sorted(os.listdir(self.root)):
            pure = os.path.join(self.root, d, "purelib")
            if d.endswith(".data") and os.path.isdir(pure):
                self.src = pure

    def __str__(self):
        return f"{self.name} {self.version}"

    def path(self, rel):
        return os.path.join(self.src, rel)

    def text(self, rel):
        try:
            with open(self.path(rel), encoding="utf-8") as f:
                return f.read()
        except OSError:
            raise Drift(f"{self}: no file {rel}") from None

    def tree(self, rel):
        if rel not in self._trees:
            t = ast.parse(self.text(rel), filename=self.path(rel))
            for n in ast.walk(t):
                for c in ast.iter_child_nodes(n):
                    c.parent = n
            self._trees[rel] = t
        return self._trees[rel]

    def grep(self, rel, needle):
        """Line numbers (1-based) of rel's lines containing needle."""
        return [i for i, ln in enumerate(self.text(rel).splitlines(), 1)
                if needle in ln]


_releases = {}


def release(name):
    if name not in _releases:
        _releases[name] = Release(name)
    return _releases[name]


def _body_defs(body):
    for n in body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                          ast.ClassDef)):
            yield n.name, n
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    yield t.id, n
        elif isinstance(n, (ast.If, ast.Try)):
            # definitions under `if TYPE_CHECKING:` or try/except imports
            yield from _body_defs(n.body)
            for h in getattr(n, "handlers", []):
                yield from _body_defs(h.body)
            yield from _body_defs(n.orelse)


def find(name, rel, qualname):
    """The definition qualname ("Class.method", "func", "CONST") in the
    release's file rel; its .where is "NAME VERSION rel:line"."""
    r = release(name)
    node = r.tree(rel)
    for part in qualname.split("."):
        found = None
        for n, d in _body_defs(getattr(node, "body", [])):
            if n == part:
                found = d	# the last definition wins, as at run time
        if found is None:
            raise Drift(f"{r}: {rel}: no {qualname} (looked for "
                        f"{part!r})")
        node = found
    node.where = f"{r} {rel}:{node.lineno}"
    return node


def has(name, rel, qualname):
    try:
        find(name, rel, qualname)
        return True
    except Drift:
        return False


def params(fn):
    """[(name, default source or None)] of a def, in order, with "*args"
    and "**kw" spelled so; keyword-only parameters after a "*" entry."""
    a = fn.args
    out = []
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + \
        [ast.unparse(d) for d in a.defaults]
    out += list(zip([p.arg for p in pos], defaults))
    if a.vararg:
        out.append(("*" + a.vararg.arg, None))
    elif a.kwonlyargs:
        out.append(("*", None))
    out += [(p.arg, None if d is None else ast.unparse(d))
            for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append(("**" + a.kwarg.arg, None))
    return out


def calls(name, rel, attr):
    """Every call of .attr(...) or attr(...) in the release's file rel:
    [(line, ast.Call)]."""
    out = []
    for n in ast.walk(release(name).tree(rel)):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if (isinstance(f, ast.Attribute) and f.attr == attr) or \
                (isinstance(f, ast.Name) and f.id == attr):
            out.append((n.lineno, n))
    return out


def py_files(name, under=""):
    """The release's .py files under a folder, relative to its root."""
    r = release(name)
    top = r.path(under)
    out = []
    for d, _, files in os.walk(top):
        out += [os.path.relpath(os.path.join(d, f), r.src)
                for f in files if f.endswith(".py")]
    return sorted(out)
