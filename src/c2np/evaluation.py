"""The evaluation harness (SPEC §6-8): prediction files in, trustworthy numbers out.

* prediction files: task 1 as extxyz (one frame per sample, ``info["sample_id"]``) or the
  package's HDF5 format; task 2 as CSV ``sample_id,a,b,c,alpha,beta,gamma,spacegroup``.
  A file that cannot be read as predictions raises :class:`C2NPInputError` naming the file,
  the frame / line / index and the problem. An unusable prediction inside a readable file
  is a per-sample failure.
* the ``eval`` subset: a fixed, seeded subset of rotations per (material, R)
  (:func:`select_rows`); ``full`` uses every sample of the split.
* aggregation: overall, per radius, per material and per split; failure-penalised mean
  with a seeded 95 % percentile-bootstrap interval, the mean over successes, and counts.
* results: one JSON per (model, task, protocol, split), written atomically.

See docs/evaluation.md for every rule.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import platform
import sys
import time
import zlib
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Protocol, Sequence

import numpy as np

from c2np.particle import Particle
from c2np.errors import C2NPInputError
from c2np.metrics import (F1_TOLERANCES_ANGSTROM, InverseTarget, MetricInfo, ReferenceSummary,
                          Scores, forward_failure, forward_metric_info, forward_metrics,
                          inverse_failure, inverse_metric_info,
                          inverse_metrics)
from c2np.splits import SPLITS, RecipeTable, sample_id as make_sample_id

__all__ = [
    "EvalStore",
    "evaluate_task",
    "EVAL_ROTATIONS_PER_GROUP",
    "EVAL_SEED",
    "EVAL_SPLITS",
    "SUBSETS",
    "RESULTS_SCHEMA",
    "select_rows",
    "iter_forward_predictions",
    "read_inverse_predictions",
    "write_forward_predictions",
    "write_forward_predictions_h5",
    "write_inverse_predictions",
    "file_sha256",
    "bootstrap_mean_ci",
    "aggregate",
    "Results",
    "evaluate_forward",
    "evaluate_inverse",
    "inverse_target",
    "plot_results",
]

EVAL_ROTATIONS_PER_GROUP = 8
EVAL_SEED = 20260119
SUBSETS: tuple[str, ...] = ("eval", "full")
EVAL_SPLITS: tuple[str, ...] = (*SPLITS, "test", "heldout")
RESULTS_SCHEMA = "c2np.results/1"
FORWARD_H5_FORMAT = "c2np-forward-predictions"
FORWARD_H5_VERSION = 1
INVERSE_COLUMNS: tuple[str, ...] = ("sample_id", "a", "b", "c", "alpha", "beta", "gamma",
                                    "spacegroup")
FORWARD_HEADLINE = ("f1@0.1", "f1@0.5", "matched_rmsd", "hausdorff", "count_error",
                    "pair_distance_error")
INVERSE_HEADLINE = ("spacegroup_accuracy", "joint_accuracy_paper", "joint_accuracy_strict",
                    "length_rmse", "angle_rmse", "lattice_rmse_perm_invariant")


class EvalStore(Protocol):
    """What the harness needs from a dataset store (``c2np.store.DatasetStore`` has it)."""

    recipes: RecipeTable
    cells: Mapping[str, Any]
    fingerprint: str

    def particle(self, row: int) -> Particle:
        """The reference particle of sample ``row`` (rotated, centred)."""

    def base_particle(self, material: str, radius_angstrom: int) -> Particle:
        """The unrotated (material, R) particle."""


# ----------------------------------------------------------------------------------------
# Which samples are evaluated
# ----------------------------------------------------------------------------------------
def _split_mask(recipes: RecipeTable, split: str) -> np.ndarray:
    if split == "test":
        return recipes.mask("id") | recipes.mask("ood")
    if split == "heldout":
        held = set(recipes.heldout_materials)
        if not held:
            raise C2NPInputError(f"protocol {recipes.protocol!r} has no held-out materials "
                                 "(split 'heldout' exists in protocol 'strict')")
        idx = [i for i, m in enumerate(recipes.materials) if m in held]
        return np.isin(recipes.material_index, idx)
    if split not in SPLITS:
        raise C2NPInputError(f"unknown split {split!r}; choose one of {list(EVAL_SPLITS)}")
    return recipes.mask(split)


def select_rows(recipes: RecipeTable, split: str, subset: str = "eval", *,
                per_group: int = EVAL_ROTATIONS_PER_GROUP, seed: int = EVAL_SEED) -> np.ndarray:
    """Sorted row indices of ``split`` (one of SPLITS, ``test`` = id ∪ ood, ``heldout`` = all
    rows of the held-out materials) restricted to ``subset``.

    ``eval``: in every (material, R) group of the split, ``per_group`` rotations drawn
    without replacement from the group's rotation indices k >= 1 (the identity ``rot_0`` is
    never drawn) by ``numpy.random.default_rng([seed, R]).choice(sorted(k), per_group)``;
    all of them when the group has fewer. Materials sharing an orientation set (protocol
    ``paper``) therefore get the same rotation indices. ``full``: every row.
    """
    if subset not in SUBSETS:
        raise C2NPInputError(f"unknown subset {subset!r}; choose one of {list(SUBSETS)}")
    rows = np.flatnonzero(_split_mask(recipes, split))
    if subset == "full" or len(rows) == 0:
        return rows
    mat = recipes.material_index[rows]
    rad = recipes.radius_angstrom[rows]
    rot = recipes.rotation_index[rows]
    order = np.lexsort((rot, rad, mat))
    rows, mat, rad, rot = rows[order], mat[order], rad[order], rot[order]
    keys = mat.astype(np.int64) * 100_000 + rad
    bounds = np.flatnonzero(np.diff(keys)) + 1
    chosen: list[np.ndarray] = []
    for a, b in zip(np.r_[0, bounds], np.r_[bounds, len(rows)]):
        g_rows, g_rot = rows[a:b], rot[a:b]
        cand = g_rot > 0
        g_rows, g_rot = g_rows[cand], g_rot[cand]
        if len(g_rot) <= per_group:
            chosen.append(g_rows)
            continue
        rng = np.random.default_rng([int(seed), int(rad[a])])
        pick = rng.choice(len(g_rot), size=per_group, replace=False)
        chosen.append(g_rows[pick])
    return np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=np.int64)


# ----------------------------------------------------------------------------------------
# Prediction files
# ----------------------------------------------------------------------------------------
def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex digest of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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


def _iter_extxyz_predictions(p: Path) -> Iterator[tuple[str, str, np.ndarray, np.ndarray]]:
    from ase.io.extxyz import key_val_str_to_dict

    symbols = _symbol_table()
    frame = 0
    line_no = 0
    with open(p, "r", encoding="utf-8", errors="strict") as fh:
        while True:
            try:
                head = fh.readline()
            except UnicodeDecodeError as exc:
                raise C2NPInputError(f"{p}: frame {frame}: not UTF-8 text ({exc})") from exc
            line_no += 1
            if head == "":
                break
            if head.strip() == "":
                continue  # blank lines between frames
            where = f"{p}: frame {frame} (line {line_no})"
            try:
                n = int(head.strip())
            except ValueError:
                raise C2NPInputError(f"{where}: expected an atom count, got {head.strip()[:40]!r}") from None
            if n < 0:
                raise C2NPInputError(f"{where}: negative atom count {n}")
            comment = fh.readline()
            line_no += 1
            if comment == "":
                raise C2NPInputError(f"{where}: file ends before the comment line")
            try:
                info = key_val_str_to_dict(comment.strip())
            except Exception as exc:  # ASE raises several types on malformed key=value text
                raise C2NPInputError(f"{p}: frame {frame} (line {line_no}): unreadable comment line "
                                     f"({type(exc).__name__}: {exc})") from exc
            sid = info.get("sample_id")
            if sid is None or str(sid).strip() == "":
                raise C2NPInputError(f"{p}: frame {frame} (line {line_no}): no sample_id in the "
                                     "comment line")
            try:
                s_col, p_col, n_col = _parse_properties(str(info.get("Properties", "species:S:1:pos:R:3")))
            except ValueError as exc:
                raise C2NPInputError(f"{p}: frame {frame} (line {line_no}): {exc}") from exc
            first = line_no + 1
            lines = list(islice(fh, n))
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
            yield f"frame {frame} (line {first - 1})", str(sid), numbers, pos.reshape(n, 3)
            frame += 1
    if frame == 0:
        raise C2NPInputError(f"{p}: no frames (empty or not an extxyz file)")


def _iter_h5_predictions(p: Path) -> Iterator[tuple[str, str, np.ndarray, np.ndarray]]:
    import h5py

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
            if name not in f:
                raise C2NPInputError(f"{p}: missing dataset /{name}")
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
    suffix = p.suffix.lower()
    if suffix in (".extxyz", ".xyz"):
        yield from _iter_extxyz_predictions(p)
    elif suffix in (".h5", ".hdf5"):
        yield from _iter_h5_predictions(p)
    else:
        raise C2NPInputError(f"{p}: unknown predictions format {suffix!r} (use .extxyz or .h5)")


def write_forward_predictions(path: str | os.PathLike[str], predictions: Mapping[str, Particle]
                              ) -> Path:
    """Write task-1 predictions ``{sample_id: Particle}`` as extxyz (atomically)."""
    from c2np.particle_io import write_extxyz

    return write_extxyz(path, ((part, {"sample_id": sid}) for sid, part in predictions.items()))


def write_forward_predictions_h5(path: str | os.PathLike[str],
                                 predictions: Mapping[str, Particle]) -> Path:
    """Write task-1 predictions in the package's HDF5 format (atomically): datasets
    ``sample_ids`` (utf-8), ``offsets`` (n+1,) int64, ``numbers`` (N,) int16,
    ``positions`` (N, 3) float32 Å; attributes ``format``, ``format_version``."""

    import h5py

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    ids = list(predictions)
    parts = [predictions[s] for s in ids]
    offsets = np.concatenate([[0], np.cumsum([pt.n_atoms for pt in parts])]).astype(np.int64)
    numbers = (np.concatenate([pt.numbers for pt in parts]) if parts else np.zeros(0)).astype(np.int16)
    pos = (np.concatenate([pt.positions_angstrom for pt in parts]) if parts
           else np.zeros((0, 3))).astype(np.float32)
    from c2np.particle_io import atomic_path

    with atomic_path(p) as tmp, h5py.File(tmp, "w") as f:
        f.attrs["format"] = FORWARD_H5_FORMAT
        f.attrs["format_version"] = FORWARD_H5_VERSION
        f.create_dataset("sample_ids", data=np.array(ids, dtype=object),
                         dtype=h5py.string_dtype("utf-8"))
        f.create_dataset("offsets", data=offsets)
        f.create_dataset("numbers", data=numbers)
        f.create_dataset("positions", data=pos)
    return p


def write_inverse_predictions(path: str | os.PathLike[str],
                              rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write task-2 predictions as CSV ``sample_id,a,b,c,alpha,beta,gamma,spacegroup``
    (atomically); each row is a mapping with those keys (or has ``as_row()``)."""
    from c2np.particle_io import atomic_write

    with atomic_write(path) as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(INVERSE_COLUMNS)
        for row in rows:
            r = row.as_row() if hasattr(row, "as_row") else row  # type: ignore[union-attr]
            w.writerow([r["sample_id"], *(repr(float(r[c])) for c in INVERSE_COLUMNS[1:7]),
                        int(r["spacegroup"])])
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
        text = p.read_text(encoding="utf-8-sig")
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
    try:
        for fields in reader:
            line = reader.line_num
            where = f"{p}: line {line}"
            if not fields or all(f.strip() == "" for f in fields):
                continue
            if len(fields) != len(header):
                raise C2NPInputError(f"{where}: expected {len(header)} fields, got {len(fields)}")
            sid = fields[col["sample_id"]].strip()
            if not sid:
                raise C2NPInputError(f"{where}: empty sample_id")
            if sid in out:
                raise C2NPInputError(f"{where}: duplicate sample_id {sid!r} (first on line "
                                     f"{out[sid].line})")
            params = np.array([_parse_number(fields[col[c]], where, c) for c in INVERSE_COLUMNS[1:7]])
            sg = _parse_number(fields[col["spacegroup"]], where, "spacegroup")
            out[sid] = InverseRow(line=line, params=params, spacegroup=sg)
    except csv.Error as exc:
        raise C2NPInputError(f"{p}: line {reader.line_num}: not CSV ({exc})") from exc
    return out


