"""Bounded calls of the symmetry finder (moyopy), in time and memory.

moyopy closes the set of lattice automorphisms it accepts at a tolerance by group
multiplication; at a loose tolerance on a skewed or noisy cell that set can contain an
integer matrix of infinite order (a shear), and the closure then grows until the process
is killed (measured: 1.8 GB requests on a noisy KMgH3 particle, hangs on a single-site cell
at a tolerance of 0.15 x its shortest lattice vector). No estimate made before the call can
exclude this, because moyopy retries at tolerances of its own choosing. So every call runs in
one helper process per calling process, whose address space is capped at the limit
``solver_symmetry_bytes`` and whose CPU time per call at ``solver_symmetry_seconds`` (CPU
time, so that the answer does not depend on how loaded the machine is; a wall-clock
backstop of ten times that, at least 120 s, covers a helper that gets no CPU at all);
a call that exceeds either raises :class:`~c2np.errors.C2NPLimitError` and the helper is
replaced. The cost that can be estimated — moyopy's work grows with the square of the sites
— is checked before the call against the limit ``solver_sites``.

The answer is a :class:`SymmetryDataset` (the fields of moyopy's dataset that the solver
uses, copied exactly: floats travel as Python ``repr``).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

from c2np import limits
from c2np.errors import C2NPEnvironmentError, C2NPLimitError

__all__ = ["SymmetryDataset", "find_symmetry", "lattice_rotation_count", "shutdown"]


@dataclass(frozen=True, eq=False)
class SymmetryDataset:
    """moyopy's dataset at one tolerance: international ``number`` (1..230), the rotations of
    its operations ((k, 3, 3) int, fractional), and the standardized conventional cell
    (``std_lattice_angstrom`` (3, 3) rows, ``std_positions`` (s, 3) fractional,
    ``std_numbers`` (s,))."""

    number: int
    rotations: np.ndarray
    std_lattice_angstrom: np.ndarray
    std_positions: np.ndarray
    std_numbers: np.ndarray

    @property
    def n_operations(self) -> int:
        """Operations (coset representatives) of the group found."""
        return int(len(self.rotations))


# The helper: reads one JSON request per line, answers one JSON line. Only moyopy and the
# standard library are imported, so its address space starts small (~30 MB).
_HELPER = r"""
import json, logging, sys
try:
    import resource
    cap = int(sys.argv[1])
    if cap > 0:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
except (ImportError, ValueError, OSError):
    pass
logging.getLogger("moyo").setLevel(logging.CRITICAL)
import moyopy
out = sys.stdout
out.write("ready\n")
out.flush()
for line in sys.stdin:
    req = json.loads(line)
    try:
        import resource
        use = resource.getrusage(resource.RUSAGE_SELF)
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        soft = int(use.ru_utime + use.ru_stime + req["cpu_s"]) + 1
        if hard == resource.RLIM_INFINITY or soft <= hard:
            resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ImportError, ValueError, OSError):
        pass
    try:
        ds = moyopy.MoyoDataset(moyopy.Cell(req["lattice"], req["positions"], req["numbers"]),
                                symprec=req["symprec"])
        ans = {"ok": True, "number": int(ds.number), "rotations": ds.operations.rotations,
               "std_basis": ds.std_cell.basis, "std_positions": ds.std_cell.positions,
               "std_numbers": ds.std_cell.numbers}
    except Exception as exc:
        ans = {"ok": False, "error": type(exc).__name__ + ": " + str(exc)}
    out.write(json.dumps(ans) + "\n")
    out.flush()
"""


class _Helper:
    """One helper process, owned by the process that started it (a forked child starts
    its own)."""

    def __init__(self, cap_bytes: int) -> None:
        self.cap_bytes = cap_bytes
        self.owner = os.getpid()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _HELPER, str(cap_bytes)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True)
        self.buffer = b""
        self.ready = False

    def start(self, timeout_s: float) -> bool:
        """Wait for the helper's ``ready`` line (its start is not counted in a call's time)."""
        if not self.ready:
            self.ready = self.read_line(timeout_s) == b"ready"
        return self.ready

    def ask(self, request: bytes, timeout_s: float) -> bytes | None:
        """One answer line, or None when the helper died or did not answer in time."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(request)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        return self.read_line(timeout_s)

    def read_line(self, timeout_s: float) -> bytes | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def close(self) -> None:
        if self.owner != os.getpid():
            return  # inherited by fork: the parent owns it
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


_START_S = 120.0  # the helper's start (python + moyopy import) on a loaded machine
_MIN_WALL_S = 120.0
_SIGXCPU = int(getattr(signal, "SIGXCPU", 24))
_LOCK = threading.Lock()
_STATE: dict[str, _Helper] = {}


