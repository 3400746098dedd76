"""Reading and writing particles as XYZ / extended XYZ (and clusters from CIF).

:func:`iter_xyz_frames` is the one XYZ parser of the package: prediction files
(:mod:`c2np.predictions`), ``c2np identify``, the original layout import and the tests read
through it.

Writes are atomic (:mod:`c2np.fileio`): an interrupted write never leaves a half-written
file in place of a good one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from c2np.errors import C2NPInputError
from c2np.fileio import atomic_write
from c2np.limits import check as check_limit
from c2np.particle import Particle

__all__ = ["write_extxyz", "format_extxyz_frame", "iter_extxyz", "iter_xyz_frames",
           "XyzFrame", "read_particle", "read_frames"]


def _info_value(value: Any) -> str:
    if isinstance(value, str):
        if any(ch in value for ch in ' "=\t\n\r\\'):  # a raw newline would end the comment line
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


@dataclass(frozen=True, eq=False)
class XyzFrame:
    """One frame of an (ext)XYZ file as read, before any check of its content.

    Attributes:
        index: frame number (0-based).
        line: 1-based line of the frame's atom-count line.
        info: key=value pairs of the comment line (ASE's extxyz parsing of values).
        numbers: (n,) int64 atomic numbers.
        positions_angstrom: (n, 3) float64 Cartesian positions (may be non-finite).
    """

    index: int
    line: int
    info: dict[str, Any]
    numbers: np.ndarray
    positions_angstrom: np.ndarray


def _symbol_table() -> dict[str, int]:
    from ase.data import atomic_numbers

    return {s: z for s, z in atomic_numbers.items() if 1 <= z <= 118}


def _parse_properties(spec: str) -> tuple[int, int, int]:
    """(species column, first position column, number of columns) of an extxyz Properties."""
    parts = spec.split(":")
    if len(parts) % 3:
        raise ValueError(f"malformed Properties {spec!r}")
    col = 0
    species = pos = -1
    for name, kind, count in zip(parts[0::3], parts[1::3], parts[2::3]):
        n = int(count)
        if name == "species" and kind == "S" and n == 1:
            species = col
        if name == "pos" and kind == "R" and n == 3:
            pos = col
        col += n
    if species < 0 or pos < 0:
        raise ValueError(f"Properties {spec!r} lacks species:S:1 or pos:R:3")
    return species, pos, col


def _parse_comment(text: str, where: str, *, strict: bool) -> dict[str, Any]:
    from ase.io.extxyz import key_val_str_to_dict

    try:
        return dict(key_val_str_to_dict(text))
    except Exception as exc:  # ASE raises several types on malformed key=value text
        if strict:
            raise C2NPInputError(f"{where}: unreadable comment line ({type(exc).__name__}: {exc})") from exc
        return {"comment": text}


#: Longest line of an XYZ file (characters): a file of one endless line is refused, not read whole.
MAX_XYZ_LINE_CHARS = 1 << 20


def _bounded_line(fh: Any, p: Path, line_no: int) -> str:
    """The next line of ``fh`` ('' at the end), at most :data:`MAX_XYZ_LINE_CHARS` long."""
    line = fh.readline(MAX_XYZ_LINE_CHARS + 1)
    if len(line) > MAX_XYZ_LINE_CHARS:
        raise C2NPInputError(f"{p}: line {line_no}: longer than {MAX_XYZ_LINE_CHARS:,} characters "
                             "(not an XYZ file?)")
    return line


def iter_xyz_frames(path: str | os.PathLike[str], *, strict_comment: bool = True) -> Iterator[XyzFrame]:
    """Yield every frame of an XYZ / extended-XYZ file (the one XYZ parser of c2np).

    The count line, a comment line (extxyz ``key=value`` pairs; ``Properties`` chooses the
    species and position columns, default ``species:S:1:pos:R:3``) and ``n`` atom lines per
    frame; blank lines between frames are skipped. Positions may be non-finite (the caller
    decides). Anything else unreadable raises :class:`C2NPInputError` naming the file, the
    frame and the line. ``strict_comment=False`` keeps a comment that is not key=value text
    as ``info["comment"]`` (plain XYZ files) instead of failing.
    """
    p = Path(path)
    if not p.is_file():
        raise C2NPInputError(f"{p}: no such file")
    symbols = _symbol_table()
    frame = 0
    line_no = 0
    with open(p, encoding="utf-8", errors="strict") as fh:
        while True:
            try:
                head = _bounded_line(fh, p, line_no + 1)
            except UnicodeDecodeError as exc:
                raise C2NPInputError(f"{p}: frame {frame}: not UTF-8 text ({exc})") from exc
            line_no += 1
            if head == "":
                break
            if head.strip() == "":
                continue  # blank lines between frames
            where = f"{p}: frame {frame} (line {line_no})"
            count = head.strip()
            if not (count.isascii() and count.isdigit()):  # int() would read '4_1' as 41, '+3' as 3
                raise C2NPInputError(f"{where}: expected an atom count, got {count[:40]!r}")
            n = int(count)
            check_limit("atoms_per_particle", n, what=where)
            count_line = line_no
            try:
                comment = _bounded_line(fh, p, line_no + 1)
            except UnicodeDecodeError as exc:
                raise C2NPInputError(f"{where}: not UTF-8 text ({exc})") from exc
            line_no += 1
            if comment == "":
                raise C2NPInputError(f"{where}: file ends before the comment line")
            where = f"{p}: frame {frame} (line {line_no})"
            info = _parse_comment(comment.strip(), where, strict=strict_comment)
            try:
                s_col, p_col, n_col = _parse_properties(str(info.get("Properties", "species:S:1:pos:R:3")))
            except ValueError as exc:
                raise C2NPInputError(f"{where}: {exc}") from exc
            first = line_no + 1
            try:
                lines = [ln for ln in (_bounded_line(fh, p, first + k) for k in range(n)) if ln]
            except UnicodeDecodeError as exc:
                raise C2NPInputError(f"{p}: frame {frame} (line {first}): not UTF-8 text ({exc})") from exc
            line_no += len(lines)
            if len(lines) < n:
                raise C2NPInputError(f"{p}: frame {frame} (line {first}): expected {n} atom lines, "
                                     f"the file ends after {len(lines)}")
            tokens = "".join(lines).split()
            if len(tokens) != n * n_col:
                for k, ln in enumerate(lines):
                    if len(ln.split()) != n_col:
                        raise C2NPInputError(f"{p}: frame {frame} (line {first + k}): expected "
                                             f"{n_col} columns, got {len(ln.split())}")
            species = tokens[s_col::n_col]
            try:
                numbers = np.fromiter((symbols[s] for s in species), dtype=np.int64, count=n)
            except KeyError:
                k = next(i for i, s in enumerate(species) if s not in symbols)
                raise C2NPInputError(f"{p}: frame {frame} (line {first + k}): unknown element "
                                     f"{species[k]!r}") from None
            try:
                pos = np.array([tokens[p_col + c::n_col] for c in range(3)], dtype=np.float64).T
            except ValueError:
                for k, ln in enumerate(lines):
                    try:
                        [float(v) for v in ln.split()[p_col:p_col + 3]]
                    except ValueError:
                        raise C2NPInputError(f"{p}: frame {frame} (line {first + k}): position is "
                                             f"not a number: {ln.strip()[:60]!r}") from None
                raise
            yield XyzFrame(frame, count_line, info, numbers, pos.reshape(n, 3))
            frame += 1
    if frame == 0:
        raise C2NPInputError(f"{p}: no frames (empty or not an XYZ file)")


def iter_extxyz(path: str | os.PathLike[str], *, strict_comment: bool = True
                ) -> Iterator[tuple[int, Particle, dict[str, Any]]]:
    """Yield (frame_index, particle, info) from an (ext)XYZ file (:func:`iter_xyz_frames`);
    a non-finite position raises :class:`C2NPInputError` naming the file and the frame."""
    for fr in iter_xyz_frames(path, strict_comment=strict_comment):
        finite = np.all(np.isfinite(fr.positions_angstrom), axis=1)
        if not np.all(finite):
            raise C2NPInputError(f"{Path(path)}: frame {fr.index} (line {fr.line}): atom "
                                 f"{int(np.flatnonzero(~finite)[0])} has a non-finite position")
        yield fr.index, Particle(fr.numbers, fr.positions_angstrom), fr.info


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
        for _, part, _ in iter_extxyz(p, strict_comment=False):
            if part.n_atoms == 0:
                raise C2NPInputError(f"{p}: frame 0 has no atoms")
            return part
    raise C2NPInputError(f"{p}: unsupported particle format {suffix!r} (use .xyz, .extxyz or .cif)")
