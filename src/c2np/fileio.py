"""Writing files safely and hashing them: the one home of atomic writes in c2np.

Every file c2np writes goes through :func:`atomic_write` (text or bytes through a file
object), :func:`atomic_path` (a writer that wants a file name: HDF5, ASE, matplotlib) or
:func:`atomic_directory` (a folder built in full, then renamed). The rule is always the same:
a temp file in the target folder (a fresh random name, hidden, ending in ``.tmp``, so a killed
run's leftover is never read as a result, and carrying the process id, so that the next write
to the same target removes the leftovers of processes that no longer run), flushed and fsync'ed,
renamed onto the target only when the block succeeded, then the folder fsync'ed; on any error the
temp file is removed and the old target is untouched.

The target must be absent or a regular file: a folder, a symlink, a FIFO or a device is
refused with an error naming the user's path (:func:`check_output_path`), never renamed
over. A new file gets mode 0o666 less the umask; an overwritten file keeps its mode. A full
disk, a read-only folder or a path under a file raise :class:`C2NPInputError` naming the
target (exit code 2 in the CLI).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from c2np.errors import C2NPInputError
from c2np.terminal import printable

__all__ = ["atomic_path", "atomic_write", "atomic_directory", "write_text", "write_texts", "file_sha256",
           "check_output_path", "remove_stale_temps", "remove_durably", "read_text_bounded", "read_bytes_bounded",
           "TEMP_SUFFIX", "output_folder", "regular_file_in"]

#: Suffix of every temp file and folder (readers never match it: ``*.h5``, ``*.cif``, ...).
TEMP_SUFFIX = ".tmp"

_ENV_ERRORS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "disk quota exceeded",
               errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
               errno.EPERM: "operation not permitted", errno.EFBIG: "file too large",
               errno.ENOTDIR: "a part of the path is a file, not a folder"}


def _env_error(p: Path, exc: OSError) -> C2NPInputError:
    why = _ENV_ERRORS.get(exc.errno or -1, exc.strerror or str(exc))
    return C2NPInputError(f"{p}: cannot write ({why})")


def check_output_path(path: str | os.PathLike[str], *, kind: str = "file") -> Path:
    """``path`` as a :class:`Path` when c2np may write a ``kind`` (``"file"`` or
    ``"folder"``) there: absent, or an existing regular file (a folder for ``"folder"``), and
    its parent is not a file. Anything else is :class:`C2NPInputError` naming ``path``."""
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise C2NPInputError(f"{p}: cannot write here: a part of the path is a file, not a folder") from None
    except OSError as exc:
        raise _env_error(p, exc) from exc
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise C2NPInputError(f"{p}: is a symbolic link; c2np does not write through links "
                                 "(give the target path or remove the link)")
        if kind == "file" and stat.S_ISDIR(st.st_mode):
            raise C2NPInputError(f"{p}: is a folder; give a file name")
        if kind == "file" and not stat.S_ISREG(st.st_mode):
            raise C2NPInputError(f"{p}: is not a regular file (a FIFO, socket or device); "
                                 "c2np only replaces regular files")
        if kind == "folder" and not stat.S_ISDIR(st.st_mode):
            raise C2NPInputError(f"{p}: exists and is not a folder")
    _check_no_links_below_roots(p)
    for parent in p.parents:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise C2NPInputError(f"{p}: cannot write here: {parent} is a file, not a folder")
            break
    return p


#: Output folders of the running command (absolute, not resolved): see :func:`output_folder`.
_OUTPUT_ROOTS: list[Path] = []


@contextlib.contextmanager
def output_folder(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Within the block, no file below the folder ``path`` is written through a symbolic link:
    every writer of this module refuses a target with a link anywhere between ``path`` and it
    (an ``assets/`` that links elsewhere). ``path`` itself may be a link (the user chose it);
    a ``path`` that names a file has nothing below it."""
    root = Path(os.path.abspath(path))
    _OUTPUT_ROOTS.append(root)
    try:
        yield Path(path)
    finally:
        _OUTPUT_ROOTS.reverse()
        _OUTPUT_ROOTS.remove(root)
        _OUTPUT_ROOTS.reverse()


