"""Reading and writing particles as XYZ / extended XYZ (and clusters from CIF).

Writes are atomic (:mod:`c2np.fileio`): an interrupted write never leaves a half-written
file in place of a good one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from c2np.particle import Particle
from c2np.errors import C2NPInputError
from c2np.fileio import atomic_write

__all__ = ["write_extxyz", "format_extxyz_frame", "iter_extxyz", "read_particle",
           "read_frames"]


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
