# SPDX-License-Identifier: LGPL-2.1-or-later
"""torch_memory_saver.entrypoint: TorchMemorySaver, gpusleep's."""

from gpusleep.torch_memory_saver import (CpuBackupBackend,  # noqa: F401
                                         TorchMemorySaver)

__all__ = ["TorchMemorySaver", "CpuBackupBackend"]