# ----------------------------------------------------------------------------------------
# Aggregation
# ----------------------------------------------------------------------------------------
def bootstrap_mean_ci(values: np.ndarray, *, n_resamples: int = 1000, seed: int | Sequence[int] = 0,
                      confidence: float = 0.95) -> np.ndarray:
    """Percentile-bootstrap interval of the mean of each column of ``values`` (n, m).

    Returns (m, 2) lower and upper bounds. Resampling counts are drawn once (shared by
    the columns) from ``numpy.random.default_rng(seed)``. A single sample gives [v, v].
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        v = v[:, None]
    n = len(v)
    if n == 0:
        return np.full((v.shape[1], 2), np.nan)
    if n == 1:
        return np.repeat(v[0][:, None], 2, axis=1)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(n_resamples, n))
    counts = np.bincount((draws + (np.arange(n_resamples) * n)[:, None]).ravel(),
                         minlength=n_resamples * n).reshape(n_resamples, n)
    means = counts @ v / n
    alpha = (1.0 - confidence) / 2.0
    return np.quantile(means, [alpha, 1.0 - alpha], axis=0).T


def _group_seed(seed: int, key: str) -> list[int]:
    return [int(seed), zlib.crc32(key.encode())]


def aggregate(values: np.ndarray, ok: np.ndarray, names: Sequence[str], *, key: str = "overall",
              n_resamples: int = 1000, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Per-metric summary of a group of samples.

    ``values`` (n, m) holds each sample's value, failures already at their penalty value;
    ``ok`` (n,) marks successes. Returns ``{metric: {mean, ci95, mean_successes, n,
    n_failed}}``: ``mean`` is the failure-penalised mean with its bootstrap interval,
    ``mean_successes`` the mean over successes only (None when all failed).
    """
    v = np.asarray(values, dtype=np.float64)
    okm = np.asarray(ok, dtype=bool)
    ci = bootstrap_mean_ci(v, n_resamples=n_resamples, seed=_group_seed(seed, key))
    n_failed = int(np.sum(~okm))
    out: dict[str, dict[str, Any]] = {}
    for j, name in enumerate(names):
        col = v[:, j]
        succ = col[okm]
        out[name] = {
            "mean": float(col.mean()) if len(col) else None,
            "ci95": [float(ci[j, 0]), float(ci[j, 1])] if len(col) else None,
            "mean_successes": float(succ.mean()) if len(succ) else None,
            "n": int(len(col)),
            "n_failed": n_failed,
        }
    return out


