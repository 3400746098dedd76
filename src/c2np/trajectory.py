"""Reading particles and trajectories from any structure format ASE reads, guarded.

:func:`read_trajectory` reads the selected frames of one file: (ext)XYZ through c2np's own
parser (:func:`c2np.particle_io.iter_xyz_frames`), a CIF as a finite cluster, anything else
(LAMMPS dumps, POSCAR/CONTCAR, XDATCAR, PDB, ASE ``.traj``, ...) through ``ase.io.iread``.
The file must be a regular, non-empty file within the ``trajectory_bytes`` limit; every frame
read must have finite positions and, across frames, the same atoms in the same order. An
unreadable file, an unknown format, LAMMPS type ids without a species map, or a periodic
box filled with atoms raise :class:`~c2np.errors.C2NPInputError` with one line naming the
file, the frame and the problem.

A frame in a periodic box (a LAMMPS dump of a particle in vacuum) is made whole: along each
periodic axis the atoms are cut at the middle of the largest empty gap, so that a particle
wrapped across the box boundary comes back in one piece. A box whose atoms leave no gap of
``min_vacuum_angstrom`` along a periodic axis holds a periodic solid, not a particle, and is
refused. :func:`average_frames` superimposes the frames on the first (best rotation and
translation, Kabsch) and averages the positions: thermal motion averages out.
"""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from c2np.errors import C2NPInputError
from c2np.limits import check as check_limit
from c2np.particle import Particle

__all__ = ["FrameSelection", "Trajectory", "AveragedFrames", "parse_frame_selection", "parse_species_map",
           "read_trajectory", "read_structure", "describe_trajectory", "average_frames", "resolve_format",
           "make_whole", "MIN_VACUUM_ANGSTROM"]

#: Smallest empty gap (Å) along a periodic axis for the atoms to be read as a finite particle.
MIN_VACUUM_ANGSTROM = 3.0

#: ASE formats never read: databases and servers, directories.
_REFUSED_FORMATS = frozenset({"db", "mysql", "postgresql", "bundletrajectory"})

_OWN_FORMATS = {".xyz": "extxyz", ".extxyz": "extxyz", ".cif": "cif"}


@dataclass(frozen=True)
class FrameSelection:
    """Frames of a file to read, as a Python slice over the frame indices (``step`` > 0)."""

    start: int | None = 0
    stop: int | None = 1
    step: int = 1

    @property
    def needs_count(self) -> bool:
        """True when a negative index makes the selection depend on the number of frames."""
        return any(v is not None and v < 0 for v in (self.start, self.stop))

    def indices(self, n_frames: int) -> list[int]:
        """The selected frame indices of a file of ``n_frames`` frames."""
        return list(range(n_frames))[slice(self.start, self.stop, self.step)]

    def may_select(self, index: int) -> bool:
        """Whether frame ``index`` is selected (selections without negative indices)."""
        start = self.start or 0
        if index < start or (self.stop is not None and index >= self.stop):
            return False
        return (index - start) % self.step == 0

    def past_end(self, index: int) -> bool:
        """Whether no frame at ``index`` or later is selected (no negative indices)."""
        return self.stop is not None and not self.needs_count and index >= self.stop

    def describe(self) -> str:
        """The selection as ``--frames`` would spell it."""
        def s(v: int | None) -> str:
            return "" if v is None else str(v)
        return f"{s(self.start)}:{s(self.stop)}:{self.step}"


#: The first frame only (what ``identify`` reads without ``--frames``).
FIRST_FRAME = FrameSelection(0, 1, 1)


def _int(text: str, spec: str) -> int | None:
    text = text.strip()
    if text == "":
        return None
    body = text[1:] if text.startswith("-") else text
    if not (body.isascii() and body.isdigit()):
        raise C2NPInputError(f"--frames {spec!r}: {text!r} is not a whole number (use e.g. all, 5, 0:100:10)")
    return int(text)


