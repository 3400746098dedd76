"""Atomic writes and file hashing (c2np.fileio)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from c2np.fileio import atomic_directory, atomic_path, atomic_write, file_sha256, write_text


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_atomic_write_replaces_only_on_success(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "a.txt"
    write_text(target, "old\n")
    with pytest.raises(RuntimeError):
        with atomic_write(target) as fh:
            fh.write("half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old\n" and _leftovers(target.parent) == []
    with atomic_write(target, "wb") as fh:
        fh.write(b"new\n")
    assert target.read_bytes() == b"new\n" and _leftovers(target.parent) == []
    with pytest.raises(ValueError, match="mode"):
        with atomic_write(target, "a"):
            pass


def test_atomic_path_for_name_based_writers(tmp_path: Path) -> None:
    target = tmp_path / "b.bin"
    with atomic_path(target) as tmp:
        assert Path(tmp).parent == tmp_path and not target.exists()
        Path(tmp).write_bytes(b"x")
    assert target.read_bytes() == b"x"
    with pytest.raises(OSError):
        with atomic_path(target) as tmp:
            raise OSError("disk full")
    assert target.read_bytes() == b"x" and _leftovers(tmp_path) == []


def test_atomic_directory(tmp_path: Path) -> None:
    out = tmp_path / "tree"
    with atomic_directory(out) as tmp:
        (tmp / "f.txt").write_text("1")
        assert not out.exists()
    assert (out / "f.txt").read_text() == "1"
    with pytest.raises(OSError):  # a non-empty folder is never replaced
        with atomic_directory(out) as tmp:
            (tmp / "g.txt").write_text("2")
    assert sorted(p.name for p in out.iterdir()) == ["f.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["tree"]


def test_file_sha256(tmp_path: Path) -> None:
    p = tmp_path / "h"
    p.write_bytes(b"abc" * 1_000_000)
    assert file_sha256(p) == hashlib.sha256(b"abc" * 1_000_000).hexdigest()


# --- output paths, modes, faults and concurrency --------------------------------------------
import errno  # noqa: E402
import os  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from c2np.errors import C2NPInputError  # noqa: E402
from c2np.fileio import remove_stale_temps, write_texts  # noqa: E402


def _special_targets(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    link = tmp_path / "link.txt"
    link.symlink_to(victim)
    folder = tmp_path / "folder"
    folder.mkdir()
    afile = tmp_path / "afile"
    afile.write_text("x")
    return {"FIFO": fifo, "symbolic link": link, "folder": folder, "device": Path("/dev/null"),
            "under a file": afile / "out.h5"}


@pytest.mark.parametrize("kind, message", [("FIFO", "not a regular file"), ("symbolic link", "symbolic link"),
                                           ("folder", "is a folder"), ("device", "not a regular file"),
                                           ("under a file", "is a file, not a folder")])
def test_special_outputs_are_refused_by_their_own_name(tmp_path: Path, kind: str, message: str) -> None:
    target = _special_targets(tmp_path)[kind]
    if kind == "device" and not target.exists():
        pytest.skip("no /dev/null")
    before = {p.name: p.lstat().st_mode for p in tmp_path.iterdir()}
    with pytest.raises(C2NPInputError, match=f"{target}: .*{message}"):
        write_text(target, "data")
    assert {p.name: p.lstat().st_mode for p in tmp_path.iterdir()} == before  # nothing replaced, no temp
    assert (tmp_path / "victim.txt").read_text() == "keep"
    assert not any(p.name.endswith(".tmp") for p in tmp_path.rglob("*"))


def test_new_files_honour_the_umask_and_overwrites_keep_the_mode(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_text(tmp_path / "new.txt", "x")
        with atomic_directory(tmp_path / "tree") as tmp:
            (tmp / "f").write_text("1")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "tree").stat().st_mode) == 0o750
    os.chmod(tmp_path / "new.txt", 0o604)
    write_text(tmp_path / "new.txt", "y")
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o604
    assert (tmp_path / "new.txt").read_text() == "y"


def test_a_writer_that_replaces_its_temp_file_still_gets_the_umask_mode(tmp_path: Path) -> None:
    """safetensors' save_file replaces the file it is given (mode 0o600): the mode the new
    file should have is set again before the rename (found on shipped weights)."""
    from c2np.fileio import atomic_path

    def replacing_writer(name: str) -> None:
        os.unlink(name)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"w")
        os.close(fd)

    old = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "w.bin") as tmp:
            replacing_writer(tmp)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "w.bin").stat().st_mode) == 0o644
    assert (tmp_path / "w.bin").read_bytes() == b"w"
    os.chmod(tmp_path / "w.bin", 0o640)
    with atomic_path(tmp_path / "w.bin") as tmp:
        replacing_writer(tmp)
    assert stat.S_IMODE((tmp_path / "w.bin").stat().st_mode) == 0o640


def test_leftovers_of_killed_processes_are_removed_by_the_next_write(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stale = tmp_path / f".out.h5.{dead}.abcd.tmp"
    stale.write_text("half a store")
    mine = tmp_path / f".out.h5.{os.getpid()}.live.tmp"  # this process's (a live writer): kept
    mine.write_text("live")
    other = tmp_path / ".other.h5.1.x.tmp"
    other.write_text("not ours")
    assert remove_stale_temps(tmp_path / "out.h5") == [stale]
    write_text(tmp_path / "out.h5", "done")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out.h5", mine.name, other.name])


def test_several_files_change_together_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "x.json", tmp_path / "x.md"
    write_texts({a: "old json", b: "old md"})
    real_fsync = os.fsync
    calls = {"n": 0}

    def failing_fsync(fd: int) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        write_texts({a: "new json", b: "new md"})
    monkeypatch.undo()
    assert a.read_text() == "old json" and b.read_text() == "old md"
    assert _leftovers(tmp_path) == []


def test_injected_disk_full_names_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.txt"
    write_text(target, "old")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(C2NPInputError, match="out.txt: cannot write .the disk is full"):
        write_text(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old" and _leftovers(tmp_path) == []


def _mount_tmpfs(folder: Path, options: str) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True)
    return res.returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    mnt = tmp_path / "small"
    if not _mount_tmpfs(mnt, "size=256k"):
        pytest.skip("cannot mount a tmpfs here (not root or not allowed); the injected error test covers it")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


@pytest.fixture
def read_only_folder(tmp_path: Path):  # type: ignore[no-untyped-def]
    mnt = tmp_path / "ro"
    if not _mount_tmpfs(mnt, "size=64k,ro"):
        pytest.skip("cannot mount a read-only tmpfs here")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_real_full_disk_keeps_the_old_store_and_exits_2(small_disk: Path) -> None:
    from typer.testing import CliRunner

    from c2np.catalog import catalog_data_dir
    from c2np.cli import build_app

    out = small_disk / "ds.h5"
    out.write_bytes(b"old store")
    cif = small_disk.parent / "KMgH3.cif"
    cif.write_text((catalog_data_dir() / "KMgH3.cif").read_text())
    res = CliRunner().invoke(build_app(), ["carve", str(cif), "-r", "60", "-o", str(out)])  # ~5 MB of text
    assert res.exit_code == 2, res.output
    assert "ds.h5: cannot write (the disk is full)" in res.output and "Traceback" not in res.output
    assert out.read_bytes() == b"old store"
    assert sorted(p.name for p in small_disk.iterdir()) == ["ds.h5"]


def test_read_only_folder_exits_2_naming_the_target(read_only_folder: Path) -> None:
    from typer.testing import CliRunner

    from c2np.catalog import catalog_data_dir
    from c2np.cli import build_app

    cif = read_only_folder.parent / "KMgH3.cif"
    cif.write_text((catalog_data_dir() / "KMgH3.cif").read_text())
    out = read_only_folder / "p.extxyz"
    res = CliRunner().invoke(build_app(), ["carve", str(cif), "-r", "6", "-o", str(out)])
    assert res.exit_code == 2 and "p.extxyz: cannot write (read-only file system)" in res.output, res.output


_BUILD = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from helpers import perovskite
from c2np.store import build_store
build_store([perovskite(a={a})], Path({out!r}), radii_angstrom={radii}, progress=False)
"""


