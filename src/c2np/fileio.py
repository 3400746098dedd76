"""Writing files safely and hashing them: the one home of atomic writes in c2np.

Every file c2np writes goes through :func:`atomic_write` (text or bytes through a file
object), :func:`atomic_path` (a writer that wants a file name: HDF5, ASE, matplotlib) or
:func:`atomic_directory` (a folder built in full, then renamed). The rule is always the same:
a temp file in the target folder, flushed and fsync'ed, renamed onto the target only when
the block succeeded; on any error the temp file is removed and the old target is untouched.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator

__all__ = ["atomic_path", "atomic_write", "atomic_directory", "write_text", "file_sha256"]


def _temp_beside(p: Path) -> str:
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    os.close(fd)
    return tmp


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield a temp file name beside ``path`` for a writer that takes a file name (HDF5,
    ASE, matplotlib). When the block succeeds the temp file is fsync'ed and renamed onto
    ``path``; otherwise it is removed."""
    p = Path(path)
    tmp = _temp_beside(p)
    try:
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w", *,
                 encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temp file beside ``path`` (``mode`` ``"w"`` text or ``"wb"`` bytes); when the
    block succeeds it is flushed, fsync'ed and renamed onto ``path``, else removed."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', got {mode!r}")
    with atomic_path(path) as tmp:
        kwargs: dict[str, Any] = {} if "b" in mode else {"encoding": encoding, "newline": ""}
        with open(tmp, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns the path."""
    with atomic_write(path) as fh:
        fh.write(text)
    return Path(path)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temp folder beside ``path``; when the block succeeds it is renamed onto
    ``path`` (which must be absent or an empty folder), else removed with its contents."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent))
    try:
        yield tmp
        if p.is_dir() and not p.is_symlink():
            p.rmdir()  # only an empty folder can be replaced (rmdir refuses anything else)
        os.replace(tmp, p)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex digest of a file's bytes (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
