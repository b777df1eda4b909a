#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""gpusleepctl metrics --textfile in the VM, scraped by Debian's real
prometheus-node-exporter on 127.0.0.1: a new domain appears, the gpusleep
series follow a release and a resume, an engine that dies with memory
released is counted, an event overrun is counted and repaired, and the
module being unloaded and loaded again shows as gpusleep_up 0 then 1. The
exporter's timer is set to an hour, so every change seen here came through
netlink (the family's events, uevents for a new domain, nlctrl for the
module). Prints TAP."""

import fcntl
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ctl_test as ct  # noqa: E402  (the ioctl helpers and the engine/agent)

NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
BOUND = 60.0  # seconds: a bound for "never happens" under TCG, not a timing
GPU = "0000:41:00.0,GPU-5d1e0b3a-0000-1111-2222-333344445555"


def create(dev, name):
    buf = bytearray(struct.pack("<32s64sIIII2Q", name.encode(), GPU.encode(),
                                0, 0, 0, 0, 0, 0))
    fd = fcntl.ioctl(dev, ct.IOC_CREATE, buf, True)
    return fd, struct.unpack_from("<I", buf, 32 + 64 + 8)[0]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def loopback_up():
    """The VM's init leaves lo down: bring it up (root in the VM)."""
    try:
        with open("/sys/class/net/lo/flags") as f:
            if int(f.read(), 16) & 1:     # IFF_UP
                return True
    except OSError:
        return False
    r = subprocess.run(["ip", "link", "set", "lo", "up"], capture_output=True)
    return r.returncode == 0


class Scraper:
    def __init__(self, port):
        self.url = "http://127.0.0.1:%d/metrics" % port
        self.last = ""

    def scrape(self):
        try:
            with urllib.request.urlopen(self.url, timeout=10) as r:
                self.last = r.read().decode()
        except OSError as e:
            self.last = "# scrape failed: %s" % e
        return self.last

    @staticmethod
    def key(series):
        """name{a="x",b="y"} -> (name, sorted labels): any label order."""
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$', series)
        labels = re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"',
                            m.group(2) or "")
        return m.group(1), tuple(sorted(labels))

    def samples(self, text):
        out = {}
        for ln in text.splitlines():
            if ln and not ln.startswith("#"):
                series, _, v = ln.rpartition(" ")
                out[self.key(series)] = float(v)
        return out

    def value(self, text, series):
        return self.samples(text).get(self.key(series))

    def wait(self, want):
        """Scrape until every series in want has its value; True if so."""
        end = time.monotonic() + BOUND
        while True:
            text = self.scrape()
            if all(self.value(text, s) == v for s, v in want.items()):
                return True
            if time.monotonic() > end:
                return False
            time.sleep(0.2)

    def wait_pred(self, pred):
        """Scrape until pred(samples) holds; True if it did."""
        end = time.monotonic() + BOUND
        while True:
            if pred(self.samples(self.scrape())):
                return True
            if time.monotonic() > end:
                return False
            time.sleep(0.2)

    def diag(self, want):
        return "\n".join("%s: want %s, got %s" % (s, v, self.value(self.last, s))
                         for s, v in want.items())


def module_path():
    """The gpusleep.ko this VM loaded (the VM runner names it in
    $GPUSLEEP_VM_MODULES: the plain, 6.12 or debug build); else the builds
    there are, for a run outside the runner."""
    named = [p for p in os.environ.get("GPUSLEEP_VM_MODULES", "").split()
             if os.path.basename(p) == "gpusleep.ko" and os.path.exists(p)]
    if named:
        return named
    repo = os.path.normpath(os.path.join(HERE, "..", ".."))
    return [p for p in (os.path.join(repo, "build", "kmod-debug", "gpusleep.ko"),
                        os.path.join(repo, "gpusleep.ko")) if os.path.exists(p)]


def reload_module():
    for p in module_path():
        if subprocess.run(["insmod", p], capture_output=True).returncode == 0:
            return p
    return None