def parse_frame_selection(spec: str) -> FrameSelection:
    """``all``, ``N`` (one frame; negative counts from the end) or ``START:STOP[:STEP]``
    (Python slice semantics, STEP > 0) -> :class:`FrameSelection`."""
    text = spec.strip()
    if text.lower() in ("all", ":", "::"):
        return FrameSelection(None, None, 1)
    parts = text.split(":")
    if len(parts) == 1:
        k = _int(parts[0], spec)
        if k is None:
            raise C2NPInputError("--frames: empty (use e.g. all, 5, 0:100:10)")
        return FrameSelection(k, None if k == -1 else k + 1, 1)
    if len(parts) > 3:
        raise C2NPInputError(f"--frames {spec!r}: at most START:STOP:STEP")
    start, stop = _int(parts[0], spec), _int(parts[1], spec)
    step = _int(parts[2], spec) if len(parts) == 3 else None
    if step is not None and step <= 0:
        raise C2NPInputError(f"--frames {spec!r}: the step must be a positive whole number")
    return FrameSelection(start, stop, step or 1)


def parse_species_map(spec: str) -> dict[int, int]:
    """``"1=Cu,2=Au"`` -> {LAMMPS type id: atomic number}."""
    from ase.data import atomic_numbers

    out: dict[int, int] = {}
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, symbol = (s.strip() for s in part.partition("="))
        if not sep or not (key.isascii() and key.isdigit()) or int(key) < 1:
            raise C2NPInputError(f"--species {spec!r}: {part!r} is not TYPE=ELEMENT with TYPE a positive "
                                 "whole number (e.g. 1=Cu,2=Au)")
        z = atomic_numbers.get(symbol, 0)
        if not 1 <= z <= 118:
            raise C2NPInputError(f"--species {spec!r}: unknown element {symbol!r}")
        if int(key) in out:
            raise C2NPInputError(f"--species {spec!r}: type {key} given twice")
        out[int(key)] = z
    if not out:
        raise C2NPInputError("--species: empty (give TYPE=ELEMENT pairs, e.g. 1=Cu,2=Au)")
    return out


@dataclass(frozen=True, eq=False)
class Trajectory:
    """Selected frames of one file: the same atoms, in the same order, in every frame.

    Attributes:
        path: the file.
        format: the format read (``extxyz``, ``cif`` or an ASE format name).
        numbers: (n,) int64 atomic numbers.
        positions_angstrom: (F, n, 3) float64 Cartesian positions, each frame made whole.
        frame_indices: (F,) int64 index of each frame in the file (0-based).
    """

    path: Path
    format: str
    numbers: np.ndarray
    positions_angstrom: np.ndarray
    frame_indices: np.ndarray

    @property
    def n_frames(self) -> int:
        """Frames held."""
        return int(self.positions_angstrom.shape[0])

    def particle(self, k: int) -> Particle:
        """Frame ``k`` (of the selection, not of the file) as a :class:`Particle`."""
        return Particle(self.numbers, self.positions_angstrom[k])


@dataclass(frozen=True, eq=False)
class AveragedFrames:
    """Time-averaged positions of a trajectory.

    Attributes:
        particle: the mean positions, in the first frame's placement.
        rms_fluctuation_angstrom: root-mean-square distance of the atoms from their mean
            positions, over atoms and frames (Å).
        max_atom_rms_angstrom: the largest per-atom rms distance from its mean (Å): large
            values mean diffusion (melting, surface hopping), where a mean is not a site.
        n_frames: frames averaged.
    """

    particle: Particle
    rms_fluctuation_angstrom: float
    max_atom_rms_angstrom: float
    n_frames: int


def _kabsch_onto(moving: np.ndarray, target_centred: np.ndarray) -> np.ndarray:
    """``moving`` (n, 3) rotated and translated onto ``target_centred`` (centroid at 0)."""
    centred = moving - moving.mean(axis=0)
    u, _, vt = np.linalg.svd(centred.T @ target_centred)
    d = np.sign(np.linalg.det(u @ vt)) or 1.0
    rot = u @ np.diag([1.0, 1.0, d]) @ vt
    return np.asarray(centred @ rot)