def _check_no_links_below_roots(p: Path) -> None:
    target = Path(os.path.abspath(p))
    for root in list(_OUTPUT_ROOTS):
        try:
            rel = target.relative_to(root)
        except ValueError:
            continue
        here = root
        for part in rel.parts[:-1]:
            here = here / part
            try:
                st = os.lstat(here)
            except OSError:
                break  # absent: made as a folder (mkdir) when the file is written
            if stat.S_ISLNK(st.st_mode):
                raise C2NPInputError(f"{printable(here)}: is a symbolic link inside the output folder "
                                     f"{printable(root)}; c2np does not write through links (remove it)")


def regular_file_in(folder: str | os.PathLike[str], path: str | os.PathLike[str], *,
                    what: str = "file") -> Path:
    """``path`` when it is a regular file inside ``folder``, checked before it is opened: a
    FIFO, socket, device or folder is refused, and so is a link (of the file or of a folder
    on the way) that leads outside ``folder``. The message names the path, never content.
    A missing file is :class:`FileNotFoundError`."""
    f, p = Path(folder), Path(path)
    st = os.lstat(p)
    inside, real = os.path.realpath(f), os.path.realpath(p)
    if os.path.commonpath([inside, real]) != inside:
        raise C2NPInputError(f"{printable(p)}: {what} leads outside {printable(f)} (a link?); "
                             "c2np reads only files inside the folder")
    if stat.S_ISLNK(st.st_mode):
        st = os.stat(p)
    if not stat.S_ISREG(st.st_mode):
        raise C2NPInputError(f"{printable(p)}: {what} is not a regular file (a folder, FIFO, socket or device)")
    return p


