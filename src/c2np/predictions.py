"""Prediction files: every reader and writer of what a model hands back (contract §8).

* task 1: extended XYZ (one frame per sample, ``info["sample_id"]``; read through the one
  XYZ parser :func:`c2np.particle_io.iter_xyz_frames`) or the package's HDF5 format;
* task 2: CSV ``sample_id,a,b,c,alpha,beta,gamma,spacegroup``, and the in-memory record
  :class:`InversePrediction`.

A file that cannot be read as predictions raises :class:`C2NPInputError` naming the file,
the frame / line / index and the problem. Values that are readable but unusable (NaN, an
empty field, a negative length) are returned as they are: the harness scores them as
failures. All writers are atomic (:mod:`c2np.fileio`).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from c2np.errors import C2NPInputError
from c2np.fileio import atomic_path, atomic_write, read_text_bounded
from c2np.lattice import LATTICE_PARAMETER_NAMES, LatticeParameters
from c2np.particle import Particle
from c2np.particle_io import iter_xyz_frames, write_extxyz
from c2np.store import check_declared_sizes

__all__ = ["FORWARD_H5_FORMAT", "FORWARD_H5_VERSION", "INVERSE_COLUMNS", "InversePrediction",
           "InverseRow", "inverse_values", "forward_format", "iter_forward_predictions",
           "write_forward_predictions", "write_forward_predictions_h5", "read_inverse_predictions",
           "write_inverse_predictions"]

FORWARD_H5_FORMAT = "c2np-forward-predictions"
FORWARD_H5_VERSION = 1
INVERSE_COLUMNS: tuple[str, ...] = ("sample_id", *LATTICE_PARAMETER_NAMES, "spacegroup")


@dataclass(frozen=True)
class InversePrediction:
    """A task-2 prediction: standardized conventional lattice parameters and space group.

    Attributes:
        parameters: a, b, c (Å), alpha, beta, gamma (degrees).
        spacegroup: international number 1..230.
    """

    parameters: LatticeParameters
    spacegroup: int

    @classmethod
    def from_values(cls, values: Sequence[float], spacegroup: int) -> InversePrediction:
        """From (6,) a, b, c, alpha, beta, gamma and a space-group number."""
        return cls(LatticeParameters.from_array(values), int(spacegroup))

    def as_tuple(self) -> tuple[float, float, float, float, float, float, int]:
        """(a, b, c, alpha, beta, gamma, spacegroup), the form ``InverseTask.evaluate`` takes."""
        a, b, c, al, be, ga = (float(v) for v in self.parameters.as_array())
        return (a, b, c, al, be, ga, int(self.spacegroup))


def inverse_values(value: Any) -> tuple[np.ndarray, float]:
    """(6,) parameters and the space group of one in-memory task-2 prediction: an
    :class:`InversePrediction`, an :class:`InverseRow` read from a CSV, a 7-sequence
    ``(a, b, c, alpha, beta, gamma, spacegroup)`` or a mapping with those keys. Raises
    ``TypeError`` / ``ValueError`` / ``KeyError`` on anything else (the harness turns that
    into a :class:`C2NPInputError` naming the id)."""
    if isinstance(value, InversePrediction):
        return value.parameters.as_array(), float(value.spacegroup)
    if isinstance(value, InverseRow):  # a row read back from a CSV (rewritten, e.g. under other ids)
        return np.asarray(value.params, dtype=float), float(value.spacegroup)
    if isinstance(value, Mapping):
        return (np.array([float(value[c]) for c in LATTICE_PARAMETER_NAMES]),
                float(value["spacegroup"]))
    seq = list(value)
    if len(seq) != 7:
        raise ValueError(f"expected 7 values (a, b, c, alpha, beta, gamma, spacegroup), got {len(seq)}")
    return np.array([float(v) for v in seq[:6]]), float(seq[6])


# --- task 1 ----------------------------------------------------------------------------------
def forward_format(path: str | os.PathLike[str]) -> str:
    """``"extxyz"`` or ``"hdf5"`` by suffix; anything else raises :class:`C2NPInputError`."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".extxyz", ".xyz"):
        return "extxyz"
    if suffix in (".h5", ".hdf5"):
        return "hdf5"
    raise C2NPInputError(f"{p}: unknown predictions format {suffix!r} (use .extxyz or .h5)")


def _iter_extxyz_predictions(p: Path) -> Iterator[tuple[str, str, np.ndarray, np.ndarray]]:
    for fr in iter_xyz_frames(p):
        sid = fr.info.get("sample_id")
        if sid is None or str(sid).strip() == "":
            raise C2NPInputError(f"{p}: frame {fr.index} (line {fr.line + 1}): no sample_id in the "
                                 "comment line")
        yield f"frame {fr.index} (line {fr.line})", str(sid), fr.numbers, fr.positions_angstrom