def average_frames(trajectory: Trajectory) -> AveragedFrames:
    """Superimpose every frame on the first (Kabsch: rotation and translation; the atom order
    is the same in every frame) and average the positions."""
    pos = trajectory.positions_angstrom
    ref = pos[0] - pos[0].mean(axis=0)
    aligned = np.stack([ref] + [_kabsch_onto(p, ref) for p in pos[1:]])
    mean = aligned.mean(axis=0)
    dev2 = np.sum((aligned - mean) ** 2, axis=2)  # (F, n)
    return AveragedFrames(Particle(trajectory.numbers, mean + pos[0].mean(axis=0)),
                          rms_fluctuation_angstrom=float(np.sqrt(dev2.mean())),
                          max_atom_rms_angstrom=float(np.sqrt(dev2.mean(axis=0)).max()),
                          n_frames=trajectory.n_frames)


def make_whole(positions_angstrom: np.ndarray, cell_angstrom: np.ndarray, pbc: np.ndarray, *,
               min_vacuum_angstrom: float = MIN_VACUUM_ANGSTROM) -> tuple[np.ndarray, str | None]:
    """Cut the atoms at the middle of the largest empty gap along each periodic axis.

    Args:
        positions_angstrom: (n, 3) Cartesian positions.
        cell_angstrom: (3, 3) box vectors (rows).
        pbc: (3,) periodic flags.
        min_vacuum_angstrom: the smallest gap (Å, measured across the lattice planes) that
            separates a particle from its periodic images.

    Returns:
        (positions, problem): the positions shifted by box vectors so that the particle is in
        one piece, and ``None``; or the input and a sentence saying why it is not a particle.
    """
    pbc = np.asarray(pbc, dtype=bool)
    if not pbc.any() or len(positions_angstrom) == 0:
        return positions_angstrom, None
    cell = np.asarray(cell_angstrom, dtype=float)
    if abs(np.linalg.det(cell)) < 1e-9:
        return positions_angstrom, "periodic, but its box has no volume"
    inv = np.linalg.inv(cell)
    frac = positions_angstrom @ inv
    out = positions_angstrom.copy()
    for k in np.flatnonzero(pbc):
        spacing = 1.0 / float(np.linalg.norm(inv[:, k]))  # distance between lattice planes (Å)
        s = np.sort(np.mod(frac[:, k], 1.0))
        gaps = np.diff(np.concatenate([s, [s[0] + 1.0]]))
        j = int(np.argmax(gaps))
        gap_angstrom = float(gaps[j]) * spacing
        if gap_angstrom < min_vacuum_angstrom:
            return positions_angstrom, (f"the atoms fill the periodic box along {'abc'[k]} (largest empty gap "
                                        f"{gap_angstrom:.2f} Å < {min_vacuum_angstrom:g} Å): a periodic solid "
                                        "or a particle touching its images, not a finite particle")
        cut = s[j] + gaps[j] / 2.0  # the middle of the gap; atoms are placed in [cut - 1, cut)
        shift = np.floor(frac[:, k] - cut) + 1.0
        out -= np.outer(shift, cell[k])
    return out, None


def resolve_format(path: Path, fmt: str | None) -> str:
    """The format to read ``path`` with: ``fmt`` if given (an ASE format name, or ``extxyz``
    / ``cif`` for c2np's own readers), else by suffix for .xyz/.extxyz/.cif, else ASE's guess."""
    from ase.io.formats import UnknownFileTypeError, filetype, ioformats

    if fmt is not None:
        if fmt in ("extxyz", "xyz", "cif"):
            return "extxyz" if fmt == "xyz" else fmt
        info = ioformats.get(fmt)
        if info is None or not info.can_read or fmt in _REFUSED_FORMATS:
            readable = sorted(k for k, v in ioformats.items() if v.can_read and k not in _REFUSED_FORMATS)
            raise C2NPInputError(f"--format {fmt!r}: not a structure format c2np reads; one of: "
                                 f"{', '.join(readable)}")
        return fmt
    own = _OWN_FORMATS.get(path.suffix.lower())
    if own is not None:
        return own
    try:
        guessed = str(filetype(str(path), guess=True))
    except (UnknownFileTypeError, OSError, ValueError, UnicodeDecodeError) as exc:
        raise C2NPInputError(f"{path}: unknown structure format ({exc}); name it with --format "
                             "(an ASE format, e.g. lammps-dump-text, vasp, proteindatabank, traj)") from None
    info = ioformats.get(guessed)
    if info is None or not info.can_read or guessed in _REFUSED_FORMATS:
        raise C2NPInputError(f"{path}: unknown structure format (guessed {guessed!r}, which c2np does not "
                             "read); name it with --format (an ASE format, e.g. lammps-dump-text, vasp)")
    return "extxyz" if guessed in ("xyz", "extxyz") else guessed


