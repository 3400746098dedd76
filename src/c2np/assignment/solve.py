"""Minimum squared-distance one-to-one assignment between two point sets, with a certificate.

Used by the matched RMSD (contract §6): every point of the smaller set ``S`` (``(n_s, 3)`` Å) is
paired with a distinct point of the larger set ``L`` (``(n_l, 3)`` Å) so that
``Σ |s − l|²`` (Å²) is minimal. :func:`min_sq_assignment` returns the value of a valid
pairing (an upper bound), a certified lower bound of the optimum, and whether the two
meet (then the value is the optimum); its work is bounded for any input.

Method (docs/explanation/metrics.md, "Matched RMSD: how the assignment is found"):

1. nearest neighbours of ``S`` all distinct: pairing each with its nearest is optimal;
2. small sets (``n_s · n_l <= 40,000``): dense ``scipy.optimize.linear_sum_assignment``;
3. otherwise the pairs closer than a radius (about 16 partners per point), solved by a
   compiled ε-scaling auction (:mod:`c2np._assignment_kernels`) on integer costs, and
   certified over *all* ``n_s · n_l`` pairs by LP duality: any column prices ``p`` give
   the lower bound ``LB = Σ_s min_l (|s − l|² + p_l) + (n_l − n_s) min_l p_l − Σ_l p_l``,
   each minimum found exactly by a grid search that prunes cells by their smallest price.
   Pairs outside the graph that undercut a row's best are added (after the coarse
   phases, and again after the fine ones, at most ``max_rounds`` times) until the bound
   meets the value; otherwise both are reported with their gap;
4. sets that differ in centre or size (a prediction of the wrong size or place): path 3 on
   the smaller set mapped onto the larger one's centroid and RMS radius, valued and
   certified in the original coordinates through an exact identity of the pair costs
   (:func:`_aligned_assignment`), where the sparse graph of the sets as they are would miss
   the optimal pairs.
"""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["AssignmentResult", "min_sq_assignment", "nearest_neighbours", "close_pairs", "PointGrid",
           "bounding_box"]

DENSE_MAX_ENTRIES = 40_000  # n_s · n_l up to which the dense solver is used (break-even)
GRAPH_DEGREE = 16.0  # mean partners per point in the radius graph
MIN_DEGREE = 3  # points with fewer partners get their 3 nearest
ADD_K = 8  # pairs added per undercut row (its cheapest in c + p)
MAX_ROUNDS = 4  # fine stages (each may add pairs and re-solve) before a bound is reported
BIDS_PER_POINT = 100  # auction work budget per point of the larger set, all stages
MIN_BUDGET_POINTS = 500  # ... counted as at least this many more points (small sets)
EPS0_COLD = 1.0  # first ε: this times the mean nearest-neighbour cost (Å²)
EPS_MID = 1e-3  # end of the coarse stage: this times the median edge cost ...
MEDIAN_SAMPLE = 4096  # ... of about this many edges (every k-th)
EPS_FACTOR = 8  # ε-scaling factor
GIVE_UP_SHARE = 0.25  # more undercut rows than this after a fine stage: stop refining
EXHAUSTIVE_CELL_VISITS = 400  # per point: budget of exhaustive searches in a bound
EXACT_RTOL = 1e-9  # exact: bound within this relative tolerance of the value
FAR_RMSD_ANGSTROM = 1.0  # an element whose certified RMSD bound is at least this (Å) ...
FAR_REL_GAP = 5e-2  # ... stops once its RMSD value is within this share of the bound (decision 0030)
FAR_EARLY_EPS = 1.0 / 64.0  # far from the nearest neighbours alone: first check at this ε / ε0
_SCALED_COST_MAX = 2.0 ** 50  # largest integer pair cost handed to the auction


@dataclass(frozen=True)
class AssignmentResult:
    """Outcome of :func:`min_sq_assignment`.

    Attributes:
        sum_sq_angstrom2: Σ |s − l|² of the pairing found (an upper bound of the optimum).
        lower_bound_angstrom2: a certified lower bound of the optimum (Å²).
        n_pairs: number of pairs (``min(n_s, n_l)``).
        exact: True when the bound meets the value within ``tolerance_angstrom2`` (the value
            is then the optimum up to it).
        tolerance_angstrom2: allowance of the exactness test: ``1e-9 (1 + value)`` plus
            the integer rounding of the costs handed to the auction (``(n_s + 2) · unit``,
            unit a power of 2 Å² with the largest possible pair cost · (n_l + 1) <= 2^50).
        method: the path that found the value: ``"nearest"``, ``"dense"``, ``"greedy"`` (the
            sparse path's first pairing, accepted by the far rule of
            :func:`min_sq_assignment`), ``"auction"`` or ``"aligned"`` (the sparse path in
            coordinates aligned on centre and size).
        rounds: fine stages run (0 for the first two methods).
    """

    sum_sq_angstrom2: float
    lower_bound_angstrom2: float
    n_pairs: int
    exact: bool
    tolerance_angstrom2: float = 0.0
    method: str = "nearest"
    rounds: int = 0

    @property
    def gap_angstrom2(self) -> float:
        """Value minus lower bound (Å², >= 0)."""
        return max(0.0, self.sum_sq_angstrom2 - self.lower_bound_angstrom2)


def _tree(points: np.ndarray) -> object:
    from scipy.spatial import cKDTree

    return cKDTree(points, balanced_tree=False, compact_nodes=False)


