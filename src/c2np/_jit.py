"""The numba decorator of c2np's compiled kernels: machine code cached on disk beside the
kernel's file (or in ``NUMBA_CACHE_DIR``) where a cache folder is writable, compiled once per
process otherwise. Imported only by the kernel modules (it imports numba)."""

from __future__ import annotations

import numba


def _jit(fn):
    try:
        return numba.njit(cache=True, nogil=True, boundscheck=False)(fn)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return numba.njit(cache=False, nogil=True, boundscheck=False)(fn)