def _umask() -> int:
    try:  # Linux: read it without changing it (os.umask would race with other threads)
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def _mode_for(p: Path) -> int:
    """Mode of the file that replaces ``p``: its old mode, or 0o666 less the umask."""
    try:
        return stat.S_IMODE(os.stat(p).st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _temp_prefix(p: Path) -> str:
    return f".{p.name}.{os.getpid()}."


def remove_stale_temps(p: Path) -> list[Path]:
    """Remove the temp files (and folders) that a killed run left beside ``p``: those whose
    name carries the id of a process that no longer runs on this machine. Returns them."""
    removed: list[Path] = []
    try:
        pattern = f".{glob.escape(p.name)}.*{TEMP_SUFFIX}"
        candidates = list(p.parent.glob(pattern)) if p.parent.is_dir() else []
    except OSError:
        return removed
    for cand in candidates:
        pid_text = cand.name[len(p.name) + 2:].split(".", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _alive(int(pid_text)):
            continue
        try:
            if cand.is_dir() and not cand.is_symlink():
                shutil.rmtree(cand)
            else:
                cand.unlink()
            removed.append(cand)
        except OSError:
            pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # it runs (as another user), or the number is no process id here: keep
    return True


def _temp_beside(p: Path) -> str:
    check_output_path(p)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(p)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(p), suffix=TEMP_SUFFIX, dir=p.parent)
    except OSError as exc:
        raise _env_error(p, exc) from exc
    try:
        os.fchmod(fd, _mode_for(p))
    finally:
        os.close(fd)
    return tmp


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # not every platform can open a folder
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _replace(tmp: str | Path, p: Path, *, kind: str = "file") -> None:
    """Rename ``tmp`` onto ``p`` after checking again that ``p`` may be replaced."""
    check_output_path(p, kind=kind)
    try:
        os.replace(tmp, p)
    except OSError as exc:
        raise _env_error(p, exc) from exc
    _fsync_dir(p.parent)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield a temp file name beside ``path`` for a writer that takes a file name (HDF5,
    ASE, matplotlib). When the block succeeds the temp file is fsync'ed and renamed onto
    ``path``; otherwise it is removed."""
    p = Path(path)
    tmp = _temp_beside(p)
    try:
        try:
            yield tmp
            # a writer that replaces the file it is given (safetensors does: 0o600) loses the
            # mode set on the temp file, so it is set again before the rename
            os.chmod(tmp, _mode_for(p))
            _fsync_file(tmp)
        except OSError as exc:
            if exc.errno in _ENV_ERRORS:  # full disk, quota, read-only: name the user's path
                raise _env_error(p, exc) from exc
            raise
        _replace(tmp, p)
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


def write_texts(texts: dict[Path, str]) -> list[Path]:
    """Write several UTF-8 files as one unit: every temp file is written and fsync'ed before
    the first rename, so a write error (full disk, ...) changes none of them; the renames
    follow one another at once (the JSON of a pair first, so a reader of it is never ahead
    of a stale companion for longer than one rename)."""
    stack = contextlib.ExitStack()
    with stack:
        staged = []
        for path, text in texts.items():
            p = Path(path)
            tmp = stack.enter_context(_staged(p))
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            staged.append((tmp, p))
        for tmp, p in sorted(staged, key=lambda tp: tp[1].suffix != ".json"):
            _replace(tmp, p)
    return [Path(p) for p in texts]


@contextlib.contextmanager
def _staged(p: Path) -> Iterator[str]:
    tmp = _temp_beside(p)
    try:
        yield tmp
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns the path."""
    with atomic_write(path) as fh:
        fh.write(text)
    return Path(path)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temp folder beside ``path``; when the block succeeds it is renamed onto
    ``path`` (which must be absent or an empty folder), else removed with its contents."""
    p = check_output_path(path, kind="folder")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(p)
        tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(p), suffix=TEMP_SUFFIX, dir=p.parent))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0o700
    except OSError as exc:
        raise _env_error(p, exc) from exc
    try:
        try:
            yield tmp
        except OSError as exc:
            if exc.errno in _ENV_ERRORS:
                raise _env_error(p, exc) from exc
            raise
        if p.is_dir() and not p.is_symlink():
            p.rmdir()  # only an empty folder can be replaced (rmdir refuses anything else)
        _replace(tmp, p, kind="folder")
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def read_text_bounded(path: str | os.PathLike[str], *, encoding: str = "utf-8") -> str:
    """The whole text of a file, its size checked against the limit ``text_bytes`` before it
    is read (a text read whole cannot be streamed; OSError and UnicodeDecodeError propagate
    for the caller to name)."""
    return read_bytes_bounded(path, limit="text_bytes").decode(encoding)


def read_bytes_bounded(path: str | os.PathLike[str], *, limit: str = "text_bytes",
                       regular_only: bool = False) -> bytes:
    """The bytes of a file, at most the limit ``limit`` (:mod:`c2np.limits`): a regular
    file's size is checked before reading; anything else (a FIFO, ``/dev/zero``) is read in
    blocks until it ends or passes the limit, so memory grows with what is read, never with
    the limit. ``regular_only``: refuse anything but a regular file before opening it (a FIFO
    without a writer would block the open)."""
    from c2np.limits import check as check_limit
    from c2np.limits import effective

    p = Path(path)
    if regular_only:
        st = os.stat(p)
        if not stat.S_ISREG(st.st_mode):
            raise C2NPInputError(f"{printable(p)}: is not a regular file (a folder, FIFO, socket or device)")
    cap = int(min(effective(limit), 2**62))
    with open(p, "rb") as fh:
        st = os.fstat(fh.fileno())
        if stat.S_ISREG(st.st_mode):
            check_limit(limit, st.st_size, what=printable(p))
        blocks: list[bytes] = []
        total = 0
        while True:
            block = fh.read(min(1 << 20, cap + 1 - total))
            if not block:
                break
            blocks.append(block)
            total += len(block)
            if total > cap:
                break
    check_limit(limit, total, what=printable(p))  # a FIFO, a device or a file that grew
    return b"".join(blocks)


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex digest of a file's bytes (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def remove_durably(path: str | os.PathLike[str]) -> bool:
    """Remove the regular file ``path`` (not a link's target, never a folder) and fsync its
    folder, so the removal survives a crash before what is written next. False if absent."""
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(st.st_mode):
        raise C2NPInputError(f"{p}: is a folder; c2np only removes files it wrote")
    try:
        p.unlink()
    except OSError as exc:
        raise _env_error(p, exc) from exc
    _fsync_dir(p.parent)
    return True
