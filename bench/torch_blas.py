#!/usr/bin/python3
"""Says which BLAS Debian's PyTorch runs its CPU GEMMs on, and which kernel:
the libraries mapped after one matmul, and for OpenBLAS its build and the
core it chose (openblas_get_config, openblas_get_corename). Prints one
line: "openblas: OpenBLAS 0.3.21 ... ; core Haswell", or "reference:
/usr/lib/.../blas/libblas.so.3" for the reference BLAS (Netlib's, about 1%
of a modern core: no PyTorch column is printed from it), or "unknown".
Run it in the environment the PyTorch peer runs in."""
import ctypes

import torch

a = torch.randn(64, 64)
(a @ a).sum()
libs = sorted({line.split()[-1] for line in open("/proc/self/maps")
               if "blas" in line.split()[-1].lower()})
line = "unknown: " + (", ".join(libs) or "no BLAS library mapped")
for path in libs:
    if "openblas" in path:
        lib = ctypes.CDLL(path)
        info = []
        for name in ("openblas_get_config", "openblas_get_corename"):
            fn = getattr(lib, name)
            fn.restype = ctypes.c_char_p
            info.append(fn().decode())
        line = f"openblas: {info[0]}; core {info[1]}"
        break
    if "/blas/" in path:  # the reference BLAS, Debian's libblas3
        line = f"reference: {path}"
print(line)