def min_sq_assignment(set_a_angstrom: np.ndarray, set_b_angstrom: np.ndarray, *,
                      tree_a: object | None = None, tree_b: object | None = None,
                      nearest: tuple[np.ndarray, np.ndarray] | None = None,
                      large_grid: _Grid | None = None,
                      column_floor: np.ndarray | None = None,
                      max_rounds: int | None = None,
                      bids_per_point: int | None = None,
                      far_rmsd_angstrom: float | None = FAR_RMSD_ANGSTROM,
                      far_rel_gap: float = FAR_REL_GAP) -> AssignmentResult:
    """Minimum-Σ|a − b|² pairing of every point of the smaller of two ``(n, 3)`` sets (Å).

    ``tree_a`` / ``tree_b``: optional cKDTrees of the sets. ``nearest``: optional
    ``(d1, j1)`` — distances and indices of the smaller set's nearest neighbours in the
    larger one (the caller may already have them); else, given ``large_grid`` (a
    :class:`PointGrid` of the larger set), they are searched in it, and only where needed: a
    strong mismatch settled in aligned coordinates needs none. ``column_floor``: optional ``(n_l,)``
    lower bounds (Å) of each larger-set point's distance to the smaller set, e.g. its
    nearest neighbour in a superset of the smaller set; they stand in for the exact
    distances in the bound of a degenerate pairing (a looser bound, no second
    nearest-neighbour search; ``None``: exact). ``max_rounds`` and ``bids_per_point``
    (defaults :data:`MAX_ROUNDS`, :data:`BIDS_PER_POINT`) bound the work of the sparse
    path; when they run out the result is not exact but ``lower_bound_angstrom2`` still
    bounds the optimum.

    ``far_rmsd_angstrom``: once the certified lower bound of the RMSD over the pairs,
    ``sqrt(bound / n_pairs)``, is at least this (Å; None: never), the sparse path stops as
    soon as ``sqrt(value / n_pairs) <= (1 + far_rel_gap) sqrt(bound / n_pairs)``: the value is
    still that of a valid pairing and the bound certified, but ``exact`` is False (a
    prediction that far off needs no exact optimum; docs/explanation/metrics.md).
    """
    a = np.asarray(set_a_angstrom, dtype=np.float64)
    b = np.asarray(set_b_angstrom, dtype=np.float64)
    if len(a) == 0 or len(b) == 0:
        return AssignmentResult(0.0, 0.0, 0, True)
    if len(a) <= len(b):
        small, large, large_tree = a, b, tree_b
    else:
        small, large, large_tree = b, a, tree_a
    ns, nl = len(small), len(large)
    floor = None if column_floor is None else np.asarray(column_floor, dtype=np.float64)
    if floor is not None and floor.shape != (nl,):
        raise ValueError(f"min_sq_assignment: column_floor must have shape ({nl},), got {floor.shape}")
    opts: dict[str, Any] = {"max_rounds": MAX_ROUNDS if max_rounds is None else max_rounds,
                            "bids_per_point": BIDS_PER_POINT if bids_per_point is None
                            else bids_per_point,
                            "far_sum": None if far_rmsd_angstrom is None
                            else ns * float(far_rmsd_angstrom) ** 2,
                            "far_rel_gap": float(far_rel_gap)}
    far_sum = opts["far_sum"]

    def settled(res: AssignmentResult, rel: float) -> bool:
        return res.exact or _far_rule(res.sum_sq_angstrom2, res.lower_bound_angstrom2, far_sum, rel)

    fit = _alignment(small, large) if ns * nl > DENSE_MAX_ENTRIES else None
    first: AssignmentResult | None = None
    if fit is not None and fit[3]:
        # a strong mismatch: the sets as they are cannot be paired well, so the pairing is
        # solved aligned first, before (and usually without) the nearest-neighbour search
        first = _aligned_assignment(small, large, *fit[:3], accept_rel_gap=ALIGN_ACCEPT_REL_GAP,
                                    **opts)
        if settled(first, ALIGN_ACCEPT_REL_GAP):
            return first
    if nearest is None:
        if large_grid is not None:
            nearest = nearest_neighbours(small, large, grid=large_grid)
        else:
            if large_tree is None:
                large_tree = _tree(large)
            nearest = large_tree.query(small, k=1)  # type: ignore[attr-defined]
    d1, j1 = nearest
    if int(np.bincount(np.asarray(j1, dtype=np.int64), minlength=nl).max()) <= 1:  # all distinct
        s = float(np.sum(d1 * d1))
        return AssignmentResult(s, s, ns, True)
    if ns * nl <= DENSE_MAX_ENTRIES:
        from scipy.optimize import linear_sum_assignment
        from scipy.spatial.distance import cdist

        cost = cdist(small, large, "sqeuclidean")
        ri, ci = linear_sum_assignment(cost)
        s = float(cost[ri, ci].sum())
        return AssignmentResult(s, s, ns, True, method="dense")

    def direct() -> AssignmentResult:
        return _sparse_assignment(small, large, np.asarray(d1, dtype=np.float64), column_floor=floor,
                                  **opts)[0]

    if fit is None:
        return direct()
    if first is not None:  # the strong mismatch's aligned result left a gap
        second = direct()
    else:  # a mild mismatch: as before, unless that leaves a gap
        first = direct()
        if settled(first, float(far_rel_gap)):
            return first
        second = _aligned_assignment(small, large, *fit[:3], **opts)
    best = first if first.sum_sq_angstrom2 <= second.sum_sq_angstrom2 else second
    lb = min(max(first.lower_bound_angstrom2, second.lower_bound_angstrom2), best.sum_sq_angstrom2)
    tol = max(first.tolerance_angstrom2, second.tolerance_angstrom2)
    return AssignmentResult(best.sum_sq_angstrom2, lb, ns, best.sum_sq_angstrom2 - lb <= tol,
                            tolerance_angstrom2=tol, method=best.method,
                            rounds=first.rounds + second.rounds)


#: the smaller set's centroid farther from the larger set's than this share of the larger of
#: the two RMS radii, or its RMS radius this far (relative) from the larger set's, and the
#: pairing is solved in aligned coordinates (a random ball's elements stay below both)
ALIGN_SHIFT_REL = 0.1
ALIGN_SCALE_REL = 0.05
#: sets that differ strongly (:data:`STRONG_SHIFT_REL`, :data:`STRONG_SCALE_REL`) are solved aligned first, and that
#: result is reported when it is exact or far off (its RMSD bound at least
#: ``far_rmsd_angstrom``) with its RMSD value within this share of its bound; a mild
#: mismatch is solved as the sets are first, and aligned only when that leaves a gap the far
#: rule does not accept (so it never reports worse than before). When the first result is
#: not accepted, the better value and bound of the two are reported
ALIGN_ACCEPT_REL_GAP = FAR_REL_GAP  # the same share
#: a strong mismatch: centroids this share of the larger RMS radius apart, or RMS radii this
#: far apart (relative)
STRONG_SHIFT_REL = 0.3
STRONG_SCALE_REL = 0.15


