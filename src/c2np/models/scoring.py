"""Small built-in scorers used for training diagnostics and the model benchmark when the
evaluation harness (``c2np.metrics``) is not importable. NumPy/SciPy only.

Atom F1 at a tolerance uses a maximum bipartite matching of same-element atoms closer than
the tolerance (SPEC §6); an empty prediction scores 0, never a best value.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching
from scipy.spatial import cKDTree

from c2np.particle import Particle

__all__ = ["atom_f1", "chamfer_angstrom", "lattice_errors", "count_error"]


def _matched(pred: Particle, ref: Particle, tol_angstrom: float) -> int:
    total = 0
    for z in np.intersect1d(np.unique(pred.numbers), np.unique(ref.numbers)):
        p = pred.positions_angstrom[pred.numbers == z]
        g = ref.positions_angstrom[ref.numbers == z]
        pairs = cKDTree(p).sparse_distance_matrix(cKDTree(g), tol_angstrom, output_type="coo_matrix")
        if pairs.nnz == 0:
            continue
        graph = csr_matrix((np.ones(pairs.nnz), (pairs.row, pairs.col)), shape=(len(p), len(g)))
        match = maximum_bipartite_matching(graph, perm_type="column")
        total += int(np.sum(match >= 0))
    return total


def atom_f1(pred: Particle, ref: Particle, *, tol_angstrom: float = 0.5) -> float:
    """F1 of atoms matched one-to-one (same element, distance <= tol). 0 when either is empty."""
    if pred.n_atoms == 0 or ref.n_atoms == 0:
        return 0.0
    m = _matched(pred, ref, tol_angstrom)
    if m == 0:
        return 0.0
    precision, recall = m / pred.n_atoms, m / ref.n_atoms
    return 2 * precision * recall / (precision + recall)


def chamfer_angstrom(pred: Particle, ref: Particle) -> float:
    """Mean symmetric Chamfer distance (Å), species ignored; inf for an empty prediction."""
    if pred.n_atoms == 0 or ref.n_atoms == 0:
        return float("inf")
    d1, _ = cKDTree(ref.positions_angstrom).query(pred.positions_angstrom)
    d2, _ = cKDTree(pred.positions_angstrom).query(ref.positions_angstrom)
    return float(0.5 * (d1.mean() + d2.mean()))


def count_error(pred: Particle, ref: Particle) -> float:
    """|n_pred - n_ref| / n_ref."""
    return abs(pred.n_atoms - ref.n_atoms) / max(ref.n_atoms, 1)


def lattice_errors(pred: np.ndarray, ref: np.ndarray, pred_sg: np.ndarray,
                   ref_sg: np.ndarray) -> dict[str, float]:
    """Task-2 summary: the paper's lattice RMSE over all six numbers, length RMSE (Å), angle
    RMSE (deg) and space-group accuracy. ``pred``/``ref`` are (n, 6)."""
    pred = np.asarray(pred, float).reshape(-1, 6)
    ref = np.asarray(ref, float).reshape(-1, 6)
    ok = np.all(np.isfinite(pred), axis=1)
    err = np.where(ok[:, None], pred - ref, 1e3)  # unusable predictions count as large errors
    return {
        "lattice_rmse": float(np.sqrt(np.mean(err ** 2))),
        "length_rmse_angstrom": float(np.sqrt(np.mean(err[:, :3] ** 2))),
        "angle_rmse_deg": float(np.sqrt(np.mean(err[:, 3:] ** 2))),
        "sg_accuracy": float(np.mean(np.asarray(pred_sg) == np.asarray(ref_sg))),
        "n": int(len(ref)),
    }