def _check_file(path: Path) -> None:
    """A regular, non-empty file within the ``trajectory_bytes`` limit."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise C2NPInputError(f"{path}: no such file") from None
    except OSError as exc:
        raise C2NPInputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise C2NPInputError(f"{path}: not a regular file (a directory, pipe or device is not read)")
    if st.st_size == 0:
        raise C2NPInputError(f"{path}: empty file")
    check_limit("trajectory_bytes", st.st_size, what=str(path))


@dataclass(frozen=True, eq=False)
class _RawFrame:
    numbers: np.ndarray
    positions_angstrom: np.ndarray
    cell_angstrom: np.ndarray
    pbc: np.ndarray
    type_ids: np.ndarray | None  # LAMMPS type ids when the species were not in the file


def _own_frames(path: Path, fmt: str) -> Iterator[_RawFrame]:
    no_box = np.zeros((3, 3)), np.zeros(3, dtype=bool)
    if fmt == "cif":
        from c2np.cells import read_cif

        cell = read_cif(path)
        yield _RawFrame(cell.numbers, cell.cart_coords_angstrom, *no_box, None)
        return
    from c2np.particle_io import iter_xyz_frames

    for fr in iter_xyz_frames(path, strict_comment=False):
        yield _RawFrame(fr.numbers, fr.positions_angstrom, *no_box, None)


def _ase_frames(path: Path, fmt: str) -> Iterator[_RawFrame]:
    import ase.io

    index = 0
    it = ase.io.iread(str(path), index=":", format=fmt)
    while True:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                atoms = next(it)
        except StopIteration:
            return
        except C2NPInputError:
            raise
        except Exception as exc:  # ASE's parsers raise many types on malformed text
            raise C2NPInputError(f"{path}: frame {index}: unreadable as {fmt} "
                                 f"({type(exc).__name__}: {str(exc)[:200]})") from None
        types = atoms.arrays.get("type")
        numbers = np.asarray(atoms.numbers, dtype=np.int64)
        type_ids = None
        if types is not None and np.asarray(types).dtype.kind in "iu" and np.array_equal(types, numbers):
            type_ids = np.asarray(types, dtype=np.int64)  # ASE took LAMMPS type ids for atomic numbers
        yield _RawFrame(numbers, np.asarray(atoms.positions, dtype=np.float64),
                        np.asarray(atoms.cell[:], dtype=np.float64), np.asarray(atoms.pbc, dtype=bool), type_ids)
        index += 1


def _species(raw: _RawFrame, species: Mapping[int, int] | None, where: str, fmt: str) -> np.ndarray:
    if raw.type_ids is None:
        if species is not None:
            raise C2NPInputError(f"{where}: --species maps LAMMPS type ids, but this {fmt} file names its "
                                 "elements")
        return raw.numbers
    if species is None:
        types = ", ".join(str(t) for t in np.unique(raw.type_ids)[:8])
        raise C2NPInputError(f"{where}: atom types {types} but no elements (a LAMMPS dump without an "
                             "element column); give them with --species, e.g. --species 1=Cu,2=Au")
    missing = sorted(set(np.unique(raw.type_ids).tolist()) - set(species))
    if missing:
        raise C2NPInputError(f"{where}: atom type {missing[0]} has no element in --species")
    lut = np.zeros(max(max(species), int(raw.type_ids.max())) + 1, dtype=np.int64)
    for t, z in species.items():
        lut[t] = z
    return lut[raw.type_ids]


def read_trajectory(path: str | os.PathLike[str], *, frames: FrameSelection = FIRST_FRAME,
                    species: Mapping[int, int] | None = None, fmt: str | None = None,
                    min_vacuum_angstrom: float = MIN_VACUUM_ANGSTROM) -> Trajectory:
    """Read the selected frames of a structure or trajectory file (see the module docstring).

    Args:
        path: the file.
        frames: which frames (default: the first).
        species: LAMMPS type id -> atomic number, for files that hold type ids only.
        fmt: the format (ASE name); default: by suffix, else ASE's guess from the content.
        min_vacuum_angstrom: smallest empty gap along a periodic axis for a finite particle.

    Raises:
        C2NPInputError: one line naming the file, the frame and the problem.
    """
    p = Path(path)
    _check_file(p)
    fmt_name = resolve_format(p, fmt)

    def source() -> Iterator[_RawFrame]:
        return _own_frames(p, fmt_name) if fmt_name in ("extxyz", "cif") else _ase_frames(p, fmt_name)

    chosen: set[int] | None = None
    n_total = 0
    if frames.needs_count:  # a negative index: count the frames first
        n_total = sum(1 for _ in source())
        chosen = set(frames.indices(n_total))
    kept: list[tuple[int, np.ndarray, np.ndarray]] = []
    for index, raw in enumerate(source()):
        n_total = max(n_total, index + 1)
        if chosen is None and frames.past_end(index):
            break
        if not (index in chosen if chosen is not None else frames.may_select(index)):
            continue
        kept.append((index, *_checked_frame(raw, f"{p}: frame {index}", kept, species=species, fmt=fmt_name,
                                            min_vacuum_angstrom=min_vacuum_angstrom)))
    if n_total == 0:
        raise C2NPInputError(f"{p}: no frames (empty or not a {fmt_name} file)")
    if not kept:
        raise C2NPInputError(f"{p}: --frames {frames.describe()} selects none of its {n_total} frames")
    return Trajectory(p, fmt_name, kept[0][1], np.stack([k[2] for k in kept]),
                      np.array([k[0] for k in kept], dtype=np.int64))


def _checked_frame(raw: _RawFrame, where: str, kept: list[tuple[int, np.ndarray, np.ndarray]], *,
                   species: Mapping[int, int] | None, fmt: str,
                   min_vacuum_angstrom: float) -> tuple[np.ndarray, np.ndarray]:
    """(numbers, whole positions) of one frame, checked against the frames ``kept`` before it."""
    check_limit("atoms_per_particle", len(raw.numbers), what=where)
    if len(raw.numbers) == 0:
        raise C2NPInputError(f"{where}: no atoms")
    numbers = _species(raw, species, where, fmt)
    finite = np.all(np.isfinite(raw.positions_angstrom), axis=1)
    if not finite.all():
        raise C2NPInputError(f"{where}: atom {int(np.flatnonzero(~finite)[0])} has a non-finite position")
    if kept:
        first, ref = kept[0][0], kept[0][1]
        if len(numbers) != len(ref):
            raise C2NPInputError(f"{where}: {len(numbers)} atoms, but frame {first} has {len(ref)}: the "
                                 "frames to solve need a fixed atom count")
        if not np.array_equal(numbers, ref):
            k = int(np.flatnonzero(numbers != ref)[0])
            raise C2NPInputError(f"{where}: atom {k} has another element than in frame {first}: the frames "
                                 "to solve need the same atoms in the same order")
    pos, problem = make_whole(raw.positions_angstrom, raw.cell_angstrom, raw.pbc,
                              min_vacuum_angstrom=min_vacuum_angstrom)
    if problem is not None:
        raise C2NPInputError(f"{where}: {problem}")
    return numbers, pos


def read_structure(path: str | os.PathLike[str], *, species: Mapping[int, int] | None = None,
                   fmt: str | None = None) -> Particle:
    """The first frame of any file :func:`read_trajectory` reads, as a :class:`Particle`."""
    return read_trajectory(path, species=species, fmt=fmt).particle(0)


def describe_trajectory(trajectory: Trajectory) -> dict[str, Any]:
    """JSON-serialisable summary: file, format, atoms, frames read."""
    return {"file": str(trajectory.path), "format": trajectory.format, "n_atoms": int(len(trajectory.numbers)),
            "frames": trajectory.frame_indices.tolist()}
