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
        n_antisite_atoms: atoms of the minority species of a mixed site (antisites).
        robust_rms_angstrom: rms of the joint fit estimated from the median residual (Å;
            a relaxed surface shell, a minority of the atoms, does not raise it).
        atoms_per_slot: atoms on sites per distinct (site, cell) they occupy (1 when every
            atom has a place of its own; more when the cell is too small for the particle).
        lattice_spread_angstrom: rms difference of the octants' own lattices from the
            lattice (Å per vector; :func:`local_lattice_spread`).
        degree_of_order: long-range order in [0, 1], ``1 - f / (1 - sum_z x_z^2)`` with ``f``
            the share of antisite atoms and ``x_z`` the composition (1: every atom on a site
            of its species; 0: as many antisites as random occupancy gives; 1 for one element).
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
    n_antisite_atoms: int = 0
    degree_of_order: float = 1.0
    lattice_spread_angstrom: float = 0.0
    atoms_per_slot: float = 1.0
    robust_rms_angstrom: float = 0.0

    @property
    def n_sites(self) -> int:
        """Sites per primitive cell."""
        return len(self.numbers)


#: rms / median of the residual distance of a 3-D Gaussian (sqrt(3) / 1.5382).
ROBUST_RMS_PER_MEDIAN = 1.1260
#: Atoms a region needs for its own lattice in :func:`local_lattice_spread`.
MIN_REGION_ATOMS = 12


def local_lattice_spread(rel: np.ndarray, lattice_part: np.ndarray, cells: np.ndarray,
                         lattice: np.ndarray) -> float:
    """How much the lattice varies across the particle (Å, rms per lattice vector).

    The atoms ((m, 3) positions ``rel`` about the centroid) are split into the eight octants
    of the lattice's own frame (signs of their fractional coordinates, so the split turns with
    the particle); in each octant with at least ``MIN_REGION_ATOMS`` atoms ``lattice_part``
    ((m, 3): position minus site offset) is fitted as ``t + cells . L_j`` ((m, 3) integer
    ``cells``). Returns the rms of ``|L_j - lattice|`` over octants and vectors (0 when fewer
    than two octants can be fitted). Thermal motion and surface relaxation strain a real
    particle's lattice by this much; the symmetry tolerance must not be tighter."""
    octant = ((rel @ np.linalg.inv(lattice)) > 0) @ np.array([1, 2, 4])
    design = np.column_stack([np.ones(len(rel)), cells])
    dev: list[float] = []
    for j in range(8):
        sel = octant == j
        if int(sel.sum()) < MIN_REGION_ATOMS:
            continue
        d = design[sel]
        gram = d.T @ d
        # cells spanning fewer than three directions fix no lattice (well-conditioned only)
        if np.linalg.cond(gram) > 1e8:
            continue
        sol = np.linalg.solve(gram, d.T @ lattice_part[sel])
        dev.append(float(np.mean(np.sum((sol[1:] - lattice) ** 2, axis=1))))
    return float(np.sqrt(np.mean(dev))) if len(dev) >= 2 else 0.0


def _kept_clusters(frac: np.ndarray, z: np.ndarray, count: np.ndarray, lattice: np.ndarray,
                   r_cluster: float) -> tuple[np.ndarray, np.ndarray]:
    """Which clusters are sites: (keep (k,) bool, minority (k,) bool).

    Every atom is evidence (a site seen once in a small particle is still a site), but in a
    particle where the typical atom sits on a site seen at least ``STRAY_MIN_MEDIAN_COUNT``
    times (the atom-weighted median count), a cluster under ``STRAY_SITE_FRACTION`` of that is
    a stray (a thermal or surface tail split off a site, a defect). A cluster within the
    cluster radius of a larger cluster of another element is the minority species of a mixed
    site (antisite atoms): the site keeps its majority element."""
    order = np.argsort(count, kind="stable")
    cum = np.cumsum(count[order])
    typical = float(count[order][np.searchsorted(cum, 0.5 * cum[-1])]) if len(count) else 0.0
    keep = count >= (max(2.0, STRAY_SITE_FRACTION * typical) if typical >= STRAY_MIN_MEDIAN_COUNT else 1.0)
    minority = np.zeros(len(count), dtype=bool)
    if len(np.unique(z)) > 1:
        d = frac[:, None, :] - frac[None, :, :]
        cart = (d - np.round(d)) @ lattice
        near = np.einsum("ijk,ijk->ij", cart, cart) <= r_cluster ** 2
        near &= z[:, None] != z[None, :]
        minority = np.any(near & (count[None, :] > count[:, None]), axis=1)
        keep &= ~minority
    return keep, minority


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
    keep_site, minority = _kept_clusters(site_frac_a, site_z_a, site_count, lattice, r_cluster)

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

    def refine(s_idx: np.ndarray, cell_n: np.ndarray, ok: np.ndarray, *, final: bool = False
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
        if not final:
            return lat_new, offs, rms_
        spread[0] = local_lattice_spread(rel[ok], target - offs[k], nn, lat_new)
        # median residual of a 3-D Gaussian is 1.538 sigma, its rms 1.732 sigma
        spread[1] = ROBUST_RMS_PER_MEDIAN * float(np.median(np.sqrt(np.einsum("ij,ij->i", resid, resid))))
        return lat_new, offs, rms_

    spread = [0.0, 0.0]

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
    # an atom on a dropped cluster (stray, or the minority species of a mixed site) is on no site
    on_site = (s_idx >= 0) & keep_site[np.maximum(s_idx, 0)] & (dist <= r_cluster)
    new_lat, offsets, rms = refine(s_idx, cell_n, on_site, final=True)
    if abs(np.linalg.det(new_lat)) > 1e-3:
        lattice = new_lat
        site_pos[used] = offsets @ np.linalg.inv(lattice)
    explained = float(on_site.mean())
    counts_used = np.bincount(s_idx[on_site], minlength=len(site_pos))[used]
    prim_frac = site_pos[used] - np.floor(site_pos[used])
    prim_z = site_z_a[used]
    # one integer key per (site, cell) place: 13 bits per cell index (a particle spans far
    # fewer than 4096 cells), the site index above them
    cells_on = np.clip(np.rint(cell_n[on_site]).astype(np.int64) + 4096, 0, 8191)
    keys = ((s_idx[on_site].astype(np.int64) << 39) | (cells_on[:, 0] << 26) | (cells_on[:, 1] << 13)
            | cells_on[:, 2])
    per_slot = float(len(keys) / max(1, len(np.unique(keys))))
    n_anti = int(site_count[minority].sum())
    _, comp = np.unique(nums, return_counts=True)
    random_share = 1.0 - float(np.sum((comp / n) ** 2))
    order = 1.0 if random_share <= 0 else float(np.clip(1.0 - n_anti / n / random_share, 0.0, 1.0))
    return SiteFit(lattice, prim_frac, prim_z, counts_used, explained, float(rms), r_cluster,
                   float(sigma), int(np.sum(~keep_site & ~minority)), n_anti, order, spread[0], per_slot, spread[1])