def main():
    print("TAP version 13")
    for what, path in (("device", ct.DEV), ("gpusleepctl", ct.CTL),
                       ("prometheus-node-exporter", NODE_EXPORTER)):
        if not os.path.exists(path):
            print("1..0 # SKIP %s missing (%s)" % (what, path))
            return 0
    if not loopback_up():
        print("1..0 # SKIP no loopback interface")
        return 0
    print("1..10")
    t = ct.Tap()
    tdir = tempfile.mkdtemp(prefix="textfile-", dir=os.environ.get("TMPDIR", "/tmp"))
    exp = subprocess.Popen([ct.CTL, "metrics", "--textfile", tdir,
                            "--interval", "3600"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    port = free_port()
    ne = subprocess.Popen([NODE_EXPORTER, "--web.listen-address=127.0.0.1:%d" % port,
                           "--collector.disable-defaults", "--collector.textfile",
                           "--collector.textfile.directory=" + tdir],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sc = Scraper(port)
    dev = engine = agent = -1
    try:
        # The exporter's first file first: the domain created next is news
        # to it, brought by the uevent of its sysfs device (a creation is
        # no state transition, so the gpusleep family says nothing).
        first = sc.wait({"gpusleep_up": 1})
        dev = os.open(ct.DEV, os.O_RDWR | os.O_CLOEXEC)
        engine, dom = create(dev, "exptest")
        agent = ct.attach(dev, dom, ct.ROLE_AGENT)
        lab = '{domain="%d",name="exptest"' % dom
        state = lambda s: 'gpusleep_domain_state%s,state="%s"}' % (lab, s)  # noqa: E731
        tag = lambda m, g: '%s%s,tag="%s"}' % (m, lab, g)  # noqa: E731
        awake = {"gpusleep_up": 1, "node_textfile_scrape_error": 0,
                 state("awake"): 1, state("released"): 0,
                 tag("gpusleep_tag_released", "weights"): 0,
                 tag("gpusleep_released_bytes", "weights"): 0}
        ok = first and sc.wait(awake)
        t.check("node_exporter serves the textfile: gpusleep_up 1, then a new domain, awake (uevent)",
                ok, sc.diag(awake) + "\n" + sc.last[-2000:])
        info = ('gpusleep_domain_info{domain="%d",name="exptest",gpu_ident="%s",'
                'pci_bus_id="00000000:41:00.0",UUID="%s",owner_uid="0"}'
                % (dom, GPU, GPU.split(",")[1]))
        t.check("scraped domain_info has DCGM's pci_bus_id and UUID",
                sc.value(sc.last, info) == 1,
                [ln for ln in sc.last.splitlines() if "domain_info" in ln])

        p = ct.bg("release", str(dom), "--tags", "weights")
        ct.answer(engine, ct.EV_DRAIN, ct.W)
        ct.answer(agent, ct.EV_PAUSE_TAG, ct.W, 0, 4096)
        out, err = p.communicate(timeout=BOUND)
        released = {state("released"): 1, state("awake"): 0,
                    tag("gpusleep_tag_released", "weights"): 1,
                    tag("gpusleep_released_bytes", "weights"): 4096,
                    "gpusleep_releases_total" + lab + "}": 1}
        ok = p.returncode == 0 and sc.wait(released)
        t.check("after a release: state released, weights released, 4096 bytes, releases_total 1",
                ok, out + err + sc.diag(released))
        dur = sc.value(sc.last, "gpusleep_last_release_duration_seconds" + lab + "}")
        t.check("release duration in seconds; resume: no sample yet (never)",
                dur is not None and dur > 0 and
                "gpusleep_last_resume_duration_seconds" + lab not in sc.last,
                sc.last[-1500:])

        p = ct.bg("resume", str(dom))
        ct.answer(agent, ct.EV_RESUME_TAG, ct.W, 0, 4096)
        ct.answer(engine, ct.EV_RESUME_SCHED)
        out, err = p.communicate(timeout=BOUND)
        resumed = dict(awake)
        resumed["gpusleep_resumes_total" + lab + "}"] = 1
        # released bytes are not checked here: what they read after a
        # resume is the module's business (sysfs_test)
        resumed.pop(tag("gpusleep_released_bytes", "weights"))
        ok = p.returncode == 0 and sc.wait(resumed)
        t.check("after a resume: state awake, nothing released, resumes_total 1",
                ok, out + err + sc.diag(resumed))

        p = ct.bg("release", str(dom), "--tags", "weights")
        ct.answer(engine, ct.EV_DRAIN, ct.W)
        ct.answer(agent, ct.EV_PAUSE_TAG, ct.W, 0, 4096)
        p.communicate(timeout=BOUND)
        sc.wait({state("released"): 1})
        os.close(agent)
        agent = -1
        os.close(engine)
        engine = -1
        died = {"gpusleep_engine_deaths_total": 1,
                "gpusleep_engine_deaths_released_total": 1}
        ok = sc.wait(died)
        t.check("an engine that dies with weights released: deaths_released_total 1; the domain is gone",
                ok and "gpusleep_domain_state" + lab not in sc.last,
                sc.diag(died))

        # An overrun: the exporter stopped while 3000 domains come and go
        # (each close announces awake -> dead); it must count the loss and
        # read the state again.
        os.kill(exp.pid, signal.SIGSTOP)
        for _ in range(3000):
            fd, _ = create(dev, "burst")
            os.close(fd)
        os.kill(exp.pid, signal.SIGCONT)
        key = sc.key
        ok = sc.wait_pred(lambda v: v.get(key("gpusleep_exporter_events_lost_total"), 0) >= 1
                          and v.get(key("gpusleep_domains")) == 0
                          and v.get(key("gpusleep_engine_deaths_total"), 0) >= 2)
        t.check("events lost while stopped (ENOBUFS): counted, state read again (0 domains)",
                ok, "\n".join(ln for ln in sc.last.splitlines()
                               if ln.startswith(("gpusleep_exporter", "gpusleep_domains",
                                                 "gpusleep_engine"))))
        os.close(dev)
        dev = -1

        # The module goes and comes back while the exporter runs.
        r = subprocess.run(["rmmod", "gpusleep"], capture_output=True, text=True)
        gone = {"gpusleep_up": 0}
        ok = r.returncode == 0 and sc.wait(gone)
        t.check("rmmod: gpusleep_up 0 (nlctrl told the exporter)", ok,
                r.stderr + sc.diag(gone))
        loaded = reload_module()
        back = {"gpusleep_up": 1, "gpusleep_domains": 0}
        ok = loaded and sc.wait(back)
        t.check("insmod again: gpusleep_up 1, 0 domains", ok,
                "insmod: %s\n%s" % (loaded, sc.diag(back)))
        # and events flow again: a new domain appears without the timer
        dev = os.open(ct.DEV, os.O_RDWR | os.O_CLOEXEC)
        engine, dom = create(dev, "exptest2")
        agent = ct.attach(dev, dom, ct.ROLE_AGENT)
        p = ct.bg("release", str(dom), "--tags", "weights")
        ct.answer(engine, ct.EV_DRAIN, ct.W)
        ct.answer(agent, ct.EV_PAUSE_TAG, ct.W, 0, 4096)
        p.communicate(timeout=BOUND)
        again = {'gpusleep_domain_state{domain="%d",name="exptest2",state="released"}' % dom: 1}
        t.check("after the reload, a release still shows (events rejoined)",
                sc.wait(again), sc.diag(again))
    finally:
        for fd in (agent, engine, dev):
            if fd >= 0:
                os.close(fd)
        if not os.path.exists("/sys/module/gpusleep"):
            reload_module()
        for proc in (ne, exp):
            proc.terminate()
            try:
                proc.communicate(timeout=BOUND)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
        for f in os.listdir(tdir):
            os.unlink(os.path.join(tdir, f))
        os.rmdir(tdir)
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
