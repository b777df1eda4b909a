# SPDX-License-Identifier: LGPL-2.1-or-later
"""Only what pyproject.toml cannot say: a wheel that bundles
libgpusleep.so.0 (copied into gpusleep/ by `make wheel`) is tagged for
this platform (py3-none-linux_x86_64: the library is loaded with ctypes,
so any Python 3 will do); without it the wheel is pure."""

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
            return ("py3", "none", plat) if BUNDLED else (py, abi, plat)

    cmdclass["bdist_wheel"] = PlatformWheel
except ImportError:
    pass

setup(cmdclass=cmdclass, distclass=BundledDistribution)
