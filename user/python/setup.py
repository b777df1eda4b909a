# SPDX-License-Identifier: LGPL-2.1-or-later
"""Only what pyproject.toml cannot say: a wheel that bundles
libgpusleep.so.0 (copied into gpusleep/ by `make wheel`) is a platform
wheel for any Python 3 (py3-none: the library is loaded with ctypes),
tagged GPUSLEEP_WHEEL_PLAT, which `make wheel` sets from python.mk's
PY_WHEEL_PLAT (manylinux_2_17_x86_64.manylinux2014_x86_64: the library it
builds for the wheel needs no more; tests/host/test_wheel.py has
auditwheel check it); without it this platform's own tag (linux_x86_64),
which promises nothing beyond this machine. Without the library the
wheel is pure."""

import os

from setuptools import Distribution, setup

BUNDLED = os.path.exists(os.path.join(os.path.dirname(os.path.abspath(
    __file__)), "gpusleep", "libgpusleep.so.0"))


class BundledDistribution(Distribution):
    def has_ext_modules(self):
        # a platform wheel, its files in platlib, when it holds the library
        return BUNDLED or super().has_ext_modules()


cmdclass = {}
try:
    from wheel.bdist_wheel import bdist_wheel

    class PlatformWheel(bdist_wheel):
        def get_tag(self):
            py, abi, plat = super().get_tag()
            plat = os.environ.get("GPUSLEEP_WHEEL_PLAT") or plat
            return ("py3", "none", plat) if BUNDLED else (py, abi, plat)

    cmdclass["bdist_wheel"] = PlatformWheel
except ImportError:
    pass

setup(cmdclass=cmdclass, distclass=BundledDistribution)