# ----------------------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------------------
def _versions() -> dict[str, str]:
    import importlib.metadata as md

    import c2np

    out = {"c2np": c2np.__version__, "python": platform.python_version()}
    for pkg in ("numpy", "scipy", "h5py", "ase", "spglib"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


@dataclass(frozen=True, eq=False)
class Results:
    """Evaluation results of one (model, task, protocol, split).

    Attributes:
        data: the JSON document (see docs/evaluation.md, schema ``c2np.results/1``).
    """

    data: dict[str, Any] = field(default_factory=dict)

    @property
    def overall(self) -> dict[str, dict[str, Any]]:
        """Overall metric summaries."""
        return self.data["metrics"]["overall"]

    @property
    def n_failed(self) -> int:
        """Number of failed samples."""
        return int(self.data["n_failed"])

    @property
    def failed_samples(self) -> list[dict[str, str]]:
        """[{sample_id, reason}] of every failure."""
        return list(self.data["failed_samples"])

    def to_json(self) -> str:
        """The document as JSON text."""
        return json.dumps(self.data, indent=1, allow_nan=False)

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the JSON atomically."""
        from c2np.particle_io import atomic_write

        text = self.to_json()
        with atomic_write(path) as fh:
            fh.write(text + "\n")
        return Path(path)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> "Results":
        """Load a results JSON."""
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise C2NPInputError(f"{p}: not a readable results file ({exc})") from exc
        if data.get("schema") != RESULTS_SCHEMA:
            raise C2NPInputError(f"{p}: schema {data.get('schema')!r}, expected {RESULTS_SCHEMA!r}")
        return cls(data)


def _assemble(*, task: str, model: str, store: EvalStore, split: str, subset: str,
              rows: np.ndarray, scores: list[Scores], info: dict[str, MetricInfo],
              predictions_meta: dict[str, Any], tolerances: dict[str, Any],
              n_resamples: int, seed: int, extra: dict[str, Any], seconds: float) -> Results:
    t = store.recipes
    names = list(info)
    values = np.array([[s.values[n] for n in names] for s in scores], dtype=np.float64).reshape(len(scores), len(names))
    ok = np.array([s.ok for s in scores], dtype=bool)
    mats = np.asarray(t.materials, dtype=object)[t.material_index[rows]] if len(rows) else np.zeros(0, dtype=object)
    radii = t.radius_angstrom[rows]
    splits = np.asarray(SPLITS, dtype=object)[t.split[rows]] if len(rows) else np.zeros(0, dtype=object)
    ids = [make_sample_id(m, r, k) for m, r, k in zip(mats, radii, t.rotation_index[rows])]

    def groups(labels: np.ndarray, prefix: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for lab in sorted(set(labels.tolist()), key=lambda x: (isinstance(x, str), x)):
            m = labels == lab
            out[str(lab)] = aggregate(values[m], ok[m], names, key=f"{prefix}:{lab}",
                                      n_resamples=n_resamples, seed=seed)
        return out

    metrics = {
        "overall": aggregate(values, ok, names, key="overall", n_resamples=n_resamples, seed=seed),
        "per_radius": groups(radii, "radius"),
        "per_material": groups(mats, "material"),
        "per_split": groups(splits, "split"),
    }
    failed = [{"sample_id": ids[i], "reason": str(s.failure_reason)}
              for i, s in enumerate(scores) if not s.ok]
    samples: dict[str, Any] = {"sample_id": ids, "ok": ok.tolist()}
    for j, n in enumerate(names):
        samples[n] = [float(x) for x in values[:, j]]
    data = {
        "schema": RESULTS_SCHEMA,
        "task": task,
        "model": model,
        "protocol": t.protocol,
        "split": split,
        "subset": subset,
        "subset_definition": ({"rotations_per_material_radius": EVAL_ROTATIONS_PER_GROUP,
                               "seed": EVAL_SEED, "identity_excluded": True}
                              if subset == "eval" else {"all_rows": True}),
        "dataset": {"fingerprint": store.fingerprint, "n_materials": len(t.materials)},
        "predictions": predictions_meta,
        "n_samples": int(len(rows)),
        "n_failed": int(np.sum(~ok)),
        "failed_samples": failed,
        "tolerances": tolerances,
        "metric_info": {n: {"unit": m.unit, "better": m.better, "failure_penalty": m.penalty,
                            "paper_compatible": m.paper} for n, m in info.items()},
        "bootstrap": {"n_resamples": n_resamples, "seed": seed, "confidence": 0.95,
                      "method": "percentile"},
        "metrics": metrics,
        "samples": samples,
        "versions": _versions(),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(seconds, 3),
        **extra,
    }
    return Results(data)


def _progress(total: int, desc: str, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="sample", disable=not enabled, file=sys.stderr)


def _id_index(recipes: RecipeTable) -> dict[str, int]:
    return {sid: i for i, sid in enumerate(recipes.sample_ids())}


# ----------------------------------------------------------------------------------------
# Harness: task 1
# ----------------------------------------------------------------------------------------
_BATCH = 32


class _ForwardScorer:
    """Scores one task-1 sample against the store; caches reference summaries per
    (material, R)."""

    def __init__(self, store: EvalStore, tolerances_angstrom: tuple[float, ...]) -> None:
        self.store = store
        self.tol = tolerances_angstrom
        self.summaries: dict[tuple[int, int], ReferenceSummary] = {}

    def summary(self, row: int) -> ReferenceSummary:
        t = self.store.recipes
        key = (int(t.material_index[row]), int(t.radius_angstrom[row]))
        if key not in self.summaries:
            base = self.store.base_particle(t.materials[key[0]], key[1])
            self.summaries[key] = ReferenceSummary.from_particle(
                base.numbers, base.positions_angstrom, radius_angstrom=float(key[1]))
        return self.summaries[key]

    def score(self, row: int, numbers: np.ndarray, positions: np.ndarray) -> Scores:
        ref = self.store.particle(int(row))
        return forward_metrics(numbers, positions, ref.numbers, ref.positions_angstrom,
                               reference=self.summary(int(row)), tolerances_angstrom=self.tol)


_POOL_SCORER: _ForwardScorer | None = None


def _pool_init(scorer: _ForwardScorer) -> None:
    global _POOL_SCORER
    _POOL_SCORER = scorer


def _pool_score(task: tuple[int, int, np.ndarray, np.ndarray]) -> tuple[int, Scores]:
    k, row, numbers, positions = task
    assert _POOL_SCORER is not None
    return k, _POOL_SCORER.score(row, numbers, positions)


def _fork_pool(scorer: _ForwardScorer, workers: int) -> Any:
    """A process pool whose workers inherit ``scorer`` by fork (None for 1 worker or where
    fork is unavailable)."""
    import multiprocessing as mp

    if workers < 1:
        raise C2NPInputError(f"workers must be >= 1, got {workers}")
    if workers == 1 or "fork" not in mp.get_all_start_methods():
        return None
    return mp.get_context("fork").Pool(workers, initializer=_pool_init, initargs=(scorer,))


def evaluate_forward(store: EvalStore, predictions: str | os.PathLike[str] | Mapping[str, Particle],
                     split: str, subset: str = "eval", *, model: str = "model",
                     tolerances_angstrom: Sequence[float] = F1_TOLERANCES_ANGSTROM,
                     n_resamples: int = 1000, seed: int = 0,
                     progress: bool = False, workers: int = 1) -> Results:
    """Score task-1 predictions (a file or an in-memory ``{sample_id: Particle}``) on the
    rows of ``split`` / ``subset``. Ids of the store outside the evaluated rows are ignored
    (counted); ids unknown to the store, duplicates and unreadable files raise
    :class:`C2NPInputError`; evaluated samples without a usable prediction are failures.

    ``workers > 1`` scores samples in that many forked processes (batches of
    ``_BATCH`` samples; the file is read and validated in this process). Results do not
    depend on ``workers``."""
    t0 = time.perf_counter()
    t = store.recipes
    rows = select_rows(t, split, subset)
    if len(rows) == 0:
        raise C2NPInputError(f"split {split!r} has no samples in this store")
    wanted = {int(r): k for k, r in enumerate(rows)}
    id_index = _id_index(t)
    tol = tuple(float(x) for x in tolerances_angstrom)
    scorer = _ForwardScorer(store, tol)
    if isinstance(predictions, Mapping):
        meta: dict[str, Any] = {"path": None, "sha256": None, "format": "in-memory"}
        source: Iterable[tuple[str, str, Any, Any]] = (
            (f"entry {k}", sid, part.numbers, part.positions_angstrom)
            for k, (sid, part) in enumerate(predictions.items()))
        label = "predictions"
    else:
        p = Path(predictions)
        meta = {"path": str(p), "sha256": file_sha256(p) if p.is_file() else None,
                "format": "hdf5" if p.suffix.lower() in (".h5", ".hdf5") else "extxyz"}
        source = iter_forward_predictions(p)
        label = str(p)
    scores: list[Scores | None] = [None] * len(rows)
    seen: dict[str, str] = {}
    n_ignored = 0
    pool = _fork_pool(scorer, workers)
    batch: list[tuple[int, int, np.ndarray, np.ndarray]] = []
    bar = _progress(len(rows), "evaluate forward", progress)

    def run_batch() -> None:
        done = pool.map(_pool_score, batch) if pool is not None else [
            (k, scorer.score(row, z, x)) for k, row, z, x in batch]
        for k, sc in done:
            scores[k] = sc
        bar.update(len(batch))
        batch.clear()

    try:
        for place, sid, numbers, positions in source:
            if sid not in id_index:
                raise C2NPInputError(f"{label}: {place}: unknown sample id {sid!r} (not in the store)")
            if sid in seen:
                raise C2NPInputError(f"{label}: {place}: duplicate sample id {sid!r} (first at {seen[sid]})")
            seen[sid] = place
            row = id_index[sid]
            k = wanted.get(row)
            if k is None:
                n_ignored += 1
                continue
            batch.append((k, row, np.asarray(numbers), np.asarray(positions)))
            if len(batch) >= (_BATCH if pool is not None else 1):
                run_batch()
        if batch:
            run_batch()
        for k, row in enumerate(rows):
            if scores[k] is None:
                scores[k] = forward_failure("missing prediction", scorer.summary(int(row)),
                                            tolerances_angstrom=tol)
                bar.update(1)
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
    n_uncertified = sum(int(s.ok and not s.details.get("matched_rmsd_certified", True))
                        for s in scores if s is not None)
    meta.update({"n_entries": len(seen), "n_ignored_outside_subset": n_ignored})
    info = forward_metric_info(tol)
    return _assemble(task="forward", model=model, store=store, split=split, subset=subset,
                     rows=rows, scores=[s for s in scores if s is not None], info=info,
                     predictions_meta=meta,
                     tolerances={"f1_tolerances_angstrom": list(tol),
                                 "pair_distance_r_max_angstrom": 10.0, "pair_distance_bins": 128,
                                 "matching": "same element, distance strictly below tolerance"},
                     n_resamples=n_resamples, seed=seed,
                     extra={"matched_rmsd_uncertified": n_uncertified,
                            "headline": "f1@0.1"},
                     seconds=time.perf_counter() - t0)


# ----------------------------------------------------------------------------------------
# Harness: task 2
# ----------------------------------------------------------------------------------------
def inverse_target(cell: Any, *, symprec_angstrom: float = 1e-3) -> InverseTarget:
    """Task-2 target of a unit cell: ``c2np.cells.standardize(cell, symprec_angstrom=1e-3)``."""
    from c2np.cells import standardize

    s = standardize(cell, symprec_angstrom=symprec_angstrom)
    return InverseTarget(s.a_angstrom, s.b_angstrom, s.c_angstrom, s.alpha_deg, s.beta_deg,
                         s.gamma_deg, int(s.spacegroup))


def evaluate_inverse(store: EvalStore, predictions: str | os.PathLike[str] | Mapping[str, Any],
                     split: str, subset: str = "eval", *, model: str = "model",
                     length_tol_angstrom: float = 0.5, angle_tol_deg: float = 0.5,
                     length_rel_tol: float = 0.01, symprec_angstrom: float = 1e-3,
                     n_resamples: int = 1000, seed: int = 0, progress: bool = False) -> Results:
    """Score task-2 predictions (a CSV file, or ``{sample_id: row}`` with keys a, b, c,
    alpha, beta, gamma, spacegroup) on ``split`` / ``subset``; rules as
    :func:`evaluate_forward`."""
    t0 = time.perf_counter()
    t = store.recipes
    rows = select_rows(t, split, subset)
    if len(rows) == 0:
        raise C2NPInputError(f"split {split!r} has no samples in this store")
    id_index = _id_index(t)
    if isinstance(predictions, Mapping):
        meta: dict[str, Any] = {"path": None, "sha256": None, "format": "in-memory"}
        parsed: dict[str, tuple[np.ndarray, float]] = {}
        for sid, r in predictions.items():
            rr = r.as_row() if hasattr(r, "as_row") else r
            try:
                parsed[sid] = (np.array([float(rr[c]) for c in INVERSE_COLUMNS[1:7]]),
                               float(rr["spacegroup"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise C2NPInputError(f"predictions: entry {sid!r}: needs numeric a, b, c, alpha, "
                                     f"beta, gamma, spacegroup ({type(exc).__name__}: {exc})") from exc
        label = "predictions"
        places = {sid: f"entry {sid!r}" for sid in parsed}
    else:
        p = Path(predictions)
        raw = read_inverse_predictions(p)
        meta = {"path": str(p), "sha256": file_sha256(p), "format": "csv"}
        parsed = {sid: (r.params, r.spacegroup) for sid, r in raw.items()}
        label = str(p)
        places = {sid: f"line {r.line}" for sid, r in raw.items()}
    for sid in parsed:
        if sid not in id_index:
            raise C2NPInputError(f"{label}: {places[sid]}: unknown sample id {sid!r} (not in the store)")
    targets: dict[str, InverseTarget] = {}
    scores: list[Scores] = []
    ids = t.sample_ids()
    evaluated = set()
    with _progress(len(rows), "evaluate inverse", progress) as bar:
        for row in rows:
            mat = t.materials[int(t.material_index[row])]
            if mat not in targets:
                targets[mat] = inverse_target(store.cells[mat], symprec_angstrom=symprec_angstrom)
            sid = ids[int(row)]
            evaluated.add(sid)
            if sid not in parsed:
                scores.append(inverse_failure("missing prediction", targets[mat]))
            else:
                params, sg = parsed[sid]
                scores.append(inverse_metrics(params, sg, targets[mat],
                                              length_tol_angstrom=length_tol_angstrom,
                                              angle_tol_deg=angle_tol_deg,
                                              length_rel_tol=length_rel_tol))
            bar.update(1)
    meta.update({"n_entries": len(parsed),
                 "n_ignored_outside_subset": len(set(parsed) - evaluated)})
    return _assemble(task="inverse", model=model, store=store, split=split, subset=subset,
                     rows=rows, scores=scores, info=inverse_metric_info(), predictions_meta=meta,
                     tolerances={"joint_paper": {"length_angstrom": length_tol_angstrom,
                                                 "angle_deg": angle_tol_deg},
                                 "joint_strict": {"length_relative": length_rel_tol,
                                                  "angle_deg": angle_tol_deg},
                                 "target_symprec_angstrom": symprec_angstrom},
                     n_resamples=n_resamples, seed=seed,
                     extra={"headline": "joint_accuracy_paper",
                            "targets": {m: vars(v) for m, v in targets.items()}},
                     seconds=time.perf_counter() - t0)


def evaluate_task(task: str, store: EvalStore, predictions: str | os.PathLike[str],
                  split: str, subset: str = "eval", *, model: str = "model",
                  n_resamples: int = 1000, seed: int = 0, progress: bool = False,
                  workers: int = 1) -> Results:
    """:func:`evaluate_forward` (``task="forward"``) or :func:`evaluate_inverse`
    (``"inverse"``) with their default tolerances; ``workers`` applies to task 1 only."""
    if task == "forward":
        return evaluate_forward(store, predictions, split, subset, model=model, seed=seed,
                                n_resamples=n_resamples, progress=progress, workers=workers)
    if task == "inverse":
        return evaluate_inverse(store, predictions, split, subset, model=model, seed=seed,
                                n_resamples=n_resamples, progress=progress)
    raise C2NPInputError(f"task must be 'forward' or 'inverse', got {task!r}")


# ----------------------------------------------------------------------------------------
# Plot
# ----------------------------------------------------------------------------------------


def plot_results(data: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """PNG of a results document: headline metrics per radius with 95 % intervals (left)
    and the per-sample distribution of the main distance/error metric (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from c2np.particle_io import atomic_write

    forward = data["task"] == "forward"
    names = ["f1@0.1", "f1@0.5"] if forward else ["spacegroup_accuracy", "joint_accuracy_paper",
                                                  "joint_accuracy_strict"]
    dist_name = "matched_rmsd" if forward else "lattice_rmse_perm_invariant"
    per_r = data["metrics"]["per_radius"]
    radii = sorted(per_r, key=int)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for n in names:
        mean = np.array([per_r[r][n]["mean"] for r in radii])
        lo = np.array([per_r[r][n]["ci95"][0] for r in radii])
        hi = np.array([per_r[r][n]["ci95"][1] for r in radii])
        ax1.errorbar([int(r) for r in radii], mean, yerr=[mean - lo, hi - mean], marker="o",
                     capsize=3, label=n)
    ax1.set_xlabel("R (Å)")
    ax1.set_ylabel("failure-penalised mean, 95 % CI")
    ax1.set_ylim(-0.02, 1.02)
    ax1.legend()
    ax1.set_title(f"{data['model']} · {data['task']} · {data['split']} ({data['subset']})")
    vals = np.array(data["samples"][dist_name], dtype=float)
    ok = np.array(data["samples"]["ok"], dtype=bool)
    if ok.any():
        ax2.hist(vals[ok], bins=40, color="tab:blue", label="successes")
    ax2.set_xlabel(f"{dist_name} ({data['metric_info'][dist_name]['unit']})")
    ax2.set_ylabel("samples")
    ax2.set_title(f"{int((~ok).sum())} failed of {len(ok)} (not shown: failure value)")
    if ok.any():
        ax2.legend()
    fig.tight_layout()
    p = Path(path)
    with atomic_write(p, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120)
    plt.close(fig)
    return p
