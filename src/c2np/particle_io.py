"""Reading and writing particles as XYZ / extended XYZ (and clusters from CIF).

Writes are atomic: a temp file in the target folder, renamed at the end, so an
interrupted write never leaves a half-written file in place of a good one.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, TextIO

import numpy as np

from c2np.particle import Particle
from c2np.errors import C2NPInputError

__all__ = ["atomic_path", "atomic_write", "write_extxyz", "format_extxyz_frame", "iter_extxyz", "read_particle",
           "read_frames"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield a temp file path beside ``path`` for a writer that takes a file name (HDF5,
    ASE); the temp file replaces ``path`` only if the block succeeds, else it is removed."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w") -> Iterator[TextIO]:
    """Open a temp file beside ``path``; rename it onto ``path`` only if the block succeeds."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh  # type: ignore[misc]
        os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _info_value(value: Any) -> str:
    if isinstance(value, str):
        if any(ch in value for ch in ' "=\t'):
            return json.dumps(value)
        return value
    if isinstance(value, (bool, np.bool_)):
        return "T" if value else "F"
    if isinstance(value, (list, tuple, np.ndarray)):
        return '"' + " ".join(repr(float(x)) if not isinstance(x, (int, np.integer)) else str(int(x))
                              for x in value) + '"'
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return repr(float(value))


def format_extxyz_frame(particle: Particle, info: dict[str, Any] | None = None) -> str:
    """One extended-XYZ frame (non-periodic) as text."""
    from ase.data import chemical_symbols

    parts = ['Properties=species:S:1:pos:R:3', 'pbc="F F F"']
    for key, value in (info or {}).items():
        parts.append(f"{key}={_info_value(value)}")
    head = f"{particle.n_atoms}\n{' '.join(parts)}\n"
    n = particle.n_atoms
    if n == 0:
        return head
    table = np.empty((n, 4), dtype=object)  # one %-format call for the whole frame (fast)
    table[:, 0] = np.asarray(chemical_symbols, dtype=object)[particle.numbers]
    table[:, 1:] = particle.positions_angstrom
    return head + ("%s %.8f %.8f %.8f\n" * n) % tuple(table.ravel().tolist())


def write_extxyz(path: str | os.PathLike[str],
                 frames: Iterable[tuple[Particle, dict[str, Any]]]) -> Path:
    """Write frames (particle, info) to an extended-XYZ file atomically."""
    with atomic_write(path) as fh:
        for particle, info in frames:
            fh.write(format_extxyz_frame(particle, info))
    return Path(path)


def iter_extxyz(path: str | os.PathLike[str]) -> Iterator[tuple[int, Particle, dict[str, Any]]]:
    """Yield (frame_index, particle, info) from an (ext)XYZ file.

    Any unreadable frame raises :class:`C2NPInputError` naming the file and the frame.
    """
    from ase.io import iread

    p = Path(path)
    if not p.is_file():
        raise C2NPInputError(f"{p}: no such file")
    frame = 0
    it = iread(str(p), index=":", format="extxyz")
    while True:
        try:
            atoms = next(it)
        except StopIteration:
            break
        except Exception as exc:  # ASE raises many types on malformed input
            raise C2NPInputError(f"{p}: frame {frame}: cannot parse ({type(exc).__name__}: {exc})") from exc
        pos = np.asarray(atoms.positions, dtype=float)
        if not np.all(np.isfinite(pos)):
            bad = int(np.flatnonzero(~np.all(np.isfinite(pos), axis=1))[0])
            raise C2NPInputError(f"{p}: frame {frame}: atom {bad} has a non-finite position")
        yield frame, Particle(atoms.numbers, pos), dict(atoms.info)
        frame += 1
    if frame == 0:
        raise C2NPInputError(f"{p}: no frames (empty or not an XYZ file)")


def read_frames(path: str | os.PathLike[str]) -> list[tuple[Particle, dict[str, Any]]]:
    """All frames of an (ext)XYZ file as (particle, info)."""
    return [(part, info) for _, part, info in iter_extxyz(path)]


def read_particle(path: str | os.PathLike[str]) -> Particle:
    """Read one cluster from .xyz / .extxyz (first frame) or .cif (atoms of the cell, as a
    finite set: the file is read as a cluster, not expanded periodically)."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".cif":
        from c2np.cells import read_cif

        cell = read_cif(p)
        return Particle(cell.numbers, cell.cart_coords_angstrom)
    if suffix in (".xyz", ".extxyz"):
        for _, part, _ in iter_extxyz(p):
            if part.n_atoms == 0:
                raise C2NPInputError(f"{p}: frame 0 has no atoms")
            return part
    raise C2NPInputError(f"{p}: unsupported particle format {suffix!r} (use .xyz, .extxyz or .cif)")
