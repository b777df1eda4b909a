# SPDX-License-Identifier: GPL-2.0
"""A package of the SGLang stand-in. Models sglang 0.5.23 (a namespace
package in its wheel)."""