def _alignment(small: np.ndarray, large: np.ndarray
               ) -> tuple[float, np.ndarray, np.ndarray, bool] | None:
    """``(s, c_s, c_l, strong)``: the smaller set's RMS radius over the larger set's, the two
    centroids (Å) and whether the mismatch is strong (:data:`STRONG_SHIFT_REL`,
    :data:`STRONG_SCALE_REL`), when the sets differ by more than :data:`ALIGN_SHIFT_REL` of
    the larger RMS radius in centre or :data:`ALIGN_SCALE_REL` in size (else None: solved as
    they are)."""
    kern = _kernels()
    c_s, rms_s = kern.centroid_rms(small)
    c_l, rms_l = kern.centroid_rms(large)
    if not (rms_s > 0.0 and rms_l > 0.0 and math.isfinite(rms_s / rms_l)):
        return None
    scale = rms_s / rms_l
    shift = float(np.linalg.norm(c_s - c_l)) / max(rms_s, rms_l)
    if shift <= ALIGN_SHIFT_REL and abs(scale - 1.0) <= ALIGN_SCALE_REL:
        return None
    return scale, c_s, c_l, shift > STRONG_SHIFT_REL or abs(scale - 1.0) > STRONG_SCALE_REL


def _far_rule(value: float, bound: float, far_sum: float | None, rel: float) -> bool:
    """The far rule (Å²): the certified ``bound`` is at least ``far_sum`` (None: never) and the
    RMSD of ``value`` is within ``rel`` (relative) of the bound's."""
    return far_sum is not None and bound >= far_sum and value <= max(bound, 0.0) * (1.0 + rel) ** 2


def _sum_below(x: np.ndarray) -> float:
    """A float no larger than the exact sum of the 1-D float64 array ``x``: numpy's pairwise
    sum less a bound of its rounding error, ``(log2 n + 24) eps Σ|x|`` (blocks of 128 in 8
    accumulators, then pairwise: at most ``log2 n + 13`` roundings per term). About 25x
    cheaper than ``math.fsum`` on the bounds' arrays (thousands of terms)."""
    a = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    n = len(a)
    if n == 0:
        return 0.0
    err = (math.log2(n) + 24.0) * float(np.finfo(np.float64).eps) * float(np.abs(a).sum())
    return float(a.sum()) - err


def _sum_above(x: np.ndarray) -> float:
    """A float no smaller than the exact sum of ``x`` (:func:`_sum_below` of ``-x``, negated)."""
    return -_sum_below(-np.asarray(x, dtype=np.float64))


def _aligned_assignment(small: np.ndarray, large: np.ndarray, scale: float, c_s: np.ndarray,
                        c_l: np.ndarray, *, accept_rel_gap: float | None = None,
                        **opts: Any) -> AssignmentResult:
    """The pairing solved with the smaller set mapped onto the larger one's centre and size,
    ``z = c_l + (x − c_s) / s``, valued and certified in the original coordinates.

    With ``f(y) = (s − 1)|y − c_l|² + 2 (c_s − c_l)·(y − c_l)`` and
    ``g(x) = |x − c_l|² − |x − c_s|² / s``, every pair cost is
    ``|x − y|² = s |y − z|² + g(x) − f(y)`` (an identity). So a pairing π costs
    ``s Σ|y_π − z|² + Σg − Σ_{j∈π} f(y_j)``: with equal set sizes the two problems have the
    same optimal pairings, and a certified bound L' of the aligned problem gives the
    certified bound ``s L' + Σg − (the n_s largest f)`` of the original one (less a rounding
    allowance). The value is the pairing's cost computed directly. Where the optimum moves
    atoms far (a prediction of the wrong size or place), the aligned sets overlap and the
    sparse graph holds the optimal pairs.

    ``accept_rel_gap`` (a strong mismatch's acceptance share, or None): the aligned solve
    stops as soon as the *original* problem's value and certified bound meet the far rule
    with that share (bound at least ``far_sum``, RMSD value within the share of the bound's),
    usually at the first greedy pairing: the aligned problem's own gap, scaled by ``s``, is a
    small part of a strong mismatch's cost, so an exact aligned optimum is not needed
    (docs/decisions/0030-matched-rmsd-certified-gap.md)."""
    ns, nl = len(small), len(large)
    z = c_l + (small - c_s) / scale
    r2_l = np.sum((small - c_l) ** 2, axis=1)
    g = r2_l - np.sum((small - c_s) ** 2, axis=1) / scale
    f = (scale - 1.0) * np.sum((large - c_l) ** 2, axis=1) + 2.0 * ((large - c_l) @ (c_s - c_l))
    top = np.partition(f, nl - ns)[nl - ns:] if ns < nl else f
    sum_g, top_above = _sum_below(g), _sum_above(top)
    base_magnitude = float(np.sum(np.abs(g))) + float(np.sum(np.abs(f))) + float(np.sum(r2_l))

    def original(cols: np.ndarray, inner_lb: float, dual: tuple[np.ndarray, np.ndarray] | None
                 ) -> tuple[float, float, float]:
        """Value, certified bound and exactness tolerance (Å²) of the original problem."""
        value = _pair_sum(small, large, cols)
        magnitude = scale * abs(inner_lb) + base_magnitude
        bound = scale * inner_lb + sum_g - top_above
        if dual is not None and ns < nl:
            # the aligned dual as prices of the original problem: P = s w + f gives
            # min_l (|x − l|² + P_l) = s u + g, hence the bound
            # s Σu + Σg + (n_l − n_s) min P − ΣP (module docstring)
            w, u = dual
            price = scale * w + f
            magnitude += scale * float(np.sum(np.abs(u))) + float(np.sum(np.abs(price)))
            bound = max(bound, scale * _sum_below(u) + sum_g + (nl - ns) * float(price.min())
                        - _sum_above(price))
        bound -= 1e-10 * magnitude
        bound = min(max(bound, 0.0), value)
        return value, bound, EXACT_RTOL * (1.0 + value) + 1e-10 * magnitude

    accept: Callable[[np.ndarray, float, tuple[np.ndarray, np.ndarray] | None], bool] | None = None
    far_sum = opts.get("far_sum")
    if accept_rel_gap is not None and far_sum is not None:
        rel = float(accept_rel_gap)

        def accept(cols: np.ndarray, inner_lb: float,
                   dual: tuple[np.ndarray, np.ndarray] | None) -> bool:
            value, bound, _ = original(cols, inner_lb, dual)
            return _far_rule(value, bound, far_sum, rel)

    d1, j1 = nearest_neighbours(z, large)
    dual: tuple[np.ndarray, np.ndarray] | None
    if int(np.bincount(j1, minlength=nl).max()) <= 1:
        cols, inner_lb, rounds, dual = j1, float(np.sum(d1 * d1)), 0, (np.zeros(nl), d1 * d1)
    else:
        inner, cols, dual = _sparse_assignment(z, large, d1, accept=accept, **opts)
        inner_lb, rounds = inner.lower_bound_angstrom2, inner.rounds
    value, bound, tol = original(cols, inner_lb, dual)
    return AssignmentResult(value, bound, ns, value - bound <= tol, tolerance_angstrom2=tol,
                            method="aligned", rounds=rounds)


