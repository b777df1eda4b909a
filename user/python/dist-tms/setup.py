# SPDX-License-Identifier: LGPL-2.1-or-later
"""What pyproject.toml cannot say: the hook libraries
(torch_memory_saver_hook_mode_*.abi3.so, copied here by `make wheel`) go
to the top of site-packages, beside the package, where torch_memory_saver
0.0.10's wheel puts them and slime's actor group looks for them; the
wheel holding them is a platform wheel for any Python 3 (py3-none: they
are loaded by the loader and ctypes), tagged GPUSLEEP_WHEEL_PLAT, which
`make wheel` sets from python.mk's PY_WHEEL_PLAT
(manylinux_2_17_x86_64.manylinux2014_x86_64: python.mk builds them for
the wheel with nothing newer; tests/host/test_wheel.py has auditwheel
check it), else this platform's own tag."""

import glob
import os

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
LIBS = sorted(glob.glob(os.path.join(HERE, "torch_memory_saver_hook_mode_*"
                                     ".abi3.so")))


class BuildPy(build_py):
    def run(self):
        super().run()
        for f in LIBS:
            self.copy_file(f, os.path.join(self.build_lib,
                                           os.path.basename(f)))

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [
            os.path.join(self.build_lib, os.path.basename(f)) for f in LIBS]


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return bool(LIBS) or super().has_ext_modules()


cmdclass = {"build_py": BuildPy}
try:
    from wheel.bdist_wheel import bdist_wheel

    class PlatformWheel(bdist_wheel):
        def get_tag(self):
            py, abi, plat = super().get_tag()
            plat = os.environ.get("GPUSLEEP_WHEEL_PLAT") or plat
            return ("py3", "none", plat) if LIBS else (py, abi, plat)

    cmdclass["bdist_wheel"] = PlatformWheel
except ImportError:
    pass

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
