"""The minimum squared-distance one-to-one assignment with a certificate
(:func:`min_sq_assignment`): chooses the path (nearest neighbours, dense, sparse auction,
aligned) described in :mod:`c2np.assignment`."""

from __future__ import annotations

from typing import Any

import numpy as np

from c2np.assignment.aligned import ALIGN_ACCEPT_REL_GAP, _aligned_assignment, _alignment
from c2np.assignment.auction import _sparse_assignment
from c2np.assignment.grid import _Grid, nearest_neighbours
from c2np.assignment.result import FAR_REL_GAP, FAR_RMSD_ANGSTROM, AssignmentResult, _far_rule

__all__ = ["min_sq_assignment"]

DENSE_MAX_ENTRIES = 40_000  # n_s · n_l up to which the dense solver is used (break-even)
MAX_ROUNDS = 4  # fine stages (each may add pairs and re-solve) before a bound is reported
BIDS_PER_POINT = 100  # auction work budget per point of the larger set, all stages


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
