#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The docs against what runs: gpusleepctl(8)'s JSON key lists against
what gpusleepctl -j prints over a fixture sysfs tree (list, status, group
list/show, error objects; the result and monitor keys are checked in the
VM by tests/vm/ctl_test.py with mankeys.py), every option each command's
--help names documented in the man page, the example sessions marked
<!-- session: fixture --> in README.md and docs/*.md produced again and
compared, every link in README.md and docs/*.md staying inside the
repository (and resolving), performance figures only in the tables
rendered from docs/bench-results.json (README.md) and in
docs/benchmarks.md, every key list of the man page compared by some test,
every "$ gpusleepctl" session of the docs marked as checked (here, or
<!-- session: vm --> by tests/vm/docs_test.py), and the README's demo
block an excerpt of docs/demo.md's run (make demo pastes both; running
the demo costs too much for make check). Prints TAP.

--update rewrites the fixture sessions with what gpusleepctl prints."""

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mankeys import doc_files, json_keys, man_keys, MAN  # noqa: E402
from test_ctl_exporter import write_domain  # noqa: E402

REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
CTL = os.environ.get("GPUSLEEP_CTL") or os.path.join(REPO, "build", "bin",
                                                     "gpusleepctl")
SESSION = "<!-- session: fixture -->"
UUID = "GPU-5d1e0b3a-0000-1111-2222-333344445555"


class Tap:
    def __init__(self):
        self.n = self.failed = 0

    def check(self, name, cond, diag=""):
        self.n += 1
        self.failed += not cond
        print("%s %d %s" % ("ok" if cond else "not ok", self.n, name))
        if not cond:
            for line in str(diag).splitlines():
                print("# " + line)
        sys.stdout.flush()


def fixture(root):
    """The node of the docs' sessions: llm0 with its weights released,
    llm1 awake without an agent, tp0 and tp1 the two ranks of group tp,
    released (by lease 2: docs/arbiter.md). A module with tenants: llm0
    and the ranks reported by their agents, llm1 not yet."""
    write_domain(root, 1, name="llm0", gpu="0000:41:00.0," + UUID,
                 owner_pid="119", tags="weights,kv_cache",
                 tag_kinds="memory,kv_cache", released_tags="weights",
                 tag_bytes_released="15032385536,0",
                 tag_freed_bytes="15032385536,0", tag_generations="0,0",
                 resident_bytes="1288490188", resident_source="process",
                 unconfirmed_tags="", shortfall_tags="", shortfalls="0",
                 group="", group_id="0", **tenant(
                     "-5", UUID[4:], lease="0", leased="",
                     policy="backup,discard", mapped="0,4294967296",
                     torch="1073741824", graphs="0",
                     process="6652166144"))
    write_domain(root, 2, name="llm1", gpu="0000:42:00.0", owner_pid="121",
                 state="awake", released_tags="", agent_attached="0",
                 tags="weights,kv_cache", tag_kinds="memory,kv_cache",
                 tag_bytes_released="0,0", tag_freed_bytes="0,0",
                 tag_generations="0,0", releases="0", last_release_us="0",
                 resident_bytes="0", resident_source="unknown",
                 unconfirmed_tags="", shortfall_tags="", shortfalls="0",
                 group="", group_id="0", **tenant("10", "", lease="0",
                                                  leased=""))
    for did in (3, 4):
        write_domain(root, did, name="tp%d" % (did - 3),
                     gpu="0000:%02x:00.0" % (0x40 + did), owner_pid="130",
                     tags="weights,kv_cache", tag_kinds="memory,kv_cache",
                     released_tags="weights,kv_cache", group="tp",
                     group_id="1",
                     tag_bytes_released="8589934592,4294967296",
                     tag_freed_bytes="0,0", tag_generations="1,1",
                     unconfirmed_tags="", shortfall_tags="", shortfalls="0",
                     resident_bytes="0", resident_source="unknown",
                     **tenant("0", UUID[4:], lease="2",
                              leased="weights,kv_cache",
                              policy="backup,discard", mapped="0,0"))


def tenant(prio, uuid, lease, leased, policy="", mapped="", torch="0",
           graphs="0", process="0"):
    """The files of a module with tenants (docs/arbiter.md): before a
    report (uuid "") the per-tag ones are empty."""
    rep = bool(uuid)
    return {"priority": prio, "yieldable": "0", "gpu_uuid": uuid,
            "lease_id": lease, "leased_tags": leased,
            "host_bytes": "15032385536" if rep else "0",
            "tag_policy": policy,
            "tag_content": "kept,zeroed" if rep else "",
            "tag_verified": "1,0" if rep else "",
            "tag_size_bytes": "15032385536,4294967296" if rep else "",
            "tag_mapped_bytes": mapped,
            "tag_host_bytes": "15032385536,0" if rep else "",
            "resident_torch_bytes": torch, "resident_graph_bytes": graphs,
            "resident_process_bytes": process,
            "resident_process_source": "process" if rep else "unknown"}


def run(env, argv):
    r = subprocess.run([CTL] + argv, capture_output=True, text=True,
                       env=env, timeout=60)
    return r


def sessions(text, env):
    """text with every fixture session's output produced again."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        out.append(lines[i])
        if lines[i].strip() != SESSION:
            i += 1
            continue
        i += 1
        out.append(lines[i])		# ```
        i += 1
        while not lines[i].startswith("```"):
            ln = lines[i]
            i += 1
            if not ln.startswith("$ gpusleepctl "):
                continue		# an old output line
            out.append(ln)
            r = run(env, shlex.split(ln[2:])[1:])
            out.extend(r.stdout.rstrip("\n").split("\n"))
            if r.returncode:
                out.append("[exit %d]" % r.returncode)
        out.append(lines[i])		# ```
        i += 1
    return "\n".join(out)


def man_sessions(text, env):
    """The man page with its fixture session (.\\" session: fixture,
    then .nf ... .fi) produced again."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        out.append(lines[i])
        i += 1
        if not lines[i - 1].startswith('.\\" session: fixture'):
            continue
        out.append(lines[i])		# .nf
        i += 1
        while lines[i] != ".fi":
            ln = lines[i]
            i += 1
            if not ln.startswith("$ gpusleepctl "):
                continue
            out.append(ln)
            r = run(env, shlex.split(ln[2:].replace("\\-", "-"))[1:])
            out.extend(o.replace("\\", "\\\\").replace("-", "\\-")
                       for o in r.stdout.rstrip("\n").split("\n"))
    return "\n".join(out)


def unman(s):
    return s.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "")


def main():
    update = "--update" in sys.argv
    print("TAP version 13")
    if not os.access(CTL, os.X_OK):
        print("1..0 # SKIP %s not built" % CTL)
        return 0
    t = Tap()
    tmp = tempfile.TemporaryDirectory(prefix="gs-docs-",
                                      dir=os.path.join(REPO, "build"))
    root = os.path.join(tmp.name, "sys")
    os.makedirs(root)
    fixture(root)
    env = dict(os.environ, GPUSLEEP_SYSFS=root,
               GPUSLEEP_DEVICE=os.path.join(tmp.name, "no-device"))
    print("1..12")

    # JSON keys against the man page
    lst = json.loads(run(env, ["-j", "list"]).stdout or "[]")
    st = json.loads(run(env, ["-j", "status"]).stdout or "[]")
    have_list = set().union(*(json_keys(d) for d in lst)) if lst else set()
    have_status = set().union(*(json_keys(d) for d in st)) if st else set()
    t.check("gpusleepctl(8): the keys of list --json",
            have_list and have_list == man_keys("list"),
            "printed %s\ndocumented %s" % (sorted(have_list),
                                           sorted(man_keys("list"))))
    doc = man_keys("list") | man_keys("status")
    t.check("gpusleepctl(8): the keys of status --json",
            have_status and have_status == doc,
            "printed, not documented: %s\ndocumented, not printed: %s" %
            (sorted(have_status - doc), sorted(doc - have_status)))
    gl = json.loads(run(env, ["-j", "group", "list"]).stdout or "[]")
    gs = json.loads(run(env, ["-j", "group", "show", "tp"]).stdout or "{}")
    have_gl = set().union(*(json_keys(g) for g in gl)) if gl else set()
    t.check("gpusleepctl(8): the keys of group list and group show",
            have_gl == man_keys("group-list") and
            json_keys(gs) == man_keys("group-list") | man_keys("group-show"),
            (sorted(have_gl), sorted(json_keys(gs))))
    errs = [run(env, a) for a in (["-j", "release", "llm0", "--tags", ""],
                                  ["-j", "group", "show", "nope"],
                                  ["-j", "status", "nope"],
                                  ["-j", "release", "--group", "tp"])]
    have_err = set()
    for r in errs:
        have_err |= json_keys(json.loads(r.stdout or "{}"))
    t.check("gpusleepctl(8): the keys of a JSON error",
            {"error", "status", "message"} <= have_err <= man_keys("error"),
            "%s\n%s" % (sorted(have_err), errs))

    # options: what --help names, the man page documents
    man = unman(open(MAN).read())
    missing = []
    for cmd in (["list"], ["status"], ["release"], ["resume"], ["wait"],
                ["group"], ["monitor"], ["metrics"], ["acquire"],
                ["reclaim"], ["leases"], []):
        text = run(env, cmd + ["--help"]).stdout
        for opt in set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", text)):
            if opt not in man:
                missing.append("%s: %s" % (" ".join(cmd) or "gpusleepctl",
                                           opt))
    t.check("gpusleepctl(8) documents every option --help names",
            not missing, "\n".join(missing))

    # sessions
    stale = []
    for f in doc_files():
        text = open(f).read()
        if SESSION not in text:
            continue
        new = sessions(text, env)
        if new != text:
            if update:
                with open(f, "w") as fh:
                    fh.write(new)
            else:
                stale.append(os.path.relpath(f, REPO))
    text = open(MAN).read()
    new = man_sessions(text, env)
    if new != text:
        if update:
            with open(MAN, "w") as fh:
                fh.write(new)
        else:
            stale.append("tools/gpusleepctl.8")
    t.check("the fixture sessions in the docs are what gpusleepctl prints",
            not stale, "differ (python3 tests/host/test_docs.py --update): "
            + ", ".join(stale))

    # links stay inside the repository
    bad = []
    link = re.compile(r"\]\(([^)\s]+)\)")
    for f in doc_files():
        text = open(f).read()
        if "../shared" in text or "ANCHORS.md" in text:
            bad.append("%s: names a file outside the repository"
                       % os.path.relpath(f, REPO))
        for m in link.finditer(text):
            target = m.group(1).split("#")[0]
            if not target or re.match(r"^[a-z]+:", target):
                continue
            path = os.path.normpath(os.path.join(os.path.dirname(f), target))
            if not path.startswith(REPO + os.sep) or not os.path.exists(path):
                bad.append("%s: %s" % (os.path.relpath(f, REPO), target))
    t.check("links in README.md and docs/ stay in the repository and resolve",
            not bad, "\n".join(bad))

    # performance figures in one place
    ratio = re.compile(r"\b\d+\.\d+x\b")
    seen = []
    for f in doc_files():
        if f.endswith("benchmarks.md"):
            continue
        generated = False
        for n, ln in enumerate(open(f), 1):
            # README's table is rendered from docs/bench-results.json
            # (tests/host/test_bench_report.py checks it)
            if ln.startswith("<!-- bench-table -->"):
                generated = True
            elif ln.startswith("<!-- /bench-table -->"):
                generated = False
            if generated:
                continue
            if ratio.search(ln):
                seen.append("%s:%d: %s" % (os.path.relpath(f, REPO), n,
                                          ln.strip()[:120]))
    t.check("performance figures only in docs/benchmarks.md", not seen,
            "\n".join(seen))
    with open(os.path.join(REPO, "README.md")) as f:
        readme = f.read()
    t.check("README links to the figures", "docs/benchmarks.md" in readme)

    # nothing documented escapes the checks
    names = re.findall(r'^\.\\" keys (\S+)$', open(MAN).read(), re.M)
    tests = ""
    for d in ("host", "vm", "vm-py"):
        for f in sorted(os.listdir(os.path.join(REPO, "tests", d))):
            if f.endswith(".py") and f != "mankeys.py":
                tests += open(os.path.join(REPO, "tests", d, f)).read()
    unchecked = [n for n in names if 'man_keys("%s")' % n not in tests]
    t.check("every key list of gpusleepctl(8) is compared by a test",
            names and not unchecked, "not compared: %s" % unchecked)
    loose = []
    for f in doc_files():
        lines = open(f).read().split("\n")
        fence = None
        for n, ln in enumerate(lines):
            if ln.startswith("```"):
                fence = None if fence is not None else n
            elif fence is not None and ln.startswith("$ gpusleepctl ") and \
                    lines[fence - 1].strip() not in (SESSION,
                                                     "<!-- session: vm -->"):
                loose.append("%s:%d: %s" % (os.path.relpath(f, REPO), n + 1,
                                            ln))
    t.check("every gpusleepctl session in the docs is checked (a fixture "
            "session here, a vm one by tests/vm/docs_test.py)", not loose,
            "\n".join(loose))

    # the README's demo block: an excerpt, in order, of docs/demo.md's run
    def block_after(text, heading):
        lines = text.split("\n")
        i = next(n for n, ln in enumerate(lines) if ln.startswith(heading))
        i = lines.index("```", i) + 1
        return lines[i:lines.index("```", i)]
    demo = block_after(open(os.path.join(REPO, "docs", "demo.md")).read(),
                       "## A real run")
    excerpt = block_after(readme, "<!-- Demo section")
    at, missing = 0, []
    for ln in excerpt:
        if ln.startswith("[..."):
            continue
        try:
            at = demo.index(ln, at) + 1
        except ValueError:
            missing.append(ln)
    t.check("the README's demo block is an excerpt of docs/demo.md's run",
            excerpt and not missing, "\n".join(missing))
    tmp.cleanup()
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