def _iter_h5_predictions(p: Path) -> Iterator[tuple[str, str, np.ndarray, np.ndarray]]:
    import h5py

    from c2np.hdf5_guard import check_hdf5_readable

    check_hdf5_readable(p)      # a child process reads it first: damage cannot crash this one
    try:
        f = h5py.File(p, "r")
    except OSError as exc:
        raise C2NPInputError(f"{p}: not a readable HDF5 file ({exc})") from exc
    with f:
        fmt = f.attrs.get("format")
        if isinstance(fmt, bytes):
            fmt = fmt.decode()
        if fmt != FORWARD_H5_FORMAT:
            raise C2NPInputError(f"{p}: format attribute is {fmt!r}, expected {FORWARD_H5_FORMAT!r}")
        for name in ("sample_ids", "offsets", "numbers", "positions"):
            if name not in f or not isinstance(f[name], h5py.Dataset):
                raise C2NPInputError(f"{p}: missing dataset /{name}")
        check_declared_sizes(f, ["sample_ids", "offsets", "numbers", "positions"], source=str(p),
                             limit="prediction_bytes")
        ids = [s.decode() if isinstance(s, bytes) else str(s) for s in f["sample_ids"][()]]
        offsets = np.asarray(f["offsets"][()], dtype=np.int64)
        numbers = np.asarray(f["numbers"][()])
        pos_ds = f["positions"]
        if offsets.shape != (len(ids) + 1,) or offsets[0] != 0 or np.any(np.diff(offsets) < 0):
            raise C2NPInputError(f"{p}: /offsets must be non-decreasing, start at 0 and have "
                                 f"len(sample_ids) + 1 = {len(ids) + 1} entries")
        if offsets[-1] != len(numbers) or pos_ds.shape != (len(numbers), 3):
            raise C2NPInputError(f"{p}: /numbers {numbers.shape} and /positions {pos_ds.shape} do "
                                 f"not match /offsets[-1] = {offsets[-1]}")
        if not np.issubdtype(numbers.dtype, np.integer):
            raise C2NPInputError(f"{p}: /numbers must be integers, got {numbers.dtype}")
        bad = np.flatnonzero((numbers < 1) | (numbers > 118))
        if len(bad):
            k = int(np.searchsorted(offsets, bad[0], "right") - 1)
            raise C2NPInputError(f"{p}: sample {k} ({ids[k]!r}): unknown element (atomic number "
                                 f"{int(numbers[bad[0]])} at /numbers[{int(bad[0])}])")
        for k, sid in enumerate(ids):  # positions are read one sample at a time
            a, b = int(offsets[k]), int(offsets[k + 1])
            pos = np.asarray(pos_ds[a:b], dtype=np.float64).reshape(b - a, 3)
            yield f"index {k}", sid, numbers[a:b].astype(np.int64), pos


def iter_forward_predictions(path: str | os.PathLike[str]
                             ) -> Iterator[tuple[str, str, np.ndarray, np.ndarray]]:
    """Yield ``(place, sample_id, numbers (n,), positions (n, 3) Å)`` from a task-1 predictions
    file: ``.extxyz`` / ``.xyz`` or ``.h5`` / ``.hdf5``. Positions may be non-finite (that
    sample is a failure); anything unreadable raises :class:`C2NPInputError`."""
    p = Path(path)
    if not p.is_file():
        raise C2NPInputError(f"{p}: no such predictions file")
    if forward_format(p) == "extxyz":
        yield from _iter_extxyz_predictions(p)
    else:
        yield from _iter_h5_predictions(p)


def write_forward_predictions(path: str | os.PathLike[str], predictions: Mapping[str, Particle]
                              ) -> Path:
    """Write task-1 predictions ``{sample_id: Particle}`` as extxyz (atomically)."""
    return write_extxyz(path, ((part, {"sample_id": sid}) for sid, part in predictions.items()))


