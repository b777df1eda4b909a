#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The stand-ins of the engines (tests/vm-py/standin/sglang, .../vllm),
each module against the pinned real module it replaces
(tests/engines/pins.txt; the same path in the release): every function,
class, method, class field and constant a stand-in defines is in the
real module, with the same parameters (names, order, defaults), the
same kind (staticmethod, classmethod, property, contextmanager), the
same value where the real one is a literal and the same default
expression for a class field; a name the real module lacks is drift unless
the stand-in lists it in its STANDIN_ONLY tuple (what it adds for the
tests). Each stand-in module's docstring says which release it models
("Models sglang 0.5.23"), which must be the pinned version. A drift
fails naming the real file:line and the stand-in's.

Files directly under tests/vm-py/standin/ are the tests' driver scripts
(a scheduler process, ...), not stand-ins of a real module."""

import ast
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm-py"))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))
from gstest import Tap, check, REPO  # noqa: E402
import pinned  # noqa: E402

STANDIN = os.path.join(REPO, "tests", "vm-py", "standin")
RELEASES = ("sglang", "vllm")
KINDS = {"staticmethod", "classmethod", "property", "contextmanager",
         "abstractmethod"}

TESTS = [f"{r}: every stand-in module says it models the pinned version"
         for r in RELEASES] + \
        [f"{r}: every stand-in name and signature is the pinned module's"
         for r in RELEASES]


def modules(release):
    """The stand-in modules of release: paths relative to STANDIN."""
    out = []
    for d, _, files in os.walk(os.path.join(STANDIN, release)):
        out += [os.path.relpath(os.path.join(d, f), STANDIN)
                for f in files if f.endswith(".py")]
    return sorted(out)


def parse(rel):
    path = os.path.join(STANDIN, rel)
    with open(path) as f:
        return ast.parse(f.read(), filename=path)


def versions(release):
    r = pinned.release(release)
    bad = []
    mods = modules(release)
    check(mods, f"no stand-in modules under {STANDIN}/{release}")
    for rel in mods:
        doc = ast.get_docstring(parse(rel)) or ""
        m = re.search(rf"\bmodels\s+{release}\s+(\S+?)[.,;:]?(\s|$)", doc,
                      re.I)
        if not m:
            bad.append(f"{rel}: its docstring does not say "
                       f"'Models {release} {r.version}'")
        elif m.group(1) != r.version:
            bad.append(f"{rel}: models {release} {m.group(1)}, pinned "
                       f"{r.version}")
    check(not bad, "\n".join(bad))


def kinds(node):
    out = set()
    for d in getattr(node, "decorator_list", []):
        name = ast.unparse(d).split("(")[0].split(".")[-1]
        if name in KINDS:
            out.add(name)
    return out


def short(node):
    s = ast.unparse(node)
    return s if len(s) <= 120 else s[:117] + "..."


def literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def declared(tree, name):
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name
                for t in n.targets):
            return set(ast.literal_eval(n.value))
    return set()


def standin_only(tree):
    return declared(tree, "STANDIN_ONLY")


def subsequence(ps, pr):
    """ps: the real parameters pr, some left out, in order, same kinds:
    a keyword-only one stays after the "*" (or "*args")."""
    it = iter(pr)
    return all(any(p == q for q in it) for p in ps)


def find(release, rel, qual):
    """pinned.find, and for a class member not in the class itself, in
    its bases defined in the same file (a msgspec Struct's fields come
    from BaseReq, ...)."""
    try:
        return pinned.find(release, rel, qual)
    except pinned.Drift:
        if "." not in qual:
            raise
        owner, name = qual.rsplit(".", 1)
        try:
            cls = pinned.find(release, rel, owner)
        except pinned.Drift:
            raise
        for b in getattr(cls, "bases", []):
            if isinstance(b, ast.Name) and pinned.has(release, rel, b.id):
                try:
                    return find(release, rel, f"{b.id}.{name}")
                except pinned.Drift:
                    continue
        raise


def defines(tree):
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                              ast.ClassDef, ast.Assign, ast.AnnAssign))
               for n in tree.body)


def compare(release, rel, tree, bad):
    """Each definition of the stand-in module tree against the real one."""
    # the releases keep their package at the top of the unpacked tree
    real_rel = rel
    extra = standin_only(tree)
    subset = declared(tree, "STANDIN_SUBSET")
    try:
        pinned.release(release).tree(real_rel)
    except pinned.Drift as e:
        # a package __init__ of nothing where the release has none
        # (a namespace package) is no drift
        if defines(tree) or not rel.endswith("__init__.py"):
            bad.append(f"{rel}: {e}")
        return

    def where(n):
        return f"tests/vm-py/standin/{rel}:{n.lineno}"

    def one(qual, node):
        if qual.split(".")[0] in extra or qual in extra:
            return
        try:
            real = find(release, real_rel, qual)
        except pinned.Drift as e:
            bad.append(f"{where(node)}: {qual}: {e}")
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not isinstance(real, (ast.FunctionDef, ast.AsyncFunctionDef)):
                bad.append(f"{where(node)}: {qual} is a function, "
                           f"{real.where} is not")
                return
            ps, pr = pinned.params(node), pinned.params(real)
            if ps != pr and not (qual in subset and subsequence(ps, pr)):
                bad.append(f"{where(node)}: {qual}{ps}\n  but {real.where}: "
                           f"{qual}{pr}")
            if kinds(node) != kinds(real):
                bad.append(f"{where(node)}: {qual} is {sorted(kinds(node))},"
                           f" {real.where} {sorted(kinds(real))}")
            if isinstance(node, ast.AsyncFunctionDef) != \
                    isinstance(real, ast.AsyncFunctionDef):
                bad.append(f"{where(node)}: {qual}: async differs from "
                           f"{real.where}")
        elif isinstance(node, ast.ClassDef):
            if not isinstance(real, ast.ClassDef):
                bad.append(f"{where(node)}: {qual} is a class, {real.where} "
                           "is not")
                return
            for n in node.body:
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                  ast.ClassDef)):
                    one(f"{qual}.{n.name}", n)
                elif isinstance(n, ast.AnnAssign) and \
                        isinstance(n.target, ast.Name):
                    one(f"{qual}.{n.target.id}", n)
                elif isinstance(n, ast.Assign):
                    for t in n.targets:
                        if isinstance(t, ast.Name):
                            one(f"{qual}.{t.id}", n)
        else:	# a constant or a field
            value = getattr(node, "value", None)
            rvalue = getattr(real, "value", None)
            if value is None or rvalue is None:
                if (value is None) != (rvalue is None):
                    bad.append(f"{where(node)}: {qual} has "
                               f"{'no ' if value is None else ''}default, "
                               f"{real.where} "
                               f"{'none' if rvalue is None else 'one'}")
                return
            rv = literal(rvalue)
            if rv is not None and literal(value) != rv:
                bad.append(f"{where(node)}: {qual} = {short(value)}, "
                           f"{real.where}: {short(rvalue)}")
            elif rv is None and isinstance(node, ast.AnnAssign) and \
                    "." in qual and ast.unparse(value) != ast.unparse(rvalue):
                # a class field's default (field(default_factory=set)...)
                bad.append(f"{where(node)}: field {qual} = "
                           f"{short(value)}, {real.where}: {short(rvalue)}")

    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                          ast.ClassDef)):
            one(n.name, n)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id not in (
                        "STANDIN_ONLY", "STANDIN_SUBSET") and \
                        not t.id.startswith("__"):
                    one(t.id, n)


def signatures(release):
    bad = []
    for rel in modules(release):
        compare(release, rel, parse(rel), bad)
    check(not bad, f"{len(bad)} drifts from {pinned.release(release)}:\n" +
          "\n".join(bad))


def main():
    tap = Tap(TESTS)
    for i, r in enumerate(RELEASES):
        tap.run(TESTS[i], versions, r)
    for i, r in enumerate(RELEASES):
        tap.run(TESTS[len(RELEASES) + i], signatures, r)
    tap.done()


if __name__ == "__main__":
    main()
