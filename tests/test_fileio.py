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