def shutdown() -> None:
    """Stop this process's helper (it is restarted on the next call)."""
    with _LOCK:
        helper = _STATE.pop("helper", None)
    if helper is not None:
        helper.close()


def _helper(cap_bytes: int) -> _Helper:
    helper = _STATE.get("helper")
    if helper is not None and (helper.owner != os.getpid() or helper.cap_bytes != cap_bytes
                               or helper.proc.poll() is not None):
        if helper.owner == os.getpid():
            helper.close()
        helper = None
    if helper is None:
        if not _STATE.get("atexit"):
            atexit.register(shutdown)
            _STATE["atexit"] = True  # type: ignore[assignment]
        helper = _Helper(cap_bytes)
        _STATE["helper"] = helper
    return helper


def find_symmetry(lattice_angstrom: np.ndarray, frac: np.ndarray, numbers: np.ndarray, *,
                  symprec_angstrom: float) -> SymmetryDataset | None:
    """moyopy's dataset of the cell ((3, 3) lattice rows in Å, (m, 3) fractional positions,
    (m,) atomic numbers) at ``symprec_angstrom``; None where moyopy finds no consistent group.

    Raises :class:`C2NPLimitError` when the cell has more sites than ``solver_sites`` (checked
    before the call) or the call needs more than ``solver_symmetry_bytes`` of address space or
    ``solver_symmetry_seconds`` of time.
    """
    frac = np.asarray(frac, dtype=float).reshape(-1, 3)
    limits.check("solver_sites", len(frac), what="solver: symmetry search on the reconstructed cell")
    cap = int(limits.effective("solver_symmetry_bytes"))
    cpu_s = float(limits.effective("solver_symmetry_seconds"))
    wall_s = max(_MIN_WALL_S, 10.0 * cpu_s)
    request = (json.dumps({"cpu_s": cpu_s, "lattice": np.asarray(lattice_angstrom, dtype=float).tolist(),
                           "positions": frac.tolist(),
                           "numbers": [int(z) for z in np.asarray(numbers).ravel()],
                           "symprec": float(symprec_angstrom)}) + "\n").encode()
    with _LOCK:
        helper = _helper(cap)
        if not helper.start(_START_S):
            helper.close()
            _STATE.pop("helper", None)
            raise C2NPEnvironmentError(f"solver: the symmetry-finder helper ({sys.executable} with moyopy) "
                                       f"did not start within {_START_S:g} s (or its address space limit "
                                       f"solver_symmetry_bytes = {cap:,} bytes is too small to import moyopy)")
        line = helper.ask(request, wall_s)
        code = None
        if line is None:
            try:
                code = helper.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                code = None
            helper.close()
            _STATE.pop("helper", None)
    if line is None:
        if code is not None and code != -_SIGXCPU:
            raise C2NPLimitError(
                f"solver: the symmetry search (moyopy) at a tolerance of {symprec_angstrom:.3g} Å needed "
                f"more than the limit solver_symmetry_bytes = {cap:,} bytes; raise it with "
                f"`c2np --limit solver_symmetry_bytes=N ...` (or {limits.ENV_VAR}=solver_symmetry_bytes=N)")
        raise C2NPLimitError(
            f"solver: the symmetry search (moyopy) at a tolerance of {symprec_angstrom:.3g} Å ran "
            f"longer than the limit solver_symmetry_seconds = {cpu_s:g} s (CPU; wall-clock backstop "
            f"{wall_s:g} s); raise it with "
            f"`c2np --limit solver_symmetry_seconds=N ...` (or {limits.ENV_VAR}=solver_symmetry_seconds=N)")
    ans = json.loads(line)
    if not ans["ok"]:
        return None
    return SymmetryDataset(
        number=int(ans["number"]), rotations=np.asarray(ans["rotations"], dtype=np.int64).reshape(-1, 3, 3),
        std_lattice_angstrom=np.asarray(ans["std_basis"], dtype=float).reshape(3, 3),
        std_positions=np.asarray(ans["std_positions"], dtype=float).reshape(-1, 3),
        std_numbers=np.asarray(ans["std_numbers"], dtype=np.int64))


def lattice_rotation_count(lattice_angstrom: np.ndarray, *, symprec_angstrom: float) -> int:
    """Operations of the lattice's point group (holohedry) found at ``symprec_angstrom``
    (a one-site cell); 1 where none is consistent."""
    ds = find_symmetry(lattice_angstrom, np.zeros((1, 3)), np.ones(1, dtype=np.int64),
                       symprec_angstrom=symprec_angstrom)
    return 1 if ds is None else ds.n_operations
