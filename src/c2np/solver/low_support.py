"""Fallback of the lattice search: the third lattice vector of a small particle when only
two translations are well supported (chosen by the symmetry of the folded crystal)."""

from __future__ import annotations

import numpy as np

from c2np.solver.geometry import cluster_sites, niggli
from c2np.solver.settings import SolverSettings
from c2np.solver.symmetry import complete_sites
from c2np.solver.symmetry_finder import find_symmetry
from c2np.solver.translations import AcceptedTranslations, PartialTranslations

__all__ = ["low_support_basis"]

#: Smallest radius (Å) within which folded atoms merge into one site here.
_MIN_SITE_RADIUS_ANGSTROM = 0.01
#: Largest difference of an element's share between the folded cell and the particle.
_MAX_COMPOSITION_DEVIATION = 0.1


def low_support_basis(partial: PartialTranslations, rel: np.ndarray, nums: np.ndarray,
                      d_same_min: float, settings: SolverSettings) -> AcceptedTranslations | None:
    """Third lattice vector of a small particle when only two are well supported.

    ``partial`` holds the accepted translations of a failed exact search (images of two or
    more elements) and the looser set (images of one element suffice, e.g. a single atom
    pair). With the two shortest independent accepted vectors fixed, each of the
    ``settings.low_support_max_third`` shortest loose vectors out of their plane is tried as
    the third: the atoms ((n, 3) ``rel`` in Å, numbers ``nums``) are folded into that cell
    (only exact coincidences merge) and the basis whose folded crystal has the most symmetry
    operations (moyopy) wins: a wrong third vector shifts whole layers of atoms off their
    sites, which leaves no symmetry. A cell whose sites do not match the particle's
    composition (each element's share within 0.1) is not taken. Sites absent from the
    particle are first restored by symmetry (:func:`complete_sites`). Unless one candidate
    is the most symmetric, with more than the inversion, or all the most symmetric
    candidates generate one lattice, None is returned (no guess).
    """
    acc, acc_n, loose, loose_n = partial.vectors, partial.weights, partial.loose_vectors, partial.loose_weights
    s0 = partial.rms_angstrom
    min_sin = settings.min_basis_sin
    if len(acc) < 2 or len(loose) == 0:
        return None
    order = np.argsort(np.linalg.norm(acc, axis=1), kind="stable")
    v1 = acc[order[0]]
    cross = np.linalg.norm(np.cross(v1, acc[order]), axis=1) / (
        np.linalg.norm(v1) * np.linalg.norm(acc[order], axis=1))
    second = np.flatnonzero(cross > min_sin)
    if len(second) == 0:
        return None
    v2 = acc[order][second[0]]
    normal = np.cross(v1, v2)
    normal = normal / np.linalg.norm(normal)
    ln = np.linalg.norm(loose, axis=1)
    cands = np.flatnonzero(np.abs(loose @ normal) / ln > min_sin)
    cands = cands[np.argsort(ln[cands], kind="stable")][:settings.low_support_max_third]
    if len(cands) == 0:
        return None
    # only exact coincidences merge (this runs on particles mapped onto themselves exactly)
    r_site = min(max(_MIN_SITE_RADIUS_ANGSTROM, 3.0 * float(s0)) if np.isfinite(s0) else _MIN_SITE_RADIUS_ANGSTROM,
                 0.25 * d_same_min)
    best: tuple[int, int, float, int] | None = None
    ops_seen: list[int] = []  # per candidate, in the order of ``cands``
    for i in cands:
        red = niggli(np.array([v1, v2, loose[i]]))
        frac = rel @ np.linalg.inv(red)
        frac = frac - np.floor(frac)
        site_f: list[np.ndarray] = []
        site_z: list[int] = []
        for z in np.unique(nums):
            idx = np.flatnonzero(nums == z)
            _, cen = cluster_sites(frac[idx], np.arange(len(idx)), red, r_site)
            site_f.extend(cen)
            site_z.extend([int(z)] * len(cen))
        c_f, c_z = complete_sites(red, np.array(site_f), np.array(site_z, dtype=np.int64),
                                  tol_angstrom=r_site, max_missing=settings.max_restored_sites,
                                  min_lattice_tol_angstrom=settings.min_restore_tol_angstrom)
        found_ds = find_symmetry(red, c_f, c_z, symprec_angstrom=r_site)
        n_ops = 1 if found_ds is None else found_ds.n_operations  # None: no consistent symmetry
        # the cell must hold the particle's composition (a sub-cell of one sublattice,
        # e.g. half of a cation repeat, folds the other elements into too many sites)
        zs_all, n_z = np.unique(nums, return_counts=True)
        c_z_count = np.array([np.sum(c_z == z) for z in zs_all], dtype=float)
        if np.max(np.abs(c_z_count / c_z_count.sum() - n_z / n_z.sum())) > _MAX_COMPOSITION_DEVIATION:
            n_ops = 1
        key = (-n_ops, len(site_f), round(abs(float(np.linalg.det(red))), 3), int(i))
        ops_seen.append(n_ops)
        if best is None or key[:3] < best[:3]:
            best = key
    assert best is not None
    top = [int(j) for j, o in zip(cands, ops_seen) if o == -best[0]]
    basis_best = np.array([v1, v2, loose[best[3]]])
    coef = loose[top] @ np.linalg.inv(basis_best)
    det_top = np.abs(np.linalg.det(np.stack([np.array([v1, v2, loose[j]]) for j in top])))
    same_lattice = bool(np.all(np.abs(coef - np.round(coef)) <= 0.05)
                        and np.all(np.abs(det_top - det_top[0]) <= 1e-3 * det_top[0]))
    if -best[0] <= 2 or not same_lattice:
        return None  # no lattice stands out (ties between different lattices): no guess
    third = loose[best[3]]
    vecs = np.vstack([acc, third[None, :]])
    weights = np.concatenate([acc_n, loose_n[best[3]:best[3] + 1]])
    return AcceptedTranslations(np.array([v1, v2, third]), vecs, weights, float(s0),
                                float(partial.tolerance_angstrom), int(partial.n_prescreened),
                                int(partial.n_scored))
