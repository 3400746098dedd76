"""HDF5 files from outside read first in a throw-away process.

The HDF5 library is not robust against damaged files: a few flipped bytes in a store can make
it crash the process (a segmentation fault while reading an attribute, seen in
``tests/test_fuzz_readers.py``) or, by the same kind of damage, loop without end. No Python
``except`` catches either. So before a single-file store or a predictions file is opened in
this process, :func:`check_hdf5_readable` has a child process open it and read every group,
attribute and dataset (datasets in slices of at most :data:`SLICE_BYTES`, so the child's
memory stays bounded, and under an address-space cap of :data:`CHILD_ADDRESS_BYTES`). A child
that crashes, is killed or runs past its time (:func:`probe_timeout_s`) makes the file
"unreadable": one :class:`~c2np.errors.C2NPInputError` naming the file, never a crash of the
caller. A file that passes is read by the same library in the same way here.

A file that passed is remembered for the life of the process by (real path, device, inode,
size, modification time in ns), so opening the same unchanged store again costs nothing.
Shards of a sharded store are probed too, all of them by one child
(:func:`check_hdf5_files_readable`), before this process opens any: the manifest that records
their SHA-256 may have been written by whoever damaged them.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from c2np.errors import C2NPInputError
from c2np.terminal import printable

__all__ = ["SLICE_BYTES", "CHILD_ADDRESS_BYTES", "probe_timeout_s", "check_hdf5_readable",
           "check_hdf5_files_readable", "forget"]

SLICE_BYTES = 64 << 20
CHILD_ADDRESS_BYTES = 4 << 30

# The child: imports h5py and NumPy only, walks the whole file, prints "ok" and exits 0; any
# Python error is printed as one line and exits 3. A crash or a kill leaves no "ok".
_PROBE = r"""
import sys
try:
    import resource
    cap = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
except (ImportError, ValueError, OSError):
    pass
import h5py, numpy as np
step_bytes = int(sys.argv[3])

def read_attrs(obj):
    for k in obj.attrs.keys():
        obj.attrs[k]

def visit(name, obj):
    read_attrs(obj)
    if isinstance(obj, h5py.Dataset):
        if obj.shape is None or obj.shape == () or obj.size == 0:
            obj[()]
            return
        row = max(1, int(obj.dtype.itemsize) * int(np.prod(obj.shape[1:], dtype=np.int64)))
        step = max(1, step_bytes // row)
        for i in range(0, obj.shape[0], step):
            obj[i:i + step]

for path in sys.argv[4:] or sys.argv[1:2]:
    try:
        with h5py.File(path, "r") as f:
            read_attrs(f)
            f.visititems(visit)
    except Exception as exc:
        print(type(exc).__name__ + ": " + str(exc).replace("\n", " ")[:300], flush=True)
        sys.exit(3)
    print("ok", flush=True)
"""

_LOCK = threading.Lock()
_PASSED: set[tuple[str, int, int, int, int]] = set()


def probe_timeout_s(size_bytes: int) -> float:
    """Wall-clock limit (s) of the child for a file of ``size_bytes``: 60 s plus 1 s per 20 MB
    (python and h5py start, then the file read at far less than disk speed)."""
    return 60.0 + size_bytes / 20e6


def _key(p: Path) -> tuple[str, int, int, int, int]:
    st = p.stat()
    return (str(p.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def forget() -> None:
    """Forget every file that passed (the next open probes again)."""
    with _LOCK:
        _PASSED.clear()


def check_hdf5_readable(path: str | Path, *, error: type[C2NPInputError] = C2NPInputError,
                        what: str = "HDF5 file") -> None:
    """Raise ``error`` (a :class:`~c2np.errors.C2NPInputError`) naming ``path`` ("not a
    readable {what}") when a child process cannot read the whole HDF5 file (crash, kill,
    error or time-out); return when it can."""
    check_hdf5_files_readable([path], error=error, what=what)


def check_hdf5_files_readable(paths: Sequence[str | Path], *, error: type[C2NPInputError] = C2NPInputError,
                              what: str = "HDF5 file") -> None:
    """:func:`check_hdf5_readable` of several files by one child process, in order (one
    start for all the shards of a store); the error names the first unreadable file."""
    todo: list[tuple[Path, tuple[str, int, int, int, int]]] = []
    for path in paths:
        p = Path(path)
        try:
            key = _key(p)
        except OSError as exc:
            raise error(f"{printable(p)}: cannot read ({exc.strerror or exc})") from exc
        with _LOCK:
            if key in _PASSED:
                continue
        todo.append((p, key))
    if not todo:
        return
    timeout = probe_timeout_s(sum(k[3] for _, k in todo))
    args = [str(p) for p, _ in todo]
    try:
        res = subprocess.run([sys.executable, "-c", _PROBE, args[0], str(CHILD_ADDRESS_BYTES), str(SLICE_BYTES),
                              *args],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             timeout=timeout, close_fds=True, check=False)
        out, code = res.stdout.decode(errors="replace").strip(), res.returncode
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace").strip()
        code = None
    except OSError as exc:
        raise error(f"{printable(todo[0][0])}: could not start a process to check the file ({exc})") from exc
    lines = out.splitlines()
    n_ok = sum(line == "ok" for line in lines)
    with _LOCK:
        _PASSED.update(k for _, k in todo[:n_ok])
    if code == 0 and n_ok == len(todo):
        return
    bad = printable(todo[min(n_ok, len(todo) - 1)][0])
    if code is None:
        why = f"reading it did not end within {timeout:.0f} s; damaged?"
    elif code < 0:
        why = f"the HDF5 library crashed reading it (signal {-code}); damaged?"
    elif code == 3 and lines and lines[-1] != "ok":
        why = printable(lines[-1])
    else:
        why = f"the check exited with code {code}"
    raise error(f"{bad}: not a readable {what} ({why})")
