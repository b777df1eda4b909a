#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The deployment picture (docs/deployment.svg, shown in the README and
docs/deployment.md): one GPU node of a Kubernetes cluster with gpusleep,
drawn from the files that deploy it (packaging/kubernetes, packaging/cdi,
packaging/containers): the RL pod (trainer and colocated engine in one
container), the driver and exporter DaemonSets, the CDI spec, the module
and what it offers (/dev/gpusleep, sysfs, netlink), DKMS and the MOK key
of Secure Boot, the node exporter and Prometheus.

    deployment.py OUT.svg

tests/host/test_figures.py checks that docs/deployment.svg is what this
script draws and that the names it shows are those of the manifests."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg import Svg  # noqa: E402

POD = "#e8f1fb"
DS = "#eef7ea"
KERNEL = "#fdf1e1"
HOST = "#f6f6f6"
OUTSIDE = "#f3eefa"


def draw(out):
    s = Svg(960, 630, "gpusleep on a GPU node: pods, DaemonSets, module")
    s.text(480, 26, "gpusleep on one GPU node (Kubernetes)", 17, "middle",
           "bold")

    # the node
    s.box(20, 44, 740, 570, fill="white", stroke="#888")
    s.text(32, 64, "GPU node (label gpusleep.io/node=true)", 13,
           weight="bold")

    # RL pod
    s.box(40, 78, 420, 212, fill=POD, label="rl-colocated")
    s.lines(52, 98, ["*RL pod: one container (a Ray worker)",
                     "one user and pid namespace: the trainer reaches",
                     "the engine's domains by id; CDI gives it /dev/gpusleep"],
            12)
    s.box(56, 150, 170, 112, fill="white", label="trainer")
    s.lines(66, 170, ["*trainer actor", "verl / OpenRLHF / slime",
                      "EngineSleep: Group llm0", "release, resume(weights)",
                      "update weights, resume"], 11)
    s.box(250, 150, 194, 112, fill="white", label="engine")
    s.lines(260, 170, ["*engine ranks llm0-tp<r>", "SGLang: SchedulerHook",
                       "vLLM: gpusleep-vllm plugin", "agent: unmap / map",
                       "(CUDA VMM, libgpusleep)"], 11)
    s.arrow(226, 206, 250, 206, both=True)

    # /dev/shm
    s.box(40, 306, 200, 64, fill=HOST, label="/dev/shm")
    s.lines(52, 326, ["*/dev/shm (tmpfs)", "host-staged weights",
                      "gpusleep.weights"], 11)
    s.arrow(120, 262, 120, 306, dash=True)

    # driver DaemonSet, the CDI spec, the exporter
    s.box(480, 78, 260, 112, fill=DS, label="gpusleep-driver")
    s.lines(492, 98, ["*gpusleep-driver (DaemonSet)",
                      "privileged, hostNetwork: module",
                      "loaded, else modprobe, else DKMS",
                      "build and sign (Secret gpusleep-mok)",
                      "writes the CDI spec"], 11)
    s.box(480, 202, 260, 60, fill=HOST, label="/etc/cdi")
    s.lines(492, 220, ["*/etc/cdi/gpusleep.yaml (CDI spec)",
                       "containerd / CRI-O inject",
                       "/dev/gpusleep into the pod"], 11)
    s.arrow(610, 190, 610, 202)
    s.arrow(480, 232, 460, 232)
    s.box(480, 274, 260, 86, fill=DS, label="gpusleep-exporter")
    s.lines(492, 294, ["*gpusleep-exporter (DaemonSet)",
                       "gpusleepctl metrics --textfile",
                       "gpusleep.prom for node_exporter",
                       "no privilege, hostNetwork"], 11)

    # kernel
    s.box(40, 392, 700, 136, fill=KERNEL, label="kernel")
    s.text(52, 412, "node kernel", 13, weight="bold")
    s.box(56, 422, 200, 92, fill="white", label="gpusleep.ko")
    s.lines(66, 442, ["*gpusleep.ko", "domains, tags, groups",
                      "release waits for the drain",
                      "all or nothing per group"], 11)
    s.box(280, 422, 140, 40, fill="white", label="/dev/gpusleep")
    s.lines(290, 438, ["*/dev/gpusleep", "ioctls, fds, events"], 10)
    s.box(280, 474, 140, 40, fill="white", label="sysfs")
    s.lines(290, 490, ["*/sys/class/gpusleep", "world-readable state"], 10)
    s.box(440, 422, 140, 40, fill="white", label="netlink")
    s.lines(450, 438, ["*netlink: gpusleep", "initial netns"], 10)
    s.box(600, 422, 124, 92, fill="white", label="dkms")
    s.lines(610, 442, ["*DKMS", "built per kernel", "signed: MOK key",
                       "(Secure Boot)"], 10)
    s.arrow(256, 442, 280, 442)
    s.arrow(256, 494, 280, 494)
    s.arrow(600, 468, 256, 468, dash=True)

    # GPU
    s.box(40, 544, 700, 56, fill=HOST, label="gpu")
    s.lines(52, 564, ["*GPUs (NVIDIA driver)",
                      "the engine's agent unmaps and maps its memory (CUDA "
                      "VMM); the module touches no GPU memory"], 11)

    # the calls
    s.path([(200, 262), (200, 282), (266, 282), (266, 440), (280, 440)])
    s.text(272, 330, "release / resume", 11, color="#333")
    s.text(272, 344, "(group, trainer)", 11, color="#333")
    s.arrow(372, 262, 372, 422, both=True)
    s.text(378, 380, "drain, unmap,", 11, color="#333")
    s.text(378, 394, "map", 11, color="#333")
    s.path([(740, 120), (750, 120), (750, 480), (724, 480)], dash=True)
    s.text(746, 404, "loads", 10, "end", color="#333")
    s.arrow(520, 422, 520, 360, dash=True)
    s.text(526, 384, "events, sysfs", 10, color="#333")

    # outside the node
    s.box(780, 78, 160, 120, fill=OUTSIDE, label="image")
    s.lines(792, 98, ["*node image", "DKMS + module,", "udev rule,",
                      "MOK cert enrolled", "(or the driver", "DaemonSet)"],
            11)
    s.box(780, 286, 160, 62, fill=OUTSIDE, label="node_exporter")
    s.lines(792, 306, ["*node_exporter", "textfile collector"], 11)
    s.arrow(740, 317, 780, 317)
    s.box(780, 382, 160, 90, fill=OUTSIDE, label="prometheus")
    s.lines(792, 402, ["*Prometheus", "packaging/prometheus",
                       "alert: released", "too long"], 11)
    s.arrow(860, 348, 860, 382)
    s.write(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    draw(sys.argv[1])
