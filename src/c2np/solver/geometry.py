"""Pure lattice helpers of the solver: shells, bases, cosets, reduction, periodic clustering."""

from __future__ import annotations

from itertools import combinations

import numpy as np

__all__ = [
    "best_triple",
    "cluster_sites",
    "coset_representatives",
    "greedy_basis",
    "min_image",
    "niggli",
    "whole_shells",
]


def whole_shells(r_sorted: np.ndarray, k: int, *, tol_angstrom: float = 1e-6) -> int:
    """Smallest k' >= k such that the first k' of ``r_sorted`` (ascending, Å) end a shell
    (the next value is more than ``tol_angstrom`` larger), so that a cut never splits atoms
    at equal distance (their order is the input's)."""
    k = int(min(max(k, 0), len(r_sorted)))
    while 0 < k < len(r_sorted) and r_sorted[k] - r_sorted[k - 1] <= tol_angstrom:
        k += 1
    return k


def greedy_basis(vectors: np.ndarray, *, min_sin: float) -> np.ndarray | None:
    """(3, 3) shortest three linearly independent rows of (m, 3) ``vectors`` (Å), or None.

    Independent: the sine between the first two, and of the third out of their plane,
    exceeds ``min_sin``."""
    if len(vectors) < 3:
        return None
    lengths = np.linalg.norm(vectors, axis=1)
    order = np.argsort(lengths, kind="stable")
    v = vectors[order]
    n = lengths[order]
    v1 = v[0]
    cross = np.linalg.norm(np.cross(v1, v), axis=1) / (n[0] * n)
    idx2 = np.flatnonzero(cross > min_sin)
    if len(idx2) == 0:
        return None
    v2 = v[idx2[0]]
    normal = np.cross(v1, v2)
    vol = np.abs(v @ normal) / (np.linalg.norm(normal) * n)
    idx3 = np.flatnonzero(vol > min_sin)
    if len(idx3) == 0:
        return None
    return np.array([v1, v2, v[idx3[0]]])


def best_triple(vectors: np.ndarray, *, max_vectors: int, int_tol: float,
                min_sin: float) -> np.ndarray | None:
    """(3, 3) smallest-volume triple among the ``max_vectors`` shortest rows of (m, 3)
    ``vectors`` in which every row has integer coefficients (within ``int_tol``), or None."""
    lengths = np.linalg.norm(vectors, axis=1)
    short = vectors[np.argsort(lengths, kind="stable")[:max_vectors]]
    best: tuple[float, np.ndarray] | None = None
    for i, j, k in combinations(range(len(short)), 3):
        b = short[[i, j, k]]
        det = abs(float(np.linalg.det(b)))
        if det < min_sin * float(np.prod(np.linalg.norm(b, axis=1))):
            continue
        if best is not None and det >= best[0] - 1e-9:
            continue
        coef = vectors @ np.linalg.inv(b)
        if np.max(np.abs(coef - np.round(coef))) <= int_tol:
            best = (det, b)
    return None if best is None else best[1]


def coset_representatives(vector: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """(27, 3) short vectors of the coset ``vector + Z^3 basis`` (fractional part shifted by
    -1, 0, +1 along each basis vector)."""
    coef = vector @ np.linalg.inv(basis)
    frac = coef - np.floor(coef)
    shifts = np.stack(np.meshgrid([-1, 0, 1], [-1, 0, 1], [-1, 0, 1], indexing="ij"), -1).reshape(-1, 3)
    return (frac[None, :] + shifts) @ basis


def niggli(lattice: np.ndarray) -> np.ndarray:
    """(3, 3) right-handed Niggli-reduced basis (moyopy); the input when reduction fails."""
    import moyopy

    try:
        red, _ = moyopy.niggli_reduce(np.asarray(lattice, dtype=float).tolist())
    except ValueError:
        return lattice
    return np.asarray(red, dtype=float)


def min_image(df: np.ndarray) -> np.ndarray:
    """Fractional differences (..., 3) shifted into [-0.5, 0.5]."""
    return df - np.round(df)


def cluster_sites(frac: np.ndarray, order: np.ndarray, lattice: np.ndarray,
                  radius_angstrom: float, *, max_clusters: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Leader clustering of (m, 3) fractional points with periodic distances in ``lattice``
    (Å), seeds taken in ``order``. Returns (labels (m,), centres_frac (k, 3)). The cost is
    m x k; more than ``max_clusters`` clusters raise :class:`C2NPLimitError` (limit
    ``solver_sites``) instead of going on."""
    labels = np.full(len(frac), -1, dtype=np.int64)
    centres: list[np.ndarray] = []
    r2 = radius_angstrom ** 2
    for seed in order:
        if labels[seed] >= 0:
            continue
        free = labels < 0
        idx = np.flatnonzero(free)
        d = min_image(frac[idx] - frac[seed])
        cart = d @ lattice
        near = np.einsum("ij,ij->i", cart, cart) <= r2
        centre = frac[seed] + d[near].mean(axis=0)
        d2 = min_image(frac[idx] - centre)
        cart2 = d2 @ lattice
        near2 = np.einsum("ij,ij->i", cart2, cart2) <= r2
        if not near2.any():
            near2 = near
        else:
            centre = centre + d2[near2].mean(axis=0)
        labels[idx[near2]] = len(centres)
        labels[seed] = len(centres) if labels[seed] < 0 else labels[seed]
        centres.append(centre - np.floor(centre))
        if max_clusters is not None and len(centres) > max_clusters:
            from c2np.errors import C2NPLimitError
            from c2np.limits import ENV_VAR

            raise C2NPLimitError(
                f"solver: folding the atoms into the lattice found gives more than {max_clusters:,} "
                f"clusters of one element (10 x the limit solver_sites): no crystal repeats here; raise "
                f"it with `c2np --limit solver_sites=N ...` (or {ENV_VAR}=solver_sites=N)")
    return labels, np.array(centres).reshape(-1, 3)


def nearest_distinct_site_angstrom(lattice: np.ndarray, frac: np.ndarray, numbers: np.ndarray) -> float:
    """Shortest distance (Å) between two distinct sites of one element, periodic images
    included, in the cell ((3, 3) lattice rows, (m, 3) fractional sites, (m,) numbers);
    inf when no element has two sites. O(m log m) (a k-d tree over the 27 nearest images)."""
    from scipy.spatial import cKDTree

    frac = np.asarray(frac, dtype=float).reshape(-1, 3)
    numbers = np.asarray(numbers).ravel()
    shifts = np.array([(i, j, k) for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)], dtype=float)
    best = np.inf
    for z in np.unique(numbers):
        idx = np.flatnonzero(numbers == z)
        if len(idx) < 2:
            continue
        base = (frac[idx] - np.floor(frac[idx])) @ lattice
        images = (base[None, :, :] + (shifts @ lattice)[:, None, :]).reshape(-1, 3)
        labels = np.tile(np.arange(len(idx)), len(shifts))
        tree = cKDTree(images)
        k = min(len(images), 2 + len(shifts))
        dist, nb = tree.query(base, k=k)
        other = labels[nb] != np.arange(len(idx))[:, None]
        if other.any():
            best = min(best, float(np.min(dist[other])))
        else:  # every near neighbour is an image of the site itself: look further
            dist, nb = tree.query(base, k=len(images))
            other = labels[nb] != np.arange(len(idx))[:, None]
            best = min(best, float(np.min(dist[other])))
    return best