def test_two_builds_to_one_path_leave_one_whole_store(tmp_path: Path) -> None:
    from c2np.store import DatasetStore, verify_store

    out = tmp_path / "ds.h5"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    tests = str(Path(__file__).parent)
    procs = [subprocess.Popen([sys.executable, "-c", _BUILD.format(tests=tests, a=a, out=str(out), radii=[6, 8])],
                              env=env) for a in (4.02, 4.10)]
    assert [p.wait(timeout=600) for p in procs] == [0, 0]
    assert verify_store(out).ok  # whichever rename came last, the store is whole
    assert DatasetStore.open(out).cells["KMgH3"].lattice_angstrom[0, 0] in (4.02, 4.10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.h5"]


_KILLED_BUILD = """
import contextlib, sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
import c2np.store.write as store
from c2np.store import build_store
from helpers import perovskite
atomic = store.atomic_path
@contextlib.contextmanager
def held(p):  # the temp is written and closed; hold before the rename until killed
    with atomic(p) as tmp:
        yield tmp
        Path({marker!r}).write_text("written")
        time.sleep(600)
store.atomic_path = held
build_store([perovskite(a={a})], Path({out!r}), radii_angstrom={radii}, progress=False)
"""


def test_a_killed_build_keeps_the_old_store_and_its_temp_is_cleared(tmp_path: Path) -> None:
    import signal
    import time

    from c2np.store import build_store, verify_store
    from helpers import perovskite

    out = tmp_path / "ds.h5"
    build_store([perovskite()], out, radii_angstrom=[6], progress=False)
    old = out.read_bytes()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    marker = tmp_path.parent / f"{tmp_path.name}.written"  # outside the store's folder
    script = _KILLED_BUILD.format(tests=str(Path(__file__).parent), a=4.02, out=str(out),
                                  radii=[6, 7, 8], marker=str(marker))
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    deadline = time.monotonic() + 300
    while not marker.exists():  # killed with the temp written, before its rename
        assert proc.poll() is None and time.monotonic() < deadline, "the build ended before it was killed"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert out.read_bytes() == old and verify_store(out).ok
    assert any(p.name.endswith(".tmp") for p in tmp_path.iterdir())  # SIGKILL leaves it ...
    build_store([perovskite()], out, radii_angstrom=[6, 7], progress=False)  # ... the next write clears it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.h5"]