def _sparse_assignment(small: np.ndarray, large: np.ndarray, d1: np.ndarray, *,
                       column_floor: np.ndarray | None = None, max_rounds: int,
                       bids_per_point: int, far_sum: float | None = None,
                       far_rel_gap: float = FAR_REL_GAP,
                       accept: Callable[[np.ndarray, float, tuple[np.ndarray, np.ndarray] | None],
                                        bool] | None = None
                       ) -> tuple[AssignmentResult, np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """Path 3 of :func:`min_sq_assignment` (``n_s <= n_l``, nearest neighbours not
    distinct; ``d1`` their distances). ``far_sum``: the bound (Å²) from which a relative
    RMSD gap of ``far_rel_gap`` is accepted (None: never); ``column_floor``: see
    :func:`min_sq_assignment`. Returns the result, the ``(n_s,)`` pairing whose value it
    reports (the larger-set partner of each smaller-set point) and the dual solution of its
    bound, ``(w (n_l,), u (n_s,))`` in Å² — column prices with min 0 and each row's
    smallest ``|s − l|² + w`` over all pairs, so that the bound is ``Σu − Σw`` — or None
    when the bound is the column bound. ``accept``: optional ``(pairing, bound, dual) -> bool``
    asked after the first pairing and after every stage; True stops there (the caller's own
    far rule, e.g. the aligned path's in the original coordinates)."""
    kern = _kernels()
    ns, nl = len(small), len(large)
    grid = _Grid.build(large, per_cell=GRAPH_DEGREE / (4.0 * math.pi / 3.0))  # side = radius
    indptr, indices = grid.radius_graph(small)
    lonely = np.flatnonzero(np.diff(indptr) < MIN_DEGREE)
    if len(lonely):
        jk = _knn_indices(grid, small[lonely], min(MIN_DEGREE, nl))
        ok = jk >= 0
        indptr, indices = kern.csr_merge(indptr, indices,
                                         np.repeat(lonely, jk.shape[1])[ok.reshape(-1)], jk[ok], nl)
    graph = _Graph.build(small, large, indptr, indices, _Graph.unit_for(small, large))
    # a pairing of every row keeps the balanced problem feasible and is a first value
    fallback = kern.greedy_pairing(graph.indptr, graph.indices, graph.cost, nl)
    left = np.flatnonzero(fallback < 0)
    lb0 = float(np.sum(d1 * d1))  # no pairing costs less than every point's nearest
    nearer: np.ndarray | None = None
    if len(left):  # rows whose partners were all taken: paired among the free columns in
        # order of x (this pairing's edges join the graph, as always); where this first
        # value may be the answer (a caller's acceptance, or the far rule on the first
        # pairing) also by nearness, and the cheaper of the two is the first value
        taken = np.zeros(nl, dtype=bool)
        taken[fallback[fallback >= 0]] = True
        free = np.flatnonzero(~taken)
        maybe = accept is not None
        if not maybe and far_sum is not None and lb0 >= far_sum:
            # the far rule can accept a completion of the greedy pairing only if its paired
            # rows plus each leftover row's nearest free column stay within the share
            from scipy.spatial import cKDTree

            paired = np.flatnonzero(fallback >= 0)
            d_free = np.asarray(cKDTree(large[free]).query(small[left], k=1)[0])
            least = float(np.sum((small[paired] - large[fallback[paired]]) ** 2)) + \
                float(np.sum(d_free ** 2))
            maybe = _far_rule(least, lb0, far_sum, far_rel_gap)
        if maybe:
            nearer = fallback.copy()
            nearer[left] = _pair_leftovers(small[left], large, free)
        fallback[left] = _pair_leftovers(small[left], large, free, near=False)
    best_ub = _pair_sum(small, large, fallback)
    best_cols = fallback
    if nearer is not None:
        value = _pair_sum(small, large, nearer)
        if value < best_ub:
            best_ub, best_cols = value, nearer
    best_lb = lb0
    dual: tuple[np.ndarray, np.ndarray] | None = (np.zeros(nl), d1 * d1)

    def accepted(lb: float) -> bool:
        """The best pairing so far with the bound ``lb`` meets the far rule or the caller's
        acceptance."""
        return _far_rule(best_ub, lb, far_sum, far_rel_gap) or \
            (accept is not None and accept(best_cols, lb, dual))

    if accepted(lb0):
        # the far rule on the first pairing: far off by the nearest neighbours alone and the
        # greedy pairing already within the accepted share (e.g. a prediction with several
        # times the atoms, where few nearest neighbours collide); no auction
        tol0 = EXACT_RTOL * (1.0 + best_ub)
        return AssignmentResult(best_ub, lb0, ns, best_ub - lb0 <= tol0, tolerance_angstrom2=tol0,
                                method="greedy", rounds=0), best_cols, dual
    # the distinct columns the graph reaches: a bincount (15x cheaper than np.unique)
    if len(left) > GIVE_UP_SHARE * ns and \
            np.count_nonzero(np.bincount(graph.indices, minlength=nl)) < GIVE_UP_SHARE * ns:
        # degenerate (e.g. every point of one set on a spot): the graph reaches few
        # points of the larger set, so no auction on it can find the optimum; report the
        # pairing and the certified bounds
        column = _column_bound(small, large, column_floor)
        if column > best_lb:
            best_lb, dual = column, None
        return AssignmentResult(best_ub, min(best_lb, best_ub), ns,
                                best_ub - best_lb <= EXACT_RTOL * (1.0 + best_ub),
                                tolerance_angstrom2=EXACT_RTOL * (1.0 + best_ub),
                                method="auction", rounds=0), best_cols, dual
    graph = graph.with_edges(small, large, np.arange(ns), fallback)
    tol = EXACT_RTOL * (1.0 + best_ub)
    budget = int(bids_per_point) * (nl + MIN_BUDGET_POINTS)
    eps_final = 0.25 * EXACT_RTOL * (1.0 + lb0) / nl  # Å²: n ε below the tolerance
    # the median edge cost sets the coarse stage's end only (a schedule, not a result):
    # from every k-th edge (at most about 4,096), not a partition of them all
    costs = graph.cost_angstrom2
    med = float(np.median(costs[::max(1, len(costs) // MEDIAN_SAMPLE)]))
    eps_mid = max(EPS_MID * med, eps_final)
    eps0 = EPS0_COLD * max(float(np.mean(d1 * d1)), 64.0 * eps_mid)
    prices = np.zeros(nl, dtype=np.int64)
    assign = np.full(ns, -1, dtype=np.int64)
    rounds = 0
    far_stop = False
    # coarse stage (cold): prices settle at eps_mid, and pairs outside the graph that
    # undercut it join before the fine phases, which then mostly run once
    stages = [(eps0, eps_mid, False)] + [(eps_mid, eps_final, True)] * max_rounds
    eps_early = FAR_EARLY_EPS * eps0
    if far_sum is not None and lb0 >= far_sum and eps_early > eps_mid:
        # far off by the nearest neighbours alone: a first bound part-way through the
        # coarse stage, which usually meets the far rule already
        stages = [(eps0, eps_early, False), (eps_early, eps_mid, False)] + stages[1:]
    for eps_hi, eps_lo, final in stages:
        if budget <= 0:
            break
        assign, prices, status, used = _solve(kern, graph, prices, assign, eps_hi, eps_lo,
                                              budget)
        budget -= used
        if assign[0] >= 0:
            value = _pair_sum(small, large, assign)
            if value < best_ub:
                best_ub, best_cols = value, assign.copy()
        else:
            assign = np.full(ns, -1, dtype=np.int64)
        tol = EXACT_RTOL * (1.0 + best_ub) + (ns + 2) * graph.unit
        lb, w, u_graph, u_all = _dual_bound(small, grid, prices, graph)
        if lb > best_lb:
            best_lb, dual = lb, (w, np.minimum(u_graph, u_all))
        rounds += final
        undercut = np.flatnonzero(u_all < u_graph - tol / ns)
        if status != 0 or best_ub - best_lb <= tol or (final and len(undercut) == 0):
            break
        if accepted(best_lb):
            far_stop = True
            break  # far off: the value is within the accepted share of the bound
        if final and len(undercut) > GIVE_UP_SHARE * ns:
            break  # the graph misses most of the optimum (a degenerate prediction)
        if eps_lo > eps_mid:
            continue  # the early far check: the coarse stage goes on, edges join after it
        if len(undercut):
            few = len(undercut) * (len(grid.cell_start) - 1) <= EXHAUSTIVE_CELL_VISITS * nl
            _, jk, _ = grid.knn(small[undercut], min(ADD_K, nl), weights=w,
                                bound=u_graph[undercut], exhaustive=few)
            ok = jk >= 0
            graph = graph.with_edges(small, large,
                                     np.repeat(undercut, jk.shape[1])[ok.reshape(-1)], jk[ok])
    if best_ub - best_lb > tol and not far_stop:
        column = _column_bound(small, large, column_floor)
        if column > best_lb:
            best_lb, dual = column, None
    best_lb = min(best_lb, best_ub)
    return AssignmentResult(best_ub, best_lb, ns, best_ub - best_lb <= tol,
                            tolerance_angstrom2=tol, method="auction", rounds=rounds), best_cols, dual


#: the first pairing's leftover rows take their nearest free columns in up to this many
#: greedy passes (each over their :data:`LEFTOVER_K` nearest); what is still left, in order of x
LEFTOVER_PASSES = 3
LEFTOVER_K = 8


def _pair_leftovers(rows: np.ndarray, large: np.ndarray, free: np.ndarray, *,
                    near: bool = True) -> np.ndarray:
    """Distinct partners (indices into ``large``, from ``free``) for the ``(m, 3)`` points
    ``rows`` that the greedy pairing left without one: with ``near``, greedy passes over each
    row's nearest free columns (:data:`LEFTOVER_PASSES`, :data:`LEFTOVER_K`); what is left,
    the free columns in order of x. Only a first value (an upper bound): any choice keeps
    the bounds certified."""
    m = len(rows)
    out = np.full(m, -1, dtype=np.int64)
    todo = np.arange(m)
    avail = np.asarray(free, dtype=np.int64)
    for _ in range(LEFTOVER_PASSES if near else 0):
        if len(todo) == 0 or len(avail) == 0:
            break
        from scipy.spatial import cKDTree

        k = min(LEFTOVER_K, len(avail))
        d, j = cKDTree(large[avail]).query(rows[todo], k=k)
        d, j = np.asarray(d).reshape(len(todo), k), np.asarray(j).reshape(len(todo), k)
        order = np.argsort(d[:, 0], kind="stable")  # the closest rows choose first
        got = _kernels().greedy_pairing(np.arange(0, len(todo) * k + 1, k, dtype=np.int64),
                                  np.ascontiguousarray(j[order].reshape(-1), dtype=np.int64),
                                  np.ascontiguousarray((d[order] ** 2).reshape(-1)), len(avail))
        hit = got >= 0
        out[todo[order[hit]]] = avail[got[hit]]
        used = np.zeros(len(avail), dtype=bool)
        used[got[hit]] = True
        avail = avail[~used]
        todo = np.flatnonzero(out < 0)
    if len(todo):
        avail = avail[np.argsort(large[avail, 0], kind="stable")]
        order = todo[np.argsort(rows[todo, 0], kind="stable")]
        out[order] = avail[np.linspace(0, len(avail) - 1, len(order)).round().astype(np.int64)]
    return out


def _knn_indices(grid: _Grid, queries: np.ndarray, k: int) -> np.ndarray:
    """``(m, k)`` indices of the k nearest grid points of every query (-1 where fewer).
    Queries far outside the grid's box (when there are many) go to a k-d tree
    (``kdtree_knn``), where the grid's ring search would cross many empty cells — e.g.
    every point of a particle against a prediction collapsed onto a spot."""
    far = _far(queries, grid)
    if int(np.count_nonzero(far)) <= KDTREE_MIN_FAR_QUERIES:
        return grid.knn(queries, k)[1]
    kern = _kernels()
    idx = np.empty((len(queries), k), dtype=np.int64)
    tree = kern.kdtree_build(grid.points, KDTREE_LEAF_SIZE)
    idx[far] = kern.kdtree_knn(*tree, np.ascontiguousarray(queries[far]), k)[1]
    near = np.flatnonzero(~far)
    if len(near):
        idx[near] = grid.knn(queries[near], k)[1]
    return idx


def _column_bound(small: np.ndarray, large: np.ndarray, floor: np.ndarray | None = None) -> float:
    """Lower bound of any pairing (Å²): it uses n_s distinct points of the larger set, each
    at least its nearest-neighbour distance from the smaller set (or ``floor``, lower bounds
    of those distances, Å)."""
    m = nearest_neighbours(large, small)[0] if floor is None else floor
    return _sum_below(np.partition(m * m, len(small) - 1)[:len(small)]) * (1.0 - 1e-12)


def _solve(kern: types.ModuleType, graph: _Graph, prices: np.ndarray, init: np.ndarray,
           eps_hi: float, eps_final: float, budget: int
           ) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Auction on ``graph`` from integer ``prices`` and the assignment ``init`` (-1: none),
    ε-scaling from ``eps_hi`` down to ``eps_final`` (Å²). Returns ``(assignment, integer
    prices, status, bids)``."""
    e_fin = graph.eps_scaled(eps_final)
    e_hi = max(graph.eps_scaled(eps_hi), e_fin)
    return kern.auction(graph.indptr, graph.indices, graph.cost, graph.n_cols,
                        prices - prices.min(), init, e_hi, e_fin, EPS_FACTOR, budget)


#: points per leaf of the k-d tree of the far queries (measured: 8-16 equally fast)
KDTREE_LEAF_SIZE = 8
#: far queries from which a k-d tree is built for them (below, the grid's ring search)
KDTREE_MIN_FAR_QUERIES = 64
#: a query whose cell has no point within this many cells (Chebyshev) goes to the k-d tree
FAR_EMPTY_REACH = 1


def nearest_neighbours(queries_angstrom: np.ndarray, points_angstrom: np.ndarray, *,
                       grid: _Grid | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest neighbour among ``points`` (n >= 1, 3) of every query (m, 3), Å.

    Returns ``(distances (m,) Å, indices (m,))``; the distances are those
    ``scipy.spatial.cKDTree.query`` gives (``sqrt(dx² + dy² + dz²)`` in float64). A grid
    search (rings of cells, a cell skipped when its box is farther than the best so far);
    queries far outside the points' box (when there are many) go to a k-d tree with tight
    node boxes instead (``kdtree_nearest``), where the grid would visit too many cells.
    ``grid``: a :class:`PointGrid` of ``points``.
    """
    q = np.ascontiguousarray(queries_angstrom, dtype=np.float64).reshape(-1, 3)
    g = grid if grid is not None else _Grid.build(points_angstrom)
    dist = np.empty(len(q))
    idx = np.empty(len(q), dtype=np.int64)
    far = _far(q, g)
    if int(np.count_nonzero(far)) > max(64, len(q) // 16):
        kern = _kernels()
        tree = kern.kdtree_build(g.points, KDTREE_LEAF_SIZE)
        v, i = kern.kdtree_nearest(*tree, np.ascontiguousarray(q[far]))
        dist[far], idx[far] = np.sqrt(v), i
        near = np.flatnonzero(~far)
    else:
        near = np.arange(len(q))
    if len(near):
        # the weighted search with zero weights and no bound: the plain nearest neighbour
        v, i = _kernels().grid_min_weighted(g.sorted_points, np.zeros(len(g.sorted_points)),
                                            np.zeros(len(g.cell_start) - 1), g.order, g.cell_start,
                                            g.origin, g.h, g.dims, q[near], np.full(len(near), np.inf),
                                            g.slack)
        dist[near], idx[near] = np.sqrt(v), i
    return dist, idx


def close_pairs(queries_angstrom: np.ndarray, grid: _Grid, radius_angstrom: float
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (query i, point j) pair with ``|q_i − p_j| <= radius`` (plus a relative 1e-9):
    ``(i, j, distance Å)``, distances as :func:`nearest_neighbours` computes them. ``grid``
    must have a cell side above the radius (``PointGrid.build(..., min_side=1.000001 radius)``)."""
    q = np.ascontiguousarray(queries_angstrom, dtype=np.float64).reshape(-1, 3)
    r2 = (float(radius_angstrom) * (1.0 + 1e-9)) ** 2
    if grid.h * grid.h < r2:
        raise ValueError("close_pairs: the grid's cells are smaller than the radius")
    kern = _kernels()
    indptr, cols = kern.radius_pairs(grid.sorted_points, grid.order, grid.cell_start,
                                     grid.origin, grid.h, grid.dims, q, r2)
    w, _ = kern.edge_costs(q, grid.points, indptr, cols, 1.0, 1)
    rows = np.repeat(np.arange(len(q), dtype=np.int64), np.diff(indptr))
    return rows, cols, np.sqrt(w)


def _pair_sum(small: np.ndarray, large: np.ndarray, cols: np.ndarray) -> float:
    d = small - large[cols]
    return float(np.einsum("ij,ij->", d, d))


@dataclass(frozen=True)
class _Grid:
    """Points sorted into a uniform grid of cubic cells (see the kernels' ``grid_build``),
    with the neighbour offsets of the offset-list queries."""

    points: np.ndarray
    sorted_points: np.ndarray  # in cell order
    order: np.ndarray
    cell_start: np.ndarray
    origin: np.ndarray
    h: float
    dims: np.ndarray
    slack: float
    offsets: np.ndarray
    off_d2: np.ndarray

    @classmethod
    def build(cls, points: np.ndarray, *, per_cell: float = 2.0, reach: int = 3,
              min_side: float = 0.0) -> _Grid:
        """Cells of about ``per_cell`` points (from the occupied volume), side at least
        ``min_side`` (Å) and 1/1024 of the extent, at most 8 n + 64 cells; offsets up to
        ``reach`` cells."""
        kern = _kernels()
        x = np.ascontiguousarray(points, dtype=np.float64)
        lo, hi, amax = bounding_box(x)
        ext = hi - lo
        vol = float(np.prod(np.maximum(ext, 1e-3)))
        h = max((per_cell * vol / len(x)) ** (1.0 / 3.0), 1e-6)
        # the occupied fraction of the box: refine once from a first grid's occupancy
        dims = np.floor(ext / h).astype(np.int64) + 1
        if _cells(dims) <= 8 * len(x) + 64:
            occupied = int(kern.occupied_cells(x, lo, h, dims))
            h = max((per_cell * occupied * h ** 3 / len(x)) ** (1.0 / 3.0), 1e-6)
        h = max(h, float(ext.max()) / 1024.0, min_side)
        dims = np.floor(ext / h).astype(np.int64) + 1
        while _cells(dims) > 8 * len(x) + 64:
            h *= 1.25
            dims = np.floor(ext / h).astype(np.int64) + 1
        slack = 1e-9 + 64.0 * float(np.spacing(float(amax) + float(ext.max())))
        order, start = kern.grid_build(x, lo, h, dims)
        off, l1, gap_cells = _offsets(reach)
        d2 = np.maximum(gap_cells * h - slack, 0.0) ** 2
        o = np.lexsort((l1, d2))
        return cls(x, np.ascontiguousarray(x[order]), order, start, lo, h, dims, slack,
                   np.ascontiguousarray(off[o]), np.ascontiguousarray(d2[o]))

    @property
    def radius_graph_r2(self) -> float:
        """Squared radius (Å²) of :meth:`radius_graph`: 0.999 × the cell side, squared."""
        r = 0.999 * self.h
        return r * r

    def radius_graph(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """CSR (by query) of the pairs closer than 0.999 × the cell side: every pair whose
        ``|q − p|²`` (computed as the kernels do) is below :attr:`radius_graph_r2`."""
        return _kernels().radius_pairs(self.sorted_points, self.order, self.cell_start, self.origin,
                                       self.h, self.dims,
                                       np.ascontiguousarray(queries, dtype=np.float64),
                                       self.radius_graph_r2)

    def knn(self, queries: np.ndarray, k: int, weights: np.ndarray | None = None,
            bound: np.ndarray | None = None, *, exhaustive: bool = True
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(m, k) smallest ``|q − p|² + w`` (w >= 0) below ``bound``, their indices (-1
        where fewer qualify), and per query whether the search was complete: the offset
        list first, then (``exhaustive``) a ring search where it fell short. Without it, a
        query left incomplete has only been compared with the points within the offset
        list's reach; every other point is at least ``reach_d2`` (Å²) away."""
        kern = _kernels()
        q = np.ascontiguousarray(queries, dtype=np.float64)
        w = np.zeros(len(self.points)) if weights is None else np.ascontiguousarray(weights)
        b = np.full(len(q), np.inf) if bound is None else np.ascontiguousarray(bound, dtype=np.float64)
        sw, cw = kern.cell_weights(self.order, self.cell_start, w)
        vals, idx, complete = kern.offset_knn(self.sorted_points, self.order, self.cell_start,
                                              self.origin, self.h, self.dims, sw, cw,
                                              self.offsets, self.off_d2, q, int(k), b)
        redo = np.flatnonzero(~complete)
        if exhaustive and len(redo):
            v2, i2 = kern.grid_knn(self.points, self.order, self.cell_start, self.origin,
                                   self.h, self.dims, w, q[redo], int(k), b[redo], self.slack)
            vals[redo], idx[redo] = v2, i2
            complete[redo] = True
        return vals, idx, complete

    @property
    def reach_d2(self) -> float:
        """Smallest squared distance from a point of a cell to a cell beyond the offsets."""
        return max(float(np.abs(self.offsets).max()) * self.h - self.slack, 0.0) ** 2


def _cells(dims: np.ndarray) -> int:
    """Number of cells of a grid of ``dims`` (3,) cells (exact Python integers)."""
    return int(dims[0]) * int(dims[1]) * int(dims[2])


def bounding_box(points_angstrom: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``(lo (3,), hi (3,), largest |coordinate|)`` of ``(n, 3)`` float64 points, n >= 1, in
    one compiled pass (the values of ``x.min(axis=0)``, ``x.max(axis=0)`` and
    ``abs(x).max()``, which NumPy computes slowly for an ``(n, 3)`` array)."""
    lo, hi, amax = _kernels().bounds(np.ascontiguousarray(points_angstrom, dtype=np.float64))
    return lo, hi, float(amax)


@functools.cache
def _offsets(reach: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cell offsets within ``reach`` (n, 3), their L1 norms and the norm of their gaps in
    cells (``max(|o| - 1, 0)``; times the side: the smallest distance between the cells)."""
    r = np.arange(-reach, reach + 1)
    off = np.stack(np.meshgrid(r, r, r, indexing="ij"), axis=-1).reshape(-1, 3)
    gap = np.sqrt((np.maximum(np.abs(off) - 1, 0) ** 2).sum(axis=1).astype(np.float64))
    for a in (off, gap):
        a.setflags(write=False)
    l1 = np.abs(off).sum(axis=1)
    l1.setflags(write=False)
    return off, l1, gap


@dataclass(frozen=True)
class _Graph:
    """Candidate edges (CSR by row, no duplicates) with float and scaled integer costs."""

    indptr: np.ndarray
    indices: np.ndarray
    cost_angstrom2: np.ndarray
    cost: np.ndarray  # int64, in units of unit / (n_cols + 1)
    unit: float  # Å² per integer cost step before the (n_cols + 1) scaling
    n_cols: int

    @staticmethod
    def unit_for(small: np.ndarray, large: np.ndarray) -> float:
        """Integer cost step (a power of 2, Å²) such that any pair's cost, scaled by
        n_l + 1, stays below 2^50: from the diameter of the two sets' bounding box."""
        (lo_s, hi_s, _), (lo_l, hi_l, _) = bounding_box(small), bounding_box(large)
        lo = np.minimum(lo_s, lo_l)
        hi = np.maximum(hi_s, hi_l)
        wmax = float(np.sum((hi - lo) ** 2)) * (1.0 + 1e-9) + 1.0
        return 2.0 ** math.ceil(math.log2((len(large) + 1) * wmax / _SCALED_COST_MAX))

    @classmethod
    def build(cls, small: np.ndarray, large: np.ndarray, indptr: np.ndarray,
              indices: np.ndarray, unit: float) -> _Graph:
        w, cost = _kernels().edge_costs(small, large, indptr, indices, unit, len(large) + 1)
        return cls(indptr, indices, w, cost, unit, len(large))

    def with_edges(self, small: np.ndarray, large: np.ndarray, rows: np.ndarray,
                   cols: np.ndarray) -> _Graph:
        ip, ix = _kernels().csr_merge(self.indptr, self.indices, rows.astype(np.int64),
                                      cols.astype(np.int64), self.n_cols)
        return _Graph.build(small, large, ip, ix, self.unit)

    def eps_scaled(self, eps_angstrom2: float) -> int:
        return max(1, int(eps_angstrom2 / self.unit * (self.n_cols + 1)))

    def from_scaled(self, prices: np.ndarray) -> np.ndarray:
        return prices.astype(np.float64) * (self.unit / (self.n_cols + 1))


def _dual_bound(small: np.ndarray, grid: _Grid, prices: np.ndarray, graph: _Graph
                ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """Lower bound of the optimum over all pairs from integer column prices (Å², module
    docstring), the shifted prices ``w = p − min p`` (Å²), each row's smallest ``c + w``
    over the graph's edges, and over all pairs where that is smaller (else ``inf``).

    The graph holds every pair of the radius graph of ``grid`` (``|s − l|² <`` its
    ``radius_graph_r2``, the same float arithmetic as the search), so a pair outside it
    costs ``c + w >= r2`` (w >= 0): only rows whose graph minimum exceeds r2 can be
    undercut, and only those are searched."""
    kern = _kernels()
    w = graph.from_scaled(prices - prices.min())
    u_graph = kern.row_minima(graph.indptr, graph.cost_angstrom2 + w[graph.indices])
    v = np.full(len(small), np.inf)
    need = np.flatnonzero(u_graph > grid.radius_graph_r2)
    if len(need):
        sw, cw = kern.cell_weights(grid.order, grid.cell_start, w)
        v[need], _ = kern.grid_min_weighted(grid.sorted_points, sw, cw, grid.order,
                                            grid.cell_start, grid.origin, grid.h, grid.dims,
                                            np.ascontiguousarray(small[need]), u_graph[need],
                                            grid.slack)  # exact: every pair below u_graph
    u = np.minimum(u_graph, v)
    return _bound_from_duals(u, w), w, u_graph, v


def _bound_from_duals(u: np.ndarray, w: np.ndarray) -> float:
    """The certified ``Σu − Σw`` (Å²) of row minima ``u`` and shifted prices ``w >= 0``,
    rounded down (each sum bounded by :func:`_sum_below` / :func:`_sum_above`, less 8 eps of
    the magnitudes for the subtraction)."""
    lb = _sum_below(u) - _sum_above(w)
    return lb - 8.0 * float(np.finfo(np.float64).eps) * (float(np.abs(u).sum()) + float(w.sum()))


def _far(queries: np.ndarray, grid: _Grid) -> np.ndarray:
    """(m,) True for the ``(m, 3)`` queries a ring search of ``grid`` serves badly: outside its
    box widened by one cell, or with no point within :data:`FAR_EMPTY_REACH` cells of their
    cell (e.g. a particle's atoms beyond a prediction of the wrong size, or in the empty
    corners of a ball's box); they go to a k-d tree instead. Routing only: both are exact."""
    return _kernels().far_queries(np.ascontiguousarray(queries, dtype=np.float64), grid.cell_start,
                                  grid.origin, grid.h, grid.dims, FAR_EMPTY_REACH)


PointGrid = _Grid  # public name: points in a uniform grid of cells (nearest_neighbours, close_pairs)


@functools.cache
def _kernels() -> types.ModuleType:
    """The compiled kernels (:mod:`c2np._assignment_kernels`, numba), imported on first use."""
    from c2np import _assignment_kernels

    return _assignment_kernels
