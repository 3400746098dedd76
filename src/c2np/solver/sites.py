"""Step 6 of the solver: sites. Atoms are folded into the cell, clustered per element, and the
lattice and the site offsets are refined jointly by linear least squares."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from c2np import limits
from c2np.errors import C2NPNoAnswerError
from c2np.solver.geometry import cluster_sites

__all__ = ["STRAY_MIN_MEDIAN_COUNT", "STRAY_SITE_FRACTION", "SiteFit", "fit_sites"]

#: In a particle whose sites repeat at least ``STRAY_MIN_MEDIAN_COUNT`` times (median), a
#: cluster with fewer than ``max(2, STRAY_SITE_FRACTION * median)`` atoms is a stray atom.
STRAY_SITE_FRACTION = 0.1
STRAY_MIN_MEDIAN_COUNT = 20.0


@dataclass(frozen=True, eq=False)
class SiteFit:
    """The reconstructed primitive cell.

    Attributes:
        lattice_angstrom: (3, 3) refined lattice rows in the particle's frame (Å).
        frac: (s, 3) fractional site positions in [0, 1).
        numbers: (s,) atomic number of each site.
        counts: (s,) atoms of the particle on each site.
        explained_fraction: atoms within the cluster radius of a site.
        rms_angstrom: rms residual of the joint fit (Å).
        cluster_radius_angstrom: radius of the site clustering (Å).
        sigma_angstrom: per-component position noise from the translations (Å).
        n_stray_clusters: clusters dropped as stray atoms.
    """

    lattice_angstrom: np.ndarray
    frac: np.ndarray
    numbers: np.ndarray
    counts: np.ndarray
    explained_fraction: float
    rms_angstrom: float
    cluster_radius_angstrom: float
    sigma_angstrom: float
    n_stray_clusters: int

    @property
    def n_sites(self) -> int:
        """Sites per primitive cell."""
        return len(self.numbers)


def fit_sites(rel: np.ndarray, nums: np.ndarray, by_centre: np.ndarray, elements: np.ndarray,
              origin: np.ndarray, lattice: np.ndarray, *, translation_rms_angstrom: float,
              d_same_min_angstrom: float) -> SiteFit:
    """Fold (n, 3) positions ``rel`` (Å, about the centroid; atomic numbers ``nums``, atoms
    ordered by distance ``by_centre``) into ``lattice`` from ``origin`` (3,), cluster each of
    ``elements`` into sites, and refine lattice and sites together (two passes: the
    clustering's assignment, then, if an atom moved off, every atom's nearest site).
    Raises C2NPInputError when nothing repeats or too few atoms sit on sites."""
    n = len(nums)
    zs = elements
    s0 = translation_rms_angstrom
    sigma = s0 / np.sqrt(6.0) if np.isfinite(s0) else 0.1  # per-component position noise (Å)
    r_cluster = float(min(0.4 * d_same_min_angstrom, max(0.12, 5.0 * sigma + 0.08)))
    inv = np.linalg.inv(lattice)
    frac = (rel - origin) @ inv
    frac_w = frac - np.floor(frac)
    labels = np.full(n, -1, dtype=np.int64)
    site_frac: list[np.ndarray] = []
    site_z: list[int] = []
    rank = np.empty(n, dtype=np.int64)
    rank[by_centre] = np.arange(n)
    max_clusters = int(10 * limits.effective("solver_sites"))  # strays are dropped after clustering
    for z in zs:
        idx = np.flatnonzero(nums == z)
        lab, cen = cluster_sites(frac_w[idx], np.argsort(rank[idx], kind="stable"), lattice, r_cluster,
                                 max_clusters=max_clusters)
        labels[idx] = lab + len(site_frac)
        site_frac.extend(cen)
        site_z.extend([int(z)] * len(cen))
    site_frac_a = np.array(site_frac)
    site_z_a = np.array(site_z, dtype=np.int64)
    site_count = np.bincount(labels, minlength=len(site_frac_a))
    typical = float(np.median(site_count[site_count >= 2])) if np.any(site_count >= 2) else 1.0
    if typical < 2:
        raise C2NPNoAnswerError("solver input: no periodicity found (no site repeats in the particle)")
    # every atom is evidence (a site seen once in a small particle is still a site), but in a
    # particle where sites repeat many times a tiny cluster is a stray atom (noise tail, defect)
    median_count = float(np.median(site_count))
    keep_site = site_count >= (max(2.0, STRAY_SITE_FRACTION * median_count)
                               if median_count >= STRAY_MIN_MEDIAN_COUNT else 1.0)

    def assign(lat: np.ndarray, sites: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Nearest kept site of the same element for every atom: (site, cell index, dist)."""
        f = (rel - origin) @ np.linalg.inv(lat)
        best_site = np.full(n, -1, dtype=np.int64)
        best_d = np.full(n, np.inf)
        best_cell = np.zeros((n, 3))
        for z in zs:
            idx = np.flatnonzero(nums == z)
            sidx = np.flatnonzero((site_z_a == z) & keep_site)
            if len(sidx) == 0:
                continue
            diff = f[idx][:, None, :] - sites[sidx][None, :, :]
            cell_n = np.round(diff)
            cart = (diff - cell_n) @ lat
            d = np.linalg.norm(cart, axis=2)
            j = np.argmin(d, axis=1)
            best_site[idx] = sidx[j]
            best_d[idx] = d[np.arange(len(idx)), j]
            best_cell[idx] = cell_n[np.arange(len(idx)), j]
        return best_site, best_cell, best_d

    used = np.flatnonzero(keep_site)
    col = np.full(len(site_frac_a), -1, dtype=np.int64)
    col[used] = np.arange(len(used))

    def refine(s_idx: np.ndarray, cell_n: np.ndarray, ok: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, float]:
        """Joint linear least squares x_i - origin = c_site + n_i . L over atoms ``ok``."""
        m = int(ok.sum())
        if m < len(used) + 3:
            raise C2NPNoAnswerError("solver input: no lattice found (too few atoms on sites)")
        k = col[s_idx[ok]]
        nn = cell_n[ok]
        target = rel[ok] - origin
        # normal equations, site offsets eliminated (Schur complement): 3x3 solve for L
        cnt = np.bincount(k, minlength=len(used)).astype(float)
        if np.any(cnt == 0):
            cnt = np.maximum(cnt, 1.0)
        s_n = np.column_stack([np.bincount(k, weights=nn[:, j], minlength=len(used)) for j in range(3)])
        s_x = np.column_stack([np.bincount(k, weights=target[:, j], minlength=len(used))
                               for j in range(3)])
        lhs = nn.T @ nn - (s_n / cnt[:, None]).T @ s_n
        rhs = nn.T @ target - (s_n / cnt[:, None]).T @ s_x
        if abs(np.linalg.det(lhs)) < 1e-9:
            raise C2NPNoAnswerError("solver input: no lattice found (atoms span too few cells)")
        lat_new = np.linalg.solve(lhs, rhs)
        offs = (s_x - s_n @ lat_new) / cnt[:, None]
        resid = target - offs[k] - nn @ lat_new
        rms_ = float(np.sqrt(np.mean(np.einsum("ij,ij->i", resid, resid))))
        return lat_new, offs, rms_

    # first pass: the clustering's own assignment
    diff = frac - site_frac_a[labels]
    cell0 = np.round(diff)
    cart0 = (diff - cell0) @ lattice
    ok0 = keep_site[labels] & (np.einsum("ij,ij->i", cart0, cart0) <= r_cluster ** 2)
    site_pos = site_frac_a.copy()
    new_lat, offsets, rms = refine(labels, cell0, ok0)
    if abs(np.linalg.det(new_lat)) > 1e-3:
        lattice = new_lat
        site_pos[used] = offsets @ np.linalg.inv(lattice)
    # second pass: with the refined lattice, atoms keep their site when they sit on it;
    # otherwise every atom is reassigned to its nearest site and the fit is redone
    diff1 = (rel - origin) @ np.linalg.inv(lattice) - site_pos[labels]
    cell1 = np.round(diff1)
    cart1 = (diff1 - cell1) @ lattice
    d1 = np.sqrt(np.einsum("ij,ij->i", cart1, cart1))
    if bool(np.all(d1 <= 0.5 * r_cluster)):
        s_idx, cell_n, dist = labels, cell1, d1
    else:
        s_idx, cell_n, dist = assign(lattice, site_pos)
    on_site = (s_idx >= 0) & (dist <= r_cluster)
    new_lat, offsets, rms = refine(s_idx, cell_n, on_site)
    if abs(np.linalg.det(new_lat)) > 1e-3:
        lattice = new_lat
        site_pos[used] = offsets @ np.linalg.inv(lattice)
    explained = float(on_site.mean())
    counts_used = np.bincount(s_idx[on_site], minlength=len(site_pos))[used]
    prim_frac = site_pos[used] - np.floor(site_pos[used])
    prim_z = site_z_a[used]
    return SiteFit(lattice, prim_frac, prim_z, counts_used, explained, float(rms), r_cluster,
                   float(sigma), int(np.sum(~keep_site)))
