"""A store's fingerprint does not depend on the CPU: the same build under different OpenBLAS
kernels (the one a CPU picks, or OPENBLAS_CORETYPE) writes the same fingerprint.

Why it matters: when the CIF sites went through ASE's Cartesian round trip and the
quaternions were normalised with BLAS, the last bits of the cells and the recipe table
(both hashed as float64) followed the kernel, and a run's recorded fingerprint could not be
reproduced on another CPU."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


def _openblas() -> bool:
    try:
        cfg = np.show_config(mode="dicts")
    except TypeError:  # older NumPy: no dict mode
        return False
    blas = (cfg or {}).get("Build Dependencies", {}).get("blas", {})
    return "openblas" in str(blas.get("name", "")).lower()


def _coretypes() -> list[str]:
    """OpenBLAS kernels this CPU can run: SSE3 always, AVX2 and AVX-512 where the flags say."""
    flags = ""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        pass
    kinds = ["Prescott"]
    if " avx2" in flags:
        kinds.append("Haswell")
    if " avx512f" in flags:
        kinds.append("SkylakeX")
    return kinds


def _build_fingerprint(out: Path, coretype: str) -> str:
    env = dict(os.environ, OPENBLAS_CORETYPE=coretype, OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-m", "c2np", "build", "--out", str(out), "--radii", "6"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    import h5py

    with h5py.File(out, "r") as f:
        return str(f.attrs["fingerprint"])


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64") or not _openblas(),
                    reason="OpenBLAS kernels are chosen by OPENBLAS_CORETYPE only on x86-64")
def test_fingerprint_is_the_same_under_every_blas_kernel(tmp_path: Path) -> None:
    kinds = _coretypes()
    if len(kinds) < 2:
        pytest.skip("this CPU runs only one OpenBLAS kernel")
    prints = {k: _build_fingerprint(tmp_path / f"{k}.h5", k) for k in kinds}
    assert len(set(prints.values())) == 1, prints
