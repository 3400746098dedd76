"""Atom matchings of task 1: the minimum squared-distance assignment of the matched RMSD
and the maximum same-element matchings within a tolerance of precision / recall / F1."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from c2np.assignment import AssignmentResult, min_sq_assignment

if TYPE_CHECKING:
    from scipy.spatial import cKDTree

__all__ = [
    "matched_sq_distances",
    "maximum_matching",
    "matched_atom_count",
    "tolerance_matching",
]


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
