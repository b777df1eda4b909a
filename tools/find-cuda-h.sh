#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/find-cuda-h.sh: print the directory holding CUDA's cuda.h, or
# nothing (status 1). Looked for in order: $CUDA_HOME/include, the
# toolkit's default ($GS_CUDA_DEFAULT, /usr/local/cuda)/include, then the
# headers PyTorch's pip wheels bring (nvidia/*/include/cuda.h under any
# directory of the Python's sys.path: nvidia/cuda_runtime/include of the
# CUDA 12 wheels, nvidia/cu13/include of the CUDA 13 ones). $PYTHON is the
# Python asked (default python3). Used by user/user.mk and
# bench/gpu/check.sh.
for d in ${CUDA_HOME:+"$CUDA_HOME"} "${GS_CUDA_DEFAULT:-/usr/local/cuda}"; do
	if [ -f "$d/include/cuda.h" ]; then
		echo "$d/include"
		exit 0
	fi
done
"${PYTHON:-python3}" - <<'PY' 2>/dev/null
import glob, os, sys
for d in sys.path:
    hits = sorted(glob.glob(os.path.join(d or ".", "nvidia", "*", "include",
                                         "cuda.h")))
    if hits:
        print(os.path.dirname(os.path.abspath(hits[-1])))
        raise SystemExit(0)
raise SystemExit(1)
PY
