"""The thread policy: how many intra-op threads each c2np process uses.

Every process gets ``available cores // worker processes`` threads (at least 1), so that a
pool of workers never oversubscribes the cores (torch's and the BLAS libraries' default is one
thread per core *per process*, which on a pool of W workers runs W x cores threads). The
count is set in the environment of the process and its children (``OMP_NUM_THREADS``,
``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``) and, when PyTorch is loaded, with
``torch.set_num_threads``, before any model work.

Overrides, first match wins: the ``threads`` argument (``c2np --threads N``), the
``C2NP_THREADS`` variable, then ``OMP_NUM_THREADS`` when the user set it.
"""

from __future__ import annotations

import os
import sys

from c2np.errors import C2NPInputError

__all__ = ["ENV_VAR", "THREAD_VARIABLES", "available_cores", "threads_per_process", "set_threads",
           "use_threads"]

ENV_VAR = "C2NP_THREADS"
THREAD_VARIABLES: tuple[str, ...] = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: set by :func:`set_threads`, so that a value c2np wrote is not mistaken for the user's
_OURS = "_C2NP_THREADS_SET"


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _parse(value: str, source: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise C2NPInputError(f"{source}={value!r}: threads must be a whole number >= 1") from None
    if n < 1:
        raise C2NPInputError(f"{source}={value!r}: threads must be >= 1")
    return n


def threads_per_process(workers: int = 1, *, threads: int | None = None) -> int:
    """Threads for each of ``workers`` processes: ``threads`` when given, else ``C2NP_THREADS``,
    else a user-set ``OMP_NUM_THREADS``, else ``available_cores() // workers`` (at least 1)."""
    if threads is not None:
        return _parse(str(threads), "--threads")
    if os.environ.get(ENV_VAR):
        return _parse(os.environ[ENV_VAR], ENV_VAR)
    omp = os.environ.get("OMP_NUM_THREADS")
    if omp and os.environ.get(_OURS) != omp:
        return _parse(omp, "OMP_NUM_THREADS")
    return max(1, available_cores() // max(1, int(workers)))


def set_threads(n: int) -> None:
    """Use ``n`` intra-op threads in this process and its children (environment, and PyTorch
    when it is loaded)."""
    for var in THREAD_VARIABLES:
        os.environ[var] = str(n)
    os.environ[_OURS] = str(n)
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != n:
        torch.set_num_threads(n)


def use_threads(workers: int = 1, *, threads: int | None = None) -> int:
    """Apply :func:`threads_per_process` for ``workers`` processes; returns the count."""
    n = threads_per_process(workers, threads=threads)
    set_threads(n)
    return n
