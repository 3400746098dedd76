"""Per-sample metrics of both tasks (contract §6-7): typed pure functions on NumPy arrays.

Task 1 (forward) compares a predicted particle P with the reference particle G, both as
species ``(n,)`` int atomic numbers and positions ``(n, 3)`` in Å in the centred frame.
Every metric is free of atom order. Quantities of G that do not depend on the rotation
(atom counts, pair-distance histogram, hull volume) are computed once per (material, R) in
a :class:`ReferenceSummary`.

Task 2 (inverse) compares predicted lattice parameters and space group with the target
(the standardized conventional cell).

A prediction that cannot be scored (missing, empty, non-finite, unknown species, invalid
lattice) is a *failure*: :func:`forward_failure` / :func:`inverse_failure` give it the
documented penalty value of every metric (never the best value); see docs/explanation/metrics.md.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

from c2np.assignment import (
    AssignmentResult,
    PointGrid,
    bounding_box,
    close_pairs,
    min_sq_assignment,
    nearest_neighbours,
)
from c2np.lattice import LATTICE_PARAMETER_NAMES, LatticeParameters

if TYPE_CHECKING:
    from scipy.spatial import cKDTree

__all__ = [
    "F1_TOLERANCES_ANGSTROM",
    "RDF_R_MAX_ANGSTROM",
    "RDF_N_BINS",
    "MetricInfo",
    "Metric",
    "HEADLINE",
    "PRIMARY",
    "f1_name",
    "ReferenceSummary",
    "Scores",
    "pair_distance_counts",
    "TooManyPairs",
    "density_normalised_histogram",
    "rdf_energy",
    "pair_distance_error",
    "hull_volume_angstrom3",
    "hull_volume_ratio",
    "composition_distance",
    "matched_sq_distances",
    "matched_atom_count",
    "maximum_matching",
    "tolerance_matching",
    "forward_metric_info",
    "forward_metrics",
    "forward_failure",
    "forward_penalties",
    "check_forward_prediction",
    "InverseTarget",
    "inverse_metric_info",
    "inverse_metrics",
    "inverse_failure",
    "inverse_penalties",
    "check_inverse_prediction",
    "permutation_invariant_lattice_rmse",
]

F1_TOLERANCES_ANGSTROM: tuple[float, ...] = (0.1, 0.5)
RDF_R_MAX_ANGSTROM: float = 10.0
RDF_N_BINS: int = 128
EDGE_SNAP_ANGSTROM: float = 1e-9
MAX_ATOMIC_NUMBER = 118


@dataclass(frozen=True)
class MetricInfo:
    """Description of one aggregated metric.

    Attributes:
        name: key in score dicts and results files.
        unit: e.g. ``"Å"``, ``"1"`` (dimensionless), ``"Å³"``.
        better: ``"lower"`` or ``"higher"``.
        penalty: how a failed sample is scored (human-readable rule).
        paper: True for the paper-compatible numbers.
    """

    name: str
    unit: str
    better: str
    penalty: str
    paper: bool = False


class Metric(str, Enum):
    """Every aggregated metric of both tasks: its name in score dicts and results files
    (the member's value), its unit, which direction is better and how a failure is scored.

    Task-1 precision / recall / F1 exist at any tolerance (:func:`f1_name`); the members are
    those at the default tolerances 0.1 Å and 0.5 Å.
    """

    def __new__(cls, name: str, task: str, unit: str, better: str, penalty: str,
                paper: bool = False) -> Metric:
        obj = str.__new__(cls, name)
        obj._value_ = name
        obj.task = task
        obj.unit = unit
        obj.better = better
        obj.penalty = penalty
        obj.paper = paper
        return obj

    task: str
    unit: str
    better: str
    penalty: str
    paper: bool

    # task 1 (forward)
    F1_0_1 = ("f1@0.1", "forward", "1", "higher", "0")
    PRECISION_0_1 = ("precision@0.1", "forward", "1", "higher", "0")
    RECALL_0_1 = ("recall@0.1", "forward", "1", "higher", "0")
    F1_0_5 = ("f1@0.5", "forward", "1", "higher", "0")
    PRECISION_0_5 = ("precision@0.5", "forward", "1", "higher", "0")
    RECALL_0_5 = ("recall@0.5", "forward", "1", "higher", "0")
    COUNT_ERROR = ("count_error", "forward", "1", "lower", "1 (the value of predicting no atoms)")
    COMPOSITION_DISTANCE = ("composition_distance", "forward", "1", "lower", "1 (its maximum)")
    HAUSDORFF = ("hausdorff", "forward", "Å", "lower", "2R (the sphere diameter)")
    CHAMFER = ("chamfer", "forward", "Å", "lower", "2R")
    MATCHED_RMSD = ("matched_rmsd", "forward", "Å", "lower", "2R")
    HULL_VOLUME_REL_ERROR = ("hull_volume_rel_error", "forward", "1", "lower",
                             "1 (the value of a zero volume)")
    HULL_VOLUME_RATIO = ("hull_volume_ratio", "forward", "1", "closer to 1", "0 (zero volume)")
    VOLUME_RATIO_SPHERE_PAPER = ("volume_ratio_sphere_paper", "forward", "1", "closer to the reference",
                                 "0 (zero volume)", True)
    PAIR_DISTANCE_ERROR = ("pair_distance_error", "forward", "1", "lower", "1 (its maximum)")
    PAPER_RMSD = ("paper_rmsd", "forward", "Å", "lower", "2R/√3", True)
    PAPER_HAUSDORFF = ("paper_hausdorff", "forward", "Å", "lower", "2R", True)
    PAPER_ABS_DELTA_HULL_VOLUME = ("paper_abs_delta_hull_volume", "forward", "Å³", "lower",
                                   "V_hull(G)", True)
    PAPER_RDF_ENERGY = ("paper_rdf_energy", "forward", "1/Å²", "lower",
                        "1/Δ² + Σ h_G² (its upper bound)", True)
    # task 2 (inverse)
    SPACEGROUP_ACCURACY = ("spacegroup_accuracy", "inverse", "1", "higher", "0")
    CRYSTAL_SYSTEM_ACCURACY = ("crystal_system_accuracy", "inverse", "1", "higher", "0")
    BRAVAIS_ACCURACY = ("bravais_accuracy", "inverse", "1", "higher", "0")
    JOINT_ACCURACY_PAPER = ("joint_accuracy_paper", "inverse", "1", "higher", "0", True)
    JOINT_ACCURACY_STRICT = ("joint_accuracy_strict", "inverse", "1", "higher", "0")
    LENGTH_RMSE = ("length_rmse", "inverse", "Å", "lower", "error of predicting 0 Å for every length")
    ANGLE_RMSE = ("angle_rmse", "inverse", "°", "lower", "max(θ, 180° − θ) per angle (its maximum)")
    LATTICE_RMSE_PAPER = ("lattice_rmse_paper", "inverse", "mixed (Å, °)", "lower",
                          "from the parameter penalties", True)
    LATTICE_RMSE_PERM_INVARIANT = ("lattice_rmse_perm_invariant", "inverse", "mixed (Å, °)", "lower",
                                   "from the parameter penalties")
    ABS_ERROR_A = ("abs_error_a", "inverse", "Å", "lower", "target length")
    ABS_ERROR_B = ("abs_error_b", "inverse", "Å", "lower", "target length")
    ABS_ERROR_C = ("abs_error_c", "inverse", "Å", "lower", "target length")
    ABS_ERROR_ALPHA = ("abs_error_alpha", "inverse", "°", "lower", "max(θ, 180° − θ)")
    ABS_ERROR_BETA = ("abs_error_beta", "inverse", "°", "lower", "max(θ, 180° − θ)")
    ABS_ERROR_GAMMA = ("abs_error_gamma", "inverse", "°", "lower", "max(θ, 180° − θ)")

    def __str__(self) -> str:
        return str(self.value)

    __hash__ = str.__hash__  # a member and its name string are the same dict key

    @property
    def higher_is_better(self) -> bool | None:
        """True / False for higher / lower is better; None for the volume ratios (closer to
        1, or to the reference's own value)."""
        return {"higher": True, "lower": False}.get(self.better)

    @property
    def perfect(self) -> float | None:
        """The value of a perfect prediction: 1 for ``higher`` and ``closer to 1``, 0 for
        ``lower``; None for ``volume_ratio_sphere_paper`` (the reference's own ratio, < 1)."""
        return {"higher": 1.0, "lower": 0.0, "closer to 1": 1.0}.get(self.better)

    @property
    def info(self) -> MetricInfo:
        """The member as a :class:`MetricInfo` record."""
        return MetricInfo(self.value, self.unit, self.better, self.penalty, self.paper)


#: The headline metrics of each task, in display order: the columns of the leaderboard and
#: of ``c2np evaluate``'s table. ``PRIMARY`` is the one number a task is ranked by.
HEADLINE: dict[str, tuple[Metric, ...]] = {
    "forward": (Metric.F1_0_1, Metric.F1_0_5, Metric.COUNT_ERROR, Metric.CHAMFER,
                Metric.MATCHED_RMSD, Metric.HAUSDORFF, Metric.HULL_VOLUME_REL_ERROR,
                Metric.PAIR_DISTANCE_ERROR),
    "inverse": (Metric.SPACEGROUP_ACCURACY, Metric.JOINT_ACCURACY_PAPER, Metric.JOINT_ACCURACY_STRICT,
                Metric.LENGTH_RMSE, Metric.ANGLE_RMSE, Metric.LATTICE_RMSE_PERM_INVARIANT),
}
PRIMARY: dict[str, Metric] = {"forward": Metric.F1_0_1, "inverse": Metric.JOINT_ACCURACY_PAPER}


def f1_name(kind: str, tol_angstrom: float) -> str:
    """Name of the ``kind`` (``f1``, ``precision``, ``recall``) metric at a tolerance (Å)."""
    return f"{kind}@{_tol_tag(tol_angstrom)}"


@dataclass(frozen=True)
class Scores:
    """Scores of one sample.

    Attributes:
        values: metric name -> value (the penalty value for a failed sample).
        ok: False when the prediction was unusable (a failure).
        failure_reason: why it failed (None when ok).
        details: extra per-sample facts (atom counts, whether the matched RMSD is certified
            optimal, ...), not averaged.
    """

    values: dict[str, float]
    ok: bool = True
    failure_reason: str | None = None
    details: dict[str, float | int | bool] = field(default_factory=dict)


# ----------------------------------------------------------------------------------------
# Pair-distance histograms
# ----------------------------------------------------------------------------------------
class TooManyPairs(ValueError):
    """More atom pairs within the histogram range than allowed (``max_pairs`` of
    :func:`pair_distance_counts`); ``pairs_counted``: the count when counting stopped."""

    def __init__(self, pairs_counted: int, max_pairs: int) -> None:
        super().__init__(f"more than {max_pairs} atom pairs within the histogram range")
        self.pairs_counted = pairs_counted
        self.max_pairs = max_pairs


def pair_distance_counts(positions_angstrom: np.ndarray, *,
                         r_max_angstrom: float = RDF_R_MAX_ANGSTROM,
                         n_bins: int = RDF_N_BINS,
                         column_angstrom: float | None = None,
                         max_pairs: int | None = None) -> np.ndarray:
    """Histogram of all unordered pair distances ``d_ij`` (i < j) on ``[0, r_max]`` Å.

    Returns ``(n_bins,)`` int64 counts; bin k holds ``k Δ <= d + ε < (k + 1) Δ`` with
    ``Δ = r_max / n_bins``, i.e. bin index ``floor((d + ε) · n_bins / r_max)``, and the last
    bin is closed (it also holds ``d + ε`` up to ``r_max + 2ε``). ``ε = 1e-9`` Å snaps lattice
    distances that lie exactly on a bin edge (e.g. 10 Å) to the same bin in every
    orientation, whatever the rounding of rotated coordinates; otherwise this is numpy's
    ``histogram(pdist(x), n_bins, (0, r_max))``.

    Exact: every distance is computed in float64 in the order ``pdist`` uses, but only pairs
    that can be within ``r_max`` are visited. Atoms are sorted into xy columns of width
    ``column_angstrom`` (default about ``r_max / 2``) and by z within a column; for each pair of
    columns close enough to hold a pair, the candidates of each atom are one run in z,
    found with two sliding pointers. The sweep is a compiled (numba) loop, built on first
    use and cached on disk; for dense clouds (about 1,000 pairs per atom or more, up to 254
    bins) it counts two pairs' bins with one increment of a table of bin pairs
    (docs/decisions/0030-matched-rmsd-certified-gap.md).

    ``max_pairs``: when more pairs than this lie within ``r_max``, :class:`TooManyPairs` is
    raised; the sweep checks its count as it goes (every 65,536 candidates) and stops once
    past the limit, so a dense cloud costs about ``max_pairs`` distances instead of ``n²/2``.
    """
    x = np.asarray(positions_angstrom, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"pair_distance_counts: positions must have shape (n, 3), got {x.shape}")
    n = len(x)
    if n < 2:
        return np.zeros(n_bins, dtype=np.int64)
    if not np.all(np.isfinite(x)):
        raise ValueError("pair_distance_counts: positions must be finite")
    r = float(r_max_angstrom)
    xs, starts, ends, nb_start, nb_end, window = _column_layout(x, r, column_angstrom)
    r2 = (r + EDGE_SNAP_ANGSTROM) ** 2
    x0, x1, x2 = (np.ascontiguousarray(xs[:, d]) for d in range(3))
    v = n_bins + 2
    hist = np.zeros((_HIST_COPIES, v), dtype=np.int64)
    paired = v <= _PACKED_MAX_VALUES and _pairs_per_atom(x, r) >= _PACKED_MIN_PAIRS_PER_ATOM
    pairs = np.zeros((2, v * v if paired else 0), dtype=np.int64)
    limit = -1 if max_pairs is None else max(int(max_pairs), 0)
    seen = int(_pair_sweep_kernel()(x0, x1, x2, starts, ends, nb_start, nb_end, window, r2, n_bins / r,
                                    EDGE_SNAP_ANGSTROM, hist, pairs,
                                    np.empty(_SWEEP_BUFFER, dtype=np.int32),
                                    np.empty(_SWEEP_BUFFER // 2, dtype=np.int32), limit))
    if seen > limit >= 0:
        raise TooManyPairs(seen, limit)
    out = hist.sum(axis=0)
    if paired:  # cell a · v + b of `pairs` holds pairs of bins (a, b): both count
        p = pairs.sum(axis=0).reshape(v, v)
        out += p.sum(axis=0) + p.sum(axis=1)
    inside = int(out[:n_bins + 1].sum())
    if inside > limit >= 0:
        raise TooManyPairs(inside, limit)
    out[n_bins - 1] += out[n_bins]  # d == r_max exactly: closed right edge
    return out[:n_bins].copy()


def _column_layout(x: np.ndarray, r: float, column_angstrom: float | None
                   ) -> tuple[np.ndarray, ...]:
    """The candidate runs of :func:`pair_distance_counts` for ``(n, 3)`` float64 positions
    (n >= 2) and range ``r`` (Å): ``(xs, starts, ends, nb_start, nb_end, window)``, the
    positions sorted by (column, z), each column's span, its neighbour columns' spans per
    offset and the largest |dz| of a pair per offset (the arguments of
    :func:`c2np._pair_kernels.pair_sweep`)."""
    n = len(x)
    lo, hi, amax = bounding_box(x)
    extent = hi - lo
    # cell assignment and z windows are rounded: widen every window by a proven margin
    margin = 64.0 * float(np.spacing(amax + float(extent.max()) + r)) + 1e-9
    reach = r + EDGE_SNAP_ANGSTROM + margin
    # default: columns of half the reach, 5 x 5 neighbour columns (measured fastest)
    h = float(column_angstrom) if column_angstrom is not None else reach / 2.0
    h = max(h, float(extent[:2].max()) / 2.0 ** 20)  # at most 2^20 columns along x and y
    m = int(math.ceil(reach / h))
    cxy = np.floor((x[:, :2] - lo[:2]) / h).astype(np.int64)
    ny = int(cxy[:, 1].max()) + 2 * m + 1
    col = cxy[:, 0] * ny + (cxy[:, 1] + m)  # offsets |dy| <= m never wrap to another row
    order = np.lexsort((x[:, 2], col))
    xs = x[order]
    ucols, starts = np.unique(col[order], return_index=True)
    ends = np.append(starts[1:], n)
    offsets = [(0, 0)] + [(dx, dy) for dx in range(0, m + 1) for dy in range(-m, m + 1)
                          if dx > 0 or dy > 0]
    gap2 = np.array([(max(abs(dx) - 1, 0) ** 2 + max(abs(dy) - 1, 0) ** 2) * h * h
                     for dx, dy in offsets])
    keep = gap2 <= reach * reach
    off = np.array(offsets, dtype=np.int64)[keep]
    window = np.sqrt(reach * reach - gap2[keep])  # largest |dz| of a pair, per offset
    target = ucols[:, None] + (off[:, 0] * ny + off[:, 1])[None, :]
    pos = np.minimum(np.searchsorted(ucols, target), len(ucols) - 1)
    found = ucols[pos] == target
    nb_start = np.where(found, starts[pos], 0)
    nb_end = np.where(found, ends[pos], 0)
    return xs, starts, ends, nb_start, nb_end, window


_HIST_COPIES = 8  # interleaved histogram copies (row t & 7): increments do not wait on each other
_SWEEP_BUFFER = 8192  # bins computed before they are counted (32 KiB of int32)
_PACKED_MIN_PAIRS_PER_ATOM = 1000.0  # estimated; below, bins are counted one by one
_PACKED_MAX_VALUES = 256  # bin values v = n_bins + 2 up to which two bins share an increment


def _pairs_per_atom(x: np.ndarray, r: float) -> float:
    """Rough number of pairs within ``r`` per atom of the ``(n, 3)`` positions: half the atoms
    times the share of a sphere of radius r in the bounding box (each side at least r).
    Only chooses how the bins are counted, never the counts."""
    lo, hi, _ = bounding_box(x)
    box = float(np.prod(np.maximum(hi - lo, r)))
    return 0.5 * len(x) * min(1.0, 4.0 / 3.0 * math.pi * r ** 3 / box)


@functools.cache
def _pair_sweep_kernel() -> Callable[..., int]:
    """The compiled sweep (:func:`c2np._pair_kernels.pair_sweep`, numba), imported on first
    use. The machine code is cached on disk (``__pycache__`` beside that file, else
    ``NUMBA_CACHE_DIR`` or the user cache); where no cache folder is writable it is
    compiled once per process instead."""
    from c2np import _pair_kernels

    return _pair_kernels.pair_sweep


def density_normalised_histogram(counts: np.ndarray, *,
                                 r_max_angstrom: float = RDF_R_MAX_ANGSTROM) -> np.ndarray:
    """``h_k = c_k / (Σ c · Δ)`` in 1/Å (numpy ``density=True``: integrates to 1 over
    ``[0, r_max]``), with ``Δ = r_max / n_bins``; all zeros when there are no pairs."""
    c = np.asarray(counts, dtype=np.float64)
    total = float(c.sum())
    if total == 0:
        return np.zeros_like(c)
    return c / (total * (r_max_angstrom / len(c)))


def rdf_energy(counts_pred: np.ndarray, counts_ref: np.ndarray, *,
               r_max_angstrom: float = RDF_R_MAX_ANGSTROM) -> float:
    """Paper's "RDF energy" ``Σ_k (h_P,k − h_G,k)²`` (1/Å²) of density-normalised histograms."""
    hp = density_normalised_histogram(counts_pred, r_max_angstrom=r_max_angstrom)
    hg = density_normalised_histogram(counts_ref, r_max_angstrom=r_max_angstrom)
    return float(np.sum((hp - hg) ** 2))


def pair_distance_error(counts_pred: np.ndarray, n_pred: int, counts_ref: np.ndarray,
                        n_ref: int) -> float:
    """Pair-distance distribution error in [0, 1]: with per-atom neighbour histograms
    ``a_k = 2 c_P,k / n_P`` and ``b_k = 2 c_G,k / n_G`` (mean neighbours per atom in shell k),
    ``Σ|a − b| / (Σa + Σb)``. 0 for identical distributions, 1 when nothing overlaps (or
    the prediction has no pairs)."""
    a = 2.0 * np.asarray(counts_pred, dtype=np.float64) / max(int(n_pred), 1)
    b = 2.0 * np.asarray(counts_ref, dtype=np.float64) / max(int(n_ref), 1)
    denom = float(a.sum() + b.sum())
    if denom == 0:
        return 0.0
    return float(np.abs(a - b).sum() / denom)


# ----------------------------------------------------------------------------------------
# Geometry helpers
# ----------------------------------------------------------------------------------------
def hull_volume_angstrom3(positions_angstrom: np.ndarray) -> float:
    """Convex-hull volume in Å³; 0 for fewer than 4 atoms or a flat (degenerate) set."""
    from scipy.spatial import ConvexHull, QhullError

    x = np.asarray(positions_angstrom, dtype=np.float64)
    if len(x) < 4:
        return 0.0
    try:
        # Qhull on the outer shell only when that provably gives the same hull: the hull
        # of the atoms with |x - c| >= rho contains the ball of radius rho around c (every
        # facet at distance >= rho), so the inner atoms lie inside it.
        centre = x.mean(axis=0)
        dist = np.linalg.norm(x - centre, axis=1)
        rho = 0.85 * float(dist.max())
        outer = dist >= rho
        if 4 <= int(outer.sum()) < len(x):
            hull = ConvexHull(x[outer])
            normals, offsets = hull.equations[:, :3], hull.equations[:, 3]
            if float(np.min(-(normals @ centre + offsets))) >= rho:
                return float(hull.volume)
    except QhullError:
        pass  # e.g. a flat outer shell: use every atom
    try:
        return float(ConvexHull(x).volume)
    except QhullError:
        return 0.0


def composition_distance(numbers_pred: np.ndarray, numbers_ref: np.ndarray) -> float:
    """Total variation ``½ Σ_e |x_P,e − x_G,e|`` of element fractions, in [0, 1]."""
    zp = np.asarray(numbers_pred, dtype=np.int64)
    zg = np.asarray(numbers_ref, dtype=np.int64)
    if len(zp) == 0 or len(zg) == 0:
        return 1.0 if len(zp) != len(zg) else 0.0
    fp = np.bincount(zp, minlength=MAX_ATOMIC_NUMBER + 1) / len(zp)
    fg = np.bincount(zg, minlength=MAX_ATOMIC_NUMBER + 1) / len(zg)
    return float(0.5 * np.abs(fp - fg).sum())


def matched_sq_distances(pred_angstrom: np.ndarray, ref_angstrom: np.ndarray, *,
                         pred_tree: object | None = None, ref_tree: object | None = None
                         ) -> AssignmentResult:
    """Minimum total squared distance of a one-to-one assignment between two point sets.

    Every atom of the smaller set is paired with a distinct atom of the larger one so that
    ``Σ |p − g|²`` (Å²) is minimal; :func:`c2np.assignment.min_sq_assignment` gives the
    value, a certified lower bound and whether they meet (``exact``). Trees are optional
    cKDTrees of the two sets.
    """
    return min_sq_assignment(pred_angstrom, ref_angstrom, tree_a=pred_tree, tree_b=ref_tree)


def _tree(points: np.ndarray) -> cKDTree:
    """A cKDTree built for speed (unbalanced, sliding-midpoint splits: half the build time
    of the default, same query results)."""
    from scipy.spatial import cKDTree

    return cKDTree(points, balanced_tree=False, compact_nodes=False)


def maximum_matching(pairs_i: np.ndarray, pairs_j: np.ndarray, n_pred: int, n_ref: int) -> np.ndarray:
    """A maximum bipartite matching on the given (pred i, ref j) edges: (n_pred,) int64, the
    reference partner of each predicted atom or -1 (scipy's Hopcroft-Karp)."""
    if len(pairs_i) == 0:
        return np.full(n_pred, -1, dtype=np.int64)
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    graph = csr_matrix((np.ones(len(pairs_i), dtype=np.int8), (pairs_i, pairs_j)),
                       shape=(n_pred, n_ref))
    return np.asarray(maximum_bipartite_matching(graph, perm_type="column"), dtype=np.int64)


def _matching_size(rows: np.ndarray, cols: np.ndarray, n_rows: int, n_cols: int) -> int:
    """Size of a maximum bipartite matching on the edges (rows[k], cols[k]), ``rows``
    non-decreasing (no duplicate edges): :func:`matched_atom_count` without building a
    COO matrix first (the size does not depend on which side is the rows)."""
    if len(rows) == 0:
        return 0
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    indptr = np.zeros(n_rows + 1, dtype=np.int32 if n_cols < 2 ** 31 else np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    graph = csr_matrix((np.ones(len(cols), dtype=np.int8), cols.astype(indptr.dtype), indptr),
                       shape=(n_rows, n_cols))
    return int(np.count_nonzero(maximum_bipartite_matching(graph, perm_type="column") >= 0))


def matched_atom_count(pairs_i: np.ndarray, pairs_j: np.ndarray, n_pred: int, n_ref: int) -> int:
    """Size of a maximum bipartite matching on the given (pred i, ref j) edges."""
    return int(np.count_nonzero(maximum_matching(pairs_i, pairs_j, n_pred, n_ref) >= 0))


def tolerance_matching(pred_numbers: np.ndarray, pred_positions_angstrom: np.ndarray,
                       ref_numbers: np.ndarray, ref_positions_angstrom: np.ndarray, *,
                       tolerance_angstrom: float) -> np.ndarray:
    """Which atoms the atom precision / recall / F1 at ``tolerance_angstrom`` count as matched.

    A maximum one-to-one matching of same-element (pred, ref) pairs closer than the
    tolerance (strictly below), element by element, as in :func:`forward_metrics`. Returns
    (n_pred,) int64: the index of each predicted atom's reference partner, or -1. The number
    of partners is that metric's matched count M.
    """
    zp = np.asarray(pred_numbers, dtype=np.int64)
    xp = np.asarray(pred_positions_angstrom, dtype=np.float64).reshape(len(zp), 3)
    zg = np.asarray(ref_numbers, dtype=np.int64)
    xg = np.asarray(ref_positions_angstrom, dtype=np.float64).reshape(len(zg), 3)
    out = np.full(len(zp), -1, dtype=np.int64)
    for z in np.intersect1d(np.unique(zp), np.unique(zg)):
        ip = np.flatnonzero(zp == z)
        ig = np.flatnonzero(zg == z)
        pairs = _tree(xp[ip]).sparse_distance_matrix(_tree(xg[ig]), float(tolerance_angstrom),
                                                     output_type="ndarray")
        sel = pairs["v"] < tolerance_angstrom
        match = maximum_matching(pairs["i"][sel], pairs["j"][sel], len(ip), len(ig))
        ok = match >= 0
        out[ip[ok]] = ig[match[ok]]
    return out


# ----------------------------------------------------------------------------------------
# Task 1
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ReferenceSummary:
    """Rotation-independent facts about a reference particle, computed once per (material, R).

    Attributes:
        radius_angstrom: sphere radius R.
        n_atoms: atom count of G.
        numbers: (n,) atomic numbers of G (any order).
        pair_counts: (n_bins,) pair-distance histogram of G on [0, r_max] Å.
        hull_volume_angstrom3: convex-hull volume of G.
        r_max_angstrom: histogram range.
    """

    radius_angstrom: float
    n_atoms: int
    numbers: np.ndarray
    pair_counts: np.ndarray
    hull_volume_angstrom3: float
    r_max_angstrom: float = RDF_R_MAX_ANGSTROM

    @classmethod
    def from_particle(cls, numbers: np.ndarray, positions_angstrom: np.ndarray, *,
                      radius_angstrom: float, r_max_angstrom: float = RDF_R_MAX_ANGSTROM,
                      n_bins: int = RDF_N_BINS) -> ReferenceSummary:
        """Compute the summary of G (any rotation of it gives the same summary)."""
        z = np.asarray(numbers, dtype=np.int64).copy()
        x = np.asarray(positions_angstrom, dtype=np.float64)
        z.setflags(write=False)
        counts = pair_distance_counts(x, r_max_angstrom=r_max_angstrom, n_bins=n_bins)
        counts.setflags(write=False)
        return cls(radius_angstrom=float(radius_angstrom), n_atoms=len(z), numbers=z,
                   pair_counts=counts, hull_volume_angstrom3=hull_volume_angstrom3(x),
                   r_max_angstrom=float(r_max_angstrom))

    @property
    def sphere_volume_angstrom3(self) -> float:
        """4/3 π R³."""
        return 4.0 / 3.0 * math.pi * self.radius_angstrom ** 3

    @property
    def volume_ratio_sphere_paper(self) -> float:
        """The paper's V_hull / (4/3 π R³) of the reference (what a perfect prediction scores
        on ``volume_ratio_sphere_paper``)."""
        return self.hull_volume_angstrom3 / self.sphere_volume_angstrom3

    @property
    def rdf_energy_bound(self) -> float:
        """Upper bound of the RDF energy of any prediction: ``1/Δ² + Σ h_G²``."""
        hg = density_normalised_histogram(self.pair_counts, r_max_angstrom=self.r_max_angstrom)
        delta = self.r_max_angstrom / len(self.pair_counts)
        return float(1.0 / delta ** 2 + np.sum(hg * hg))


def _tol_tag(tol: float) -> str:
    return f"{tol:g}"


def forward_metric_info(tolerances_angstrom: Sequence[float] = F1_TOLERANCES_ANGSTROM
                        ) -> dict[str, MetricInfo]:
    """The aggregated task-1 metrics, in display order (:class:`Metric`; precision / recall
    / F1 at each of ``tolerances_angstrom``)."""
    out: list[MetricInfo] = []
    for tol in tolerances_angstrom:
        for kind in ("f1", "precision", "recall"):
            name = f1_name(kind, tol)
            out.append(Metric(name).info if name in Metric._value2member_map_  # type: ignore[call-arg]
                       else MetricInfo(name, "1", "higher", "0"))
    out += [m.info for m in Metric if m.task == "forward" and "@" not in m.value]
    return {m.name: m for m in out}


def hull_volume_ratio(pred_volume_angstrom3: float, ref_volume_angstrom3: float) -> float:
    """V_hull(P) / V_hull(G): 1 for a perfect prediction. When G has no volume (fewer than 4
    atoms, or flat): 1 if P has none either, else 0 (the failure value)."""
    if ref_volume_angstrom3 > 0:
        return float(pred_volume_angstrom3 / ref_volume_angstrom3)
    return 1.0 if pred_volume_angstrom3 <= 0 else 0.0


def forward_penalties(reference: ReferenceSummary,
                      tolerances_angstrom: Sequence[float] = F1_TOLERANCES_ANGSTROM
                      ) -> dict[str, float]:
    """Value of every task-1 metric for a failed sample (documented, never the best)."""
    diameter = 2.0 * reference.radius_angstrom
    out: dict[str, float] = {}
    for tol in tolerances_angstrom:
        t = _tol_tag(tol)
        out[f"f1@{t}"] = 0.0
        out[f"precision@{t}"] = 0.0
        out[f"recall@{t}"] = 0.0
    out.update({
        "count_error": 1.0,
        "composition_distance": 1.0,
        "hausdorff": diameter,
        "chamfer": diameter,
        "matched_rmsd": diameter,
        "hull_volume_rel_error": 1.0,
        "hull_volume_ratio": 0.0,
        "volume_ratio_sphere_paper": 0.0,
        "pair_distance_error": 1.0,
        "paper_rmsd": diameter / math.sqrt(3.0),
        "paper_hausdorff": diameter,
        "paper_abs_delta_hull_volume": reference.hull_volume_angstrom3,
        "paper_rdf_energy": reference.rdf_energy_bound,
    })
    return out


def forward_failure(reason: str, reference: ReferenceSummary, *,
                    tolerances_angstrom: Sequence[float] = F1_TOLERANCES_ANGSTROM) -> Scores:
    """Scores of an unusable prediction: every metric at its penalty value."""
    return Scores(values=forward_penalties(reference, tolerances_angstrom), ok=False,
                  failure_reason=reason,
                  details={"n_pred": 0, "n_ref": reference.n_atoms})


#: Coordinates and lattice lengths beyond this (Å) are not a prediction of a particle or a
#: crystal: the sample fails (their squares would overflow the metrics).
MAX_COORDINATE_ANGSTROM = 1e4


def check_forward_prediction(numbers: np.ndarray | None, positions_angstrom: np.ndarray | None
                             ) -> str | None:
    """Why a predicted particle cannot be scored, or None when it can."""
    if numbers is None or positions_angstrom is None:
        return "missing prediction"
    z = np.asarray(numbers)
    x = np.asarray(positions_angstrom)
    if z.ndim != 1 or x.ndim != 2 or x.shape[1:] != (3,) or len(z) != len(x):
        return f"malformed prediction (species {z.shape}, positions {x.shape})"
    if len(z) == 0:
        return "empty prediction (0 atoms)"
    if not np.issubdtype(z.dtype, np.integer) or np.any(z < 1) or np.any(z > MAX_ATOMIC_NUMBER):
        return "unknown atomic numbers"
    if not np.all(np.isfinite(x)):
        bad = int(np.flatnonzero(~np.all(np.isfinite(x), axis=1))[0])
        return f"non-finite position (atom {bad})"
    if float(np.abs(x).max()) > MAX_COORDINATE_ANGSTROM:
        far = int(np.flatnonzero(np.any(np.abs(x) > MAX_COORDINATE_ANGSTROM, axis=1))[0])
        return f"position beyond {MAX_COORDINATE_ANGSTROM:g} Å (atom {far})"
    return None


def check_prediction_size(n_pred: int, n_ref: int) -> str | None:
    """Why a predicted particle is too large to score in bounded time (the limit
    ``prediction_atoms_factor``: that many times the reference's atoms, plus 100), or None."""
    from c2np.limits import effective

    factor = effective("prediction_atoms_factor")
    if n_pred > factor * n_ref + 100:
        return (f"{n_pred} predicted atoms exceed the limit prediction_atoms_factor ({factor:g} x "
                f"{n_ref} reference atoms + 100; raise it with `c2np --limit prediction_atoms_factor=N`)")
    return None


def forward_metrics(pred_numbers: np.ndarray | None, pred_positions_angstrom: np.ndarray | None,
                    ref_numbers: np.ndarray, ref_positions_angstrom: np.ndarray, *,
                    reference: ReferenceSummary | None = None,
                    radius_angstrom: float | None = None,
                    tolerances_angstrom: Sequence[float] = F1_TOLERANCES_ANGSTROM) -> Scores:
    """All task-1 metrics of prediction P against reference G (see docs/explanation/metrics.md).

    ``reference`` is G's rotation-independent summary (computed here when None, which
    needs ``radius_angstrom``). An unusable P returns :func:`forward_failure`.
    """
    zg = np.asarray(ref_numbers, dtype=np.int64)
    xg = np.asarray(ref_positions_angstrom, dtype=np.float64)
    if reference is None:
        if radius_angstrom is None:
            raise ValueError("forward_metrics needs reference or radius_angstrom")
        reference = ReferenceSummary.from_particle(zg, xg, radius_angstrom=radius_angstrom)
    reason = check_forward_prediction(pred_numbers, pred_positions_angstrom)
    if reason is None:
        reason = check_prediction_size(len(np.asarray(pred_numbers)), reference.n_atoms)
    if reason is not None:
        return forward_failure(reason, reference, tolerances_angstrom=tolerances_angstrom)
    zp = np.asarray(pred_numbers, dtype=np.int64)
    xp = np.asarray(pred_positions_angstrom, dtype=np.float64)
    n_p, n_g = len(zp), len(zg)
    r_max = reference.r_max_angstrom
    n_bins = len(reference.pair_counts)
    # first the pair histogram, bounded: a cloud denser than matter fails before its n²/2
    # pairs (and its degenerate pairing) are paid for
    from c2np.limits import effective

    neighbours = effective("prediction_neighbours")
    try:
        counts_p = pair_distance_counts(xp, r_max_angstrom=r_max, n_bins=n_bins,
                                        max_pairs=int(neighbours * n_p / 2.0))
    except TooManyPairs:
        reason = (f"more than {neighbours:g} neighbours per predicted atom within {r_max:g} Å on average, "
                  f"denser than any solid (limit prediction_neighbours; raise it with "
                  f"`c2np --limit prediction_neighbours=N`)")
        return forward_failure(reason, reference, tolerances_angstrom=tolerances_angstrom)

    # exact nearest neighbours both ways (all atoms): Hausdorff and Chamfer
    d_pg, _ = nearest_neighbours(xp, xg)
    d_gp, _ = nearest_neighbours(xg, xp)
    hausdorff = float(max(d_pg.max(), d_gp.max()))
    chamfer = float(0.5 * (d_pg.mean() + d_gp.mean()))

    tol_max = float(max(tolerances_angstrom))
    matched = {t: 0 for t in tolerances_angstrom}
    sq_sum = 0.0
    sq_lower = 0.0
    n_pairs = 0
    certified = True
    elements = np.intersect1d(np.unique(zp), np.unique(zg))
    for z in elements:
        ip = np.flatnonzero(zp == z)
        ig = np.flatnonzero(zg == z)
        pred_small = len(ip) <= len(ig)
        small, large = (xp[ip], xg[ig]) if pred_small else (xg[ig], xp[ip])
        # one grid of the larger side gives the close pairs (F1) and the nearest
        # neighbours (matched RMSD; searched there only when the pairing needs them)
        grid = PointGrid.build(large, min_side=tol_max * (1.0 + 1e-6))
        si, lj, dv = close_pairs(small, grid, tol_max)
        # a larger-set atom is at least its nearest distance to the other particle's atoms
        # of any element from this element's atoms: the bound of a degenerate pairing
        # without a second search (docs/decisions/0030-matched-rmsd-certified-gap.md)
        res = min_sq_assignment(small, large, large_grid=grid,
                                column_floor=d_gp[ig] if pred_small else d_pg[ip])
        sq_sum += res.sum_sq_angstrom2
        sq_lower += res.lower_bound_angstrom2
        n_pairs += res.n_pairs
        certified &= res.exact
        for t in tolerances_angstrom:
            sel = dv < t  # the pairs come sorted by the smaller side's atom: CSR directly
            matched[t] += _matching_size(si[sel], lj[sel], len(small), len(large))

    diameter = 2.0 * reference.radius_angstrom
    matched_rmsd = math.sqrt(sq_sum / n_pairs) if n_pairs else diameter
    matched_rmsd_lower = math.sqrt(max(sq_lower, 0.0) / n_pairs) if n_pairs else diameter
    paper_rmsd = math.sqrt(sq_sum / (3 * n_pairs)) if n_pairs else diameter / math.sqrt(3.0)

    v_p = hull_volume_angstrom3(xp)
    v_g = reference.hull_volume_angstrom3

    values: dict[str, float] = {}
    for t in tolerances_angstrom:
        tag = _tol_tag(t)
        m = matched[t]
        values[f"f1@{tag}"] = 2.0 * m / (n_p + n_g)
        values[f"precision@{tag}"] = m / n_p
        values[f"recall@{tag}"] = m / n_g
    values.update({
        "count_error": abs(n_p - n_g) / n_g,
        "composition_distance": composition_distance(zp, zg),
        "hausdorff": hausdorff,
        "chamfer": chamfer,
        "matched_rmsd": matched_rmsd,
        "hull_volume_rel_error": abs(v_p - v_g) / v_g if v_g > 0 else float(v_p > 0),
        "hull_volume_ratio": hull_volume_ratio(v_p, v_g),
        "volume_ratio_sphere_paper": v_p / reference.sphere_volume_angstrom3,
        "pair_distance_error": pair_distance_error(counts_p, n_p, reference.pair_counts, n_g),
        "paper_rmsd": paper_rmsd,
        "paper_hausdorff": hausdorff,
        "paper_abs_delta_hull_volume": abs(v_p - v_g),
        "paper_rdf_energy": rdf_energy(counts_p, reference.pair_counts, r_max_angstrom=r_max),
    })
    details = {"n_pred": n_p, "n_ref": n_g, "n_matched_pairs": n_pairs,
               "matched_rmsd_certified": bool(certified),
               "matched_rmsd_lower_bound": matched_rmsd_lower,
               "matched_rmsd_gap": matched_rmsd - matched_rmsd_lower,
               "hull_volume_pred_angstrom3": v_p}
    bad = [k for k, v in values.items() if not math.isfinite(v)]
    if bad:  # never a non-finite number in a results file: the sample fails instead
        return forward_failure(f"metric {bad[0]} is not finite", reference, tolerances_angstrom=tolerances_angstrom)
    return Scores(values=values, ok=True, details=details)


# ----------------------------------------------------------------------------------------
# Task 2
# ----------------------------------------------------------------------------------------
_PARAMS = LATTICE_PARAMETER_NAMES
_AXIS_PERMUTATIONS = ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))


@dataclass(frozen=True)
class InverseTarget:
    """Task-2 target of a material: the standardized conventional cell's lattice parameters
    and space group (built by :func:`c2np.tasks.inverse_target`).

    Attributes:
        parameters: a, b, c (Å), alpha, beta, gamma (degrees).
        spacegroup: international number 1..230.
    """

    parameters: LatticeParameters
    spacegroup: int

    @property
    def params(self) -> np.ndarray:
        """(6,) a, b, c, alpha, beta, gamma."""
        return self.parameters.as_array()

    def to_dict(self) -> dict[str, float | int]:
        """JSON form: ``a_angstrom`` ... ``gamma_deg`` and ``spacegroup``."""
        return {**vars(self.parameters), "spacegroup": int(self.spacegroup)}


def inverse_metric_info() -> dict[str, MetricInfo]:
    """The aggregated task-2 metrics, in display order (:class:`Metric`)."""
    return {m.value: m.info for m in Metric if m.task == "inverse"}


def permutation_invariant_lattice_rmse(pred: np.ndarray, target: np.ndarray) -> float:
    """Smallest six-number RMSE over the 6 axis permutations of the prediction, each axis
    moved together with its opposite angle (α with a, β with b, γ with c)."""
    p = np.asarray(pred, dtype=np.float64)
    t = np.asarray(target, dtype=np.float64)
    best = math.inf
    for perm in _AXIS_PERMUTATIONS:
        q = np.concatenate([p[list(perm)], p[[3 + i for i in perm]]])
        best = min(best, float(np.sqrt(np.mean((q - t) ** 2))))
    return best


def _inverse_values(pred: np.ndarray, sg_pred: int, target: InverseTarget, *,
                    length_tol_angstrom: float, angle_tol_deg: float,
                    length_rel_tol: float) -> dict[str, float]:
    from c2np.cells import bravais_lattice, crystal_system

    t = target.params
    err = np.abs(pred - t)
    sg_ok = int(sg_pred) == int(target.spacegroup)
    paper_ok = sg_ok and bool(np.all(err[:3] <= length_tol_angstrom)) and bool(
        np.all(err[3:] <= angle_tol_deg))
    strict_ok = sg_ok and bool(np.all(err[:3] <= length_rel_tol * t[:3])) and bool(
        np.all(err[3:] <= angle_tol_deg))
    values = {
        "spacegroup_accuracy": float(sg_ok),
        "crystal_system_accuracy": float(crystal_system(sg_pred) == crystal_system(target.spacegroup)),
        "bravais_accuracy": float(bravais_lattice(sg_pred) == bravais_lattice(target.spacegroup)),
        "joint_accuracy_paper": float(paper_ok),
        "joint_accuracy_strict": float(strict_ok),
        "length_rmse": float(np.sqrt(np.mean(err[:3] ** 2))),
        "angle_rmse": float(np.sqrt(np.mean(err[3:] ** 2))),
        "lattice_rmse_paper": float(np.sqrt(np.mean(err ** 2))),
        "lattice_rmse_perm_invariant": permutation_invariant_lattice_rmse(pred, t),
    }
    for i, p in enumerate(_PARAMS):
        values[f"abs_error_{p}"] = float(err[i])
    return values


def inverse_penalties(target: InverseTarget) -> dict[str, float]:
    """Value of every task-2 metric for a failed sample: accuracies 0, length errors the
    target length (predicting 0 Å), angle errors ``max(θ, 180° − θ)`` (the largest error a
    valid angle can have); the RMSEs follow from these parameter errors."""
    t = target.params
    err = np.concatenate([t[:3], np.maximum(t[3:], 180.0 - t[3:])])
    values = {
        "spacegroup_accuracy": 0.0, "crystal_system_accuracy": 0.0, "bravais_accuracy": 0.0,
        "joint_accuracy_paper": 0.0, "joint_accuracy_strict": 0.0,
        "length_rmse": float(np.sqrt(np.mean(err[:3] ** 2))),
        "angle_rmse": float(np.sqrt(np.mean(err[3:] ** 2))),
        "lattice_rmse_paper": float(np.sqrt(np.mean(err ** 2))),
        "lattice_rmse_perm_invariant": float(np.sqrt(np.mean(err ** 2))),
    }
    for i, p in enumerate(_PARAMS):
        values[f"abs_error_{p}"] = float(err[i])
    return values


def inverse_failure(reason: str, target: InverseTarget) -> Scores:
    """Scores of an unusable task-2 prediction: every metric at its penalty value."""
    return Scores(values=inverse_penalties(target), ok=False, failure_reason=reason)


def check_inverse_prediction(params: Sequence[float] | np.ndarray | None,
                             spacegroup: float | int | None) -> str | None:
    """Why a task-2 prediction cannot be scored, or None when it can."""
    if params is None or spacegroup is None:
        return "missing prediction"
    p = np.asarray(params, dtype=np.float64).reshape(-1)
    if p.shape != (6,):
        return f"expected 6 lattice parameters, got {p.shape[0]}"
    if not np.all(np.isfinite(p)):
        return "non-finite lattice parameter"
    if np.any(p[:3] <= 0):
        return "non-positive lattice length"
    if np.any(p[3:] <= 0) or np.any(p[3:] >= 180):
        return "lattice angle outside (0, 180) degrees"
    if np.any(p[:3] > MAX_COORDINATE_ANGSTROM):
        return f"lattice length beyond {MAX_COORDINATE_ANGSTROM:g} Å"
    if not LatticeParameters.from_array(p).is_valid():
        return "the angles close no cell (e.g. 170°, 170°, 170°)"
    sg = float(spacegroup)
    if not math.isfinite(sg) or sg != int(sg) or not 1 <= int(sg) <= 230:
        return f"space group {spacegroup!r} outside 1..230"
    return None


def inverse_metrics(params: Sequence[float] | np.ndarray | None,
                    spacegroup: float | int | None, target: InverseTarget, *,
                    length_tol_angstrom: float = 0.5, angle_tol_deg: float = 0.5,
                    length_rel_tol: float = 0.01) -> Scores:
    """All task-2 metrics of one prediction (a, b, c in Å, alpha, beta, gamma in degrees,
    space-group number) against ``target``; an unusable one returns :func:`inverse_failure`.

    Joint accuracy (paper): space group right and every |Δlength| <= ``length_tol_angstrom``
    and every |Δangle| <= ``angle_tol_deg``. Strict: space group right, every
    |Δlength| <= ``length_rel_tol`` · target length, every |Δangle| <= ``angle_tol_deg``.
    """
    reason = check_inverse_prediction(params, spacegroup)
    if reason is not None:
        return inverse_failure(reason, target)
    p = np.asarray(params, dtype=np.float64).reshape(6)
    values = _inverse_values(p, int(float(spacegroup)), target,  # type: ignore[arg-type]
                             length_tol_angstrom=length_tol_angstrom, angle_tol_deg=angle_tol_deg,
                             length_rel_tol=length_rel_tol)
    bad = [k for k, v in values.items() if not math.isfinite(v)]
    if bad:
        return inverse_failure(f"metric {bad[0]} is not finite", target)
    return Scores(values=values)
