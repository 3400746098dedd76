"""Whether numba's on-disk cache already holds c2np's compiled kernels, so that a command can
say, in one line, that a first compile is running (the compile itself happens on first use,
:mod:`c2np._jit`). Imports neither numba nor the kernel modules."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

__all__ = ["cache_is_warm", "compile_notice"]


def _cache_dirs(module: str) -> list[Path]:
    """Where numba caches the kernels of ``module`` (a dotted name): ``NUMBA_CACHE_DIR`` when
    set, else the ``__pycache__`` beside the module's file."""
    root = os.environ.get("NUMBA_CACHE_DIR")
    if root:
        return [Path(root)]
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return []
    return [Path(spec.origin).parent / "__pycache__"]


def cache_is_warm(*modules: str) -> bool:
    """True when numba's cache holds an index file (``*.nbi``) of every kernel module named
    (dotted names, e.g. ``c2np.metrics._pair_kernels``)."""
    for module in modules:
        stem = module.rsplit(".", 1)[-1]
        if not any(next(d.rglob(f"{stem}*.nbi"), None) is not None for d in _cache_dirs(module) if d.is_dir()):
            return False
    return True


def compile_notice(what: str, seconds: str, *modules: str) -> str | None:
    """The one-line notice of a first compile of ``modules`` (``what`` they compute, about
    ``seconds`` on one core), or None when the cache is warm."""
    if cache_is_warm(*modules):
        return None
    return f"c2np: compiling the {what} once (numba, {seconds} on one core; cached on disk for every later run)"