def write_forward_predictions_h5(path: str | os.PathLike[str],
                                 predictions: Mapping[str, Particle]) -> Path:
    """Write task-1 predictions in the package's HDF5 format (atomically): datasets
    ``sample_ids`` (utf-8), ``offsets`` (n+1,) int64, ``numbers`` (N,) int16,
    ``positions`` (N, 3) float32 Å; attributes ``format``, ``format_version``."""
    import h5py

    p = Path(path)
    ids = list(predictions)
    parts = [predictions[s] for s in ids]
    offsets = np.concatenate([[0], np.cumsum([pt.n_atoms for pt in parts])]).astype(np.int64)
    numbers = (np.concatenate([pt.numbers for pt in parts]) if parts else np.zeros(0)).astype(np.int16)
    pos = (np.concatenate([pt.positions_angstrom for pt in parts]) if parts
           else np.zeros((0, 3))).astype(np.float32)
    with atomic_path(p) as tmp, h5py.File(tmp, "w") as f:
        f.attrs["format"] = FORWARD_H5_FORMAT
        f.attrs["format_version"] = FORWARD_H5_VERSION
        f.create_dataset("sample_ids", data=np.array(ids, dtype=object),
                         dtype=h5py.string_dtype("utf-8"))
        f.create_dataset("offsets", data=offsets)
        f.create_dataset("numbers", data=numbers)
        f.create_dataset("positions", data=pos)
    return p


# --- task 2 ----------------------------------------------------------------------------------
def write_inverse_predictions(path: str | os.PathLike[str], predictions: Mapping[str, Any]) -> Path:
    """Write task-2 predictions ``{sample_id: prediction}`` (each an
    :class:`InversePrediction`, a 7-tuple or a mapping, see :func:`inverse_values`) as CSV
    ``sample_id,a,b,c,alpha,beta,gamma,spacegroup`` (atomically)."""
    with atomic_write(path) as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(INVERSE_COLUMNS)
        for sid, value in predictions.items():
            params, sg = inverse_values(value)
            sg_text = str(int(sg)) if math.isfinite(sg) and sg == int(sg) else repr(sg)
            w.writerow([sid, *(repr(float(x)) for x in params), sg_text])
    return Path(path)


@dataclass(frozen=True)
class InverseRow:
    """One parsed CSV row: parameters (6,) (NaN where missing) and the space group."""

    line: int
    params: np.ndarray
    spacegroup: float


def _parse_number(text: str, where: str, column: str) -> float:
    t = text.strip()
    if t == "":
        return math.nan  # an empty field is a missing value: the sample fails
    try:
        if "_" in t:  # float() reads '4_1' as 41: a space-group symbol must not become a number
            raise ValueError(t)
        return float(t)
    except ValueError:
        raise C2NPInputError(f"{where}: column {column!r} is not a number: {t[:40]!r}") from None


def read_inverse_predictions(path: str | os.PathLike[str]) -> dict[str, InverseRow]:
    """Read a task-2 CSV into ``{sample_id: InverseRow}``. Unreadable text, a missing or
    repeated column, a row with the wrong number of fields, an empty or duplicate sample id,
    or a non-numeric value raise :class:`C2NPInputError` naming the file and line."""
    p = Path(path)
    if not p.is_file():
        raise C2NPInputError(f"{p}: no such predictions file")
    try:
        text = read_text_bounded(p, encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise C2NPInputError(f"{p}: not UTF-8 text ({exc})") from exc
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise C2NPInputError(f"{p}: empty file (expected a header "
                             f"{','.join(INVERSE_COLUMNS)})") from None
    except csv.Error as exc:
        raise C2NPInputError(f"{p}: line 1: not CSV ({exc})") from exc
    header = [h.strip() for h in header]
    missing = [c for c in INVERSE_COLUMNS if c not in header]
    if missing:
        raise C2NPInputError(f"{p}: line 1: missing column(s) {missing} (header is {header})")
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise C2NPInputError(f"{p}: line 1: repeated column(s) {dup}")
    col = {c: header.index(c) for c in INVERSE_COLUMNS}
    out: dict[str, InverseRow] = {}
    end = reader.line_num
    try:
        for fields in reader:
            line, end = end + 1, reader.line_num  # a quoted field may span lines: name the first
            where = f"{p}: line {line}"
            if not fields or all(f.strip() == "" for f in fields):
                continue
            if any("\n" in f or "\r" in f for f in fields):
                raise C2NPInputError(f"{where}: a quoted field runs over {end - line + 1} lines "
                                     "(an unterminated quote?)")
            if len(fields) != len(header):
                raise C2NPInputError(f"{where}: expected {len(header)} fields, got {len(fields)}")
            sid = fields[col["sample_id"]].strip()
            if not sid:
                raise C2NPInputError(f"{where}: empty sample_id")
            if sid in out:
                raise C2NPInputError(f"{where}: duplicate sample_id {sid!r} (first on line "
                                     f"{out[sid].line})")
            params = np.array([_parse_number(fields[col[c]], where, c) for c in LATTICE_PARAMETER_NAMES])
            sg = _parse_number(fields[col["spacegroup"]], where, "spacegroup")
            out[sid] = InverseRow(line=line, params=params, spacegroup=sg)
    except csv.Error as exc:
        raise C2NPInputError(f"{p}: line {reader.line_num}: not CSV ({exc})") from exc
    return out
