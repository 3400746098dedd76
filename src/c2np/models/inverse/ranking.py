"""Self-consistency of a generated unit cell with the particle it was generated for
(analysis by synthesis for the task-2 crystal generators, :mod:`c2np.models.inverse.generator`).

A **pair profile** is, per unordered species-slot pair (the slots of
:func:`c2np.particle_descriptor.describe`), the number of atom pairs per atom at distance
``r`` for ``r`` up to :data:`PROFILE_CUTOFF_SCALED` times the particle scale ``s``, on
:data:`PROFILE_BINS` bins, Gaussian-smoothed (:data:`PROFILE_SMOOTH_SCALED` ``s``). Its
integral over ``r`` is set by the number density and the local structure, so it sees both a
wrong atom count (a cell of Z formula units with the lattice of another Z) and misplaced atoms
(two H on one site, H off their sites).

* Of a particle (:func:`particle_pair_profile`): every pair of its atoms, divided by
  ``N * gamma(r)`` with ``gamma(r) = 1 - 3r/(4R) + r^3/(16R^3)`` the set covariogram of a ball
  of radius ``R`` (the fraction of bulk pairs at separation ``r`` with both atoms inside),
  ``R`` the largest distance of an atom from the centroid. Reads only species and positions.
* Of a periodic cell (:func:`cell_pair_profile`): every atom's neighbours over the lattice
  images, per atom of the cell. Never carves.

:func:`profile_mismatch` is the relative L1 distance of two profiles (0 = identical).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.spatial import cKDTree

from c2np.models.inverse.templates import CellTemplate, metric_average, orbits
from c2np.particle import Particle
from c2np.particle_descriptor import N_SLOTS, ParticleDescriptor, slot_pairs

__all__ = ["PROFILE_CUTOFF_SCALED", "PROFILE_BINS", "PROFILE_SMOOTH_SCALED", "MAX_IMAGES",
           "STRETCHES",
           "particle_pair_profile", "cell_pair_profile", "profile_mismatch", "best_scale_mismatch",
           "refine_to_profile"]

PROFILE_CUTOFF_SCALED = 2.2
PROFILE_BINS = 88
PROFILE_SMOOTH_SCALED = 0.04
MAX_IMAGES = 4096
STRETCHES = np.round(np.arange(0.88, 1.1201, 0.01), 4)


def _binned(dist_scaled: np.ndarray, pair_index: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """(n_pairs, PROFILE_BINS) Gaussian-smoothed pair counts (weights) at scaled distances
    (compiled, :func:`~c2np.models.inverse._profile_kernels.binned_kernel`)."""
    from c2np.models.inverse._profile_kernels import binned_kernel

    out = np.zeros((len(slot_pairs()), PROFILE_BINS))
    binned_kernel(np.ascontiguousarray(dist_scaled, dtype=np.float64), np.ascontiguousarray(pair_index, dtype=np.int64),
                  np.ascontiguousarray(weight, dtype=np.float64), out, PROFILE_CUTOFF_SCALED, PROFILE_SMOOTH_SCALED)
    return out


@functools.lru_cache(maxsize=1)
def _pair_table() -> np.ndarray:
    """(N_SLOTS, N_SLOTS) index of the unordered slot pair of two slots (:func:`slot_pairs`)."""
    table = np.zeros((N_SLOTS, N_SLOTS), dtype=np.int64)
    for k, (a, b) in enumerate(slot_pairs()):
        table[a, b] = table[b, a] = k
    table.flags.writeable = False
    return table


def _pair_index(si: np.ndarray, sj: np.ndarray) -> np.ndarray:
    return _pair_table()[np.minimum(si, N_SLOTS - 1), np.minimum(sj, N_SLOTS - 1)]


@functools.lru_cache(maxsize=256)
def _shifts(reach: tuple[int, int, int]) -> np.ndarray:
    """(k, 3) float64 lattice translations ``-reach..reach`` per axis, the last axis fastest."""
    grid = np.stack(np.meshgrid(*[np.arange(-m, m + 1) for m in reach], indexing="ij"), axis=-1)
    out = grid.reshape(-1, 3).astype(np.float64)
    out.flags.writeable = False
    return out


def _slots_of(numbers: np.ndarray, desc: ParticleDescriptor) -> np.ndarray:
    slot_by_z = {int(z): int(s) for z, s in zip(desc.numbers, desc.slot_of)}
    return np.array([slot_by_z.get(int(z), N_SLOTS - 1) for z in numbers], dtype=np.int64)


def particle_pair_profile(particle: Particle, desc: ParticleDescriptor) -> np.ndarray:
    """(n_pairs, PROFILE_BINS) pair profile of a particle (module docstring), pairs per atom;
    ``desc`` is the particle's :func:`~c2np.particle_descriptor.describe` (slots and s)."""
    pos = np.asarray(particle.positions_angstrom, dtype=np.float64)
    s = float(desc.scale_angstrom)
    cut = PROFILE_CUTOFF_SCALED * s
    radius = float(np.linalg.norm(pos - pos.mean(axis=0), axis=1).max()) if len(pos) else 0.0
    pairs = cKDTree(pos).query_pairs(cut + 4 * PROFILE_SMOOTH_SCALED * s, output_type="ndarray")
    slots = _slots_of(np.asarray(particle.numbers), desc)
    r = np.linalg.norm(pos[pairs[:, 0]] - pos[pairs[:, 1]], axis=1)
    x = np.clip(r / max(radius, 1e-9), 0.0, 2.0)
    gamma = np.maximum(1.0 - 0.75 * x + x ** 3 / 16.0, 0.05)
    return _binned(r / s, _pair_index(slots[pairs[:, 0]], slots[pairs[:, 1]]),
                   1.0 / (gamma * max(len(pos), 1)))


def _cell_images(lattice_angstrom: np.ndarray, frac: np.ndarray, scale_angstrom: float, reach_factor: float
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float] | None:
    """(lattice, frac wrapped, lattice translations, cut-off Å) of a periodic cell for pairs
    within ``reach_factor`` times the profile cut-off; None for a degenerate lattice or one
    needing more than :data:`MAX_IMAGES` translations."""
    lat = np.ascontiguousarray(lattice_angstrom, dtype=np.float64)
    f = np.ascontiguousarray(np.asarray(frac, dtype=np.float64) % 1.0)
    s = float(scale_angstrom)
    cut = (PROFILE_CUTOFF_SCALED + 4 * PROFILE_SMOOTH_SCALED) * s * reach_factor
    if not np.all(np.isfinite(lat)) or abs(np.linalg.det(lat)) < 1e-6 * s ** 3:
        return None
    reach = np.ceil(cut * np.linalg.norm(np.linalg.inv(lat), axis=0)).astype(np.int64) + 1
    if int(np.prod(2 * reach + 1)) > MAX_IMAGES:
        return None
    return lat, f, _shifts((int(reach[0]), int(reach[1]), int(reach[2]))), cut


def _cell_pairs(lattice_angstrom: np.ndarray, frac: np.ndarray, slots: np.ndarray, scale_angstrom: float,
                *, reach_factor: float = 1.0) -> tuple[np.ndarray, np.ndarray] | None:
    """Ordered neighbour pairs of a periodic cell within ``reach_factor`` times the profile
    cut-off: (distances in units of ``scale_angstrom`` (k,), pair index (k,)); None for a
    degenerate lattice or one needing more than :data:`MAX_IMAGES` lattice translations."""
    images = _cell_images(lattice_angstrom, frac, scale_angstrom, reach_factor)
    if images is None:
        return None
    from c2np.models.inverse._profile_kernels import cell_pairs_kernel

    lat, f, shifts, cut = images
    s = float(scale_angstrom)
    size = len(f) * len(f) * len(shifts)
    r, i, j = np.empty(size), np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64)
    m = cell_pairs_kernel(lat, f, shifts, cut, 1e-9 * s, r, i, j)
    sl = np.asarray(slots, dtype=np.int64)
    return r[:m] / s, _pair_index(sl[i[:m]], sl[j[:m]])


def cell_pair_profile(lattice_angstrom: np.ndarray, frac: np.ndarray, slots: np.ndarray,
                      scale_angstrom: float) -> np.ndarray | None:
    """(n_pairs, PROFILE_BINS) pair profile of a periodic cell (lattice rows a, b, c in Å;
    frac (n, 3); slot of each atom (n,)), pairs per atom, distances in units of
    ``scale_angstrom``. None for a degenerate lattice or one needing more than
    :data:`MAX_IMAGES` lattice translations within the cut-off. Computed in one compiled
    pass (:func:`~c2np.models.inverse._profile_kernels.cell_profile_kernel`)."""
    images = _cell_images(lattice_angstrom, frac, scale_angstrom, 1.0)
    if images is None:
        return None
    from c2np.models.inverse._profile_kernels import cell_profile_kernel

    lat, f, shifts, cut = images
    s = float(scale_angstrom)
    out = np.zeros((len(slot_pairs()), PROFILE_BINS))
    sl = np.minimum(np.asarray(slots, dtype=np.int64), N_SLOTS - 1)
    # ordered pairs over images, each unordered pair counted twice: weight 1/2 per atom of the cell
    cell_profile_kernel(lat, f, np.ascontiguousarray(sl), _pair_table(), shifts, cut, 1e-9 * s, s,
                        0.5 / max(len(f), 1), out, PROFILE_CUTOFF_SCALED, PROFILE_SMOOTH_SCALED)
    return out


def best_scale_mismatch(particle_profile: np.ndarray, lattice_angstrom: np.ndarray, frac: np.ndarray,
                        slots: np.ndarray, scale_angstrom: float, *,
                        stretches: np.ndarray = STRETCHES) -> tuple[float, float]:
    """The cell's isotropic stretch that best matches the particle's pair profile:
    (stretch factor ``lambda`` of the lattice, :func:`profile_mismatch` of the stretched cell)
    over the grid ``stretches``, then refined (bounded Brent) within one grid step of the
    best; (1.0, inf) when the cell has no profile. The stretch is a property of the particle
    (its interatomic distances), not of the target."""
    from scipy.optimize import minimize_scalar

    k = np.asarray(stretches, dtype=np.float64)
    pairs = _cell_pairs(lattice_angstrom, frac, slots, scale_angstrom, reach_factor=1.0 / float(k.min()))
    if pairs is None:
        return 1.0, float("inf")
    w = np.full(len(pairs[0]), 0.5 / max(len(frac), 1))
    def cost(lam: float) -> float:
        return profile_mismatch(particle_profile, _binned(pairs[0] * lam, pairs[1], w))

    mis = [cost(float(lam)) for lam in k]
    b = int(np.argmin(mis))
    step = float(np.max(np.diff(k))) if len(k) > 1 else 0.0
    if step > 0:
        res = minimize_scalar(cost, bounds=(float(k[b]) - step, float(k[b]) + step), method="bounded",
                              options={"xatol": 1e-4})
        if res.fun < mis[b]:
            return float(res.x), float(res.fun)
    return float(k[b]), float(mis[b])


def profile_mismatch(particle_profile: np.ndarray, cell_profile: np.ndarray | None) -> float:
    """Relative L1 distance ``sum |p - c| / sum p`` of two pair profiles; inf for None."""
    if cell_profile is None:
        return float("inf")
    p = np.asarray(particle_profile, dtype=np.float64)
    return float(np.abs(p - cell_profile).sum() / max(float(p.sum()), 1e-12))


def _metric_basis(rotations: np.ndarray) -> np.ndarray:
    """(k, 3, 3) orthonormal basis of the symmetric metrics G with ``W^T G W = G`` for every
    rotation W (m, 3, 3) of a template (fractional basis): the range of
    :func:`~c2np.models.inverse.templates.metric_average`."""
    mats = []
    for a, b in itertools.combinations_with_replacement(range(3), 2):
        e = np.zeros((3, 3))
        e[a, b] = e[b, a] = 1.0
        mats.append(metric_average(e, rotations).ravel())
    u, sv, vt = np.linalg.svd(np.array(mats))
    return vt[: int(np.sum(sv > 1e-8))].reshape(-1, 3, 3)


@functools.lru_cache(maxsize=256)
def _template_bases(template: CellTemplate) -> tuple[np.ndarray, list[tuple[int, np.ndarray, list[tuple[int, int]]]]]:
    """(:func:`_metric_basis`, :func:`_site_basis`) of a template, computed once per template
    object (read-only: callers copy before changing them)."""
    return _metric_basis(template.rotations), _site_basis(template)


def _site_basis(template: CellTemplate) -> list[tuple[int, np.ndarray, list[tuple[int, int]]]]:
    """Per orbit of the template (:func:`~c2np.models.inverse.templates.orbits`): (its first atom
    r, (d, 3) basis of the directions that keep r on its Wyckoff set, the null space of the
    stacked ``W - I`` of r's site operations, [(member j, operation g taking r to j)])."""
    rot = np.asarray(template.rotations, dtype=np.float64)
    out = []
    for r, stab, members in orbits(template.perm):
        _, sv, vt = np.linalg.svd((rot[stab] - np.eye(3)).reshape(-1, 3))
        out.append((r, vt[int(np.sum(sv > 1e-8)):], members))
    return out


def _shape_starts(G0: np.ndarray, basis: np.ndarray, amplitudes: Sequence[float]) -> list[np.ndarray]:
    """Lattice coordinates x (in ``basis``, (k, 3, 3), the metric ``G0 + sum x_i basis_i``) of
    the volume-keeping shape changes ``G0 + t |G0| D`` of the metric ``G0`` (3, 3), for ``D``
    each unit direction of the basis orthogonal to ``G0`` and ``t`` = ± each amplitude."""
    flat = basis.reshape(len(basis), -1)
    c = np.linalg.lstsq(flat.T, G0.ravel(), rcond=None)[0]          # G0 in the basis
    gram = flat @ flat.T
    norm_g0 = float(np.linalg.norm(G0))
    dirs: list[np.ndarray] = []
    for j in range(len(basis)):
        d = np.eye(len(basis))[j] - (c @ gram[j]) / (c @ gram @ c) * c  # Frobenius-orthogonal to G0
        for e in dirs:
            d = d - (d @ gram @ e) * e
        n = float(np.sqrt(max(d @ gram @ d, 0.0)))
        if n > 1e-8:
            dirs.append(d / n)
    out = []
    det0 = float(np.linalg.det(G0))
    for d in dirs:
        for t in amplitudes:
            for sgn in (1.0, -1.0):
                x = sgn * float(t) * norm_g0 * d
                det = float(np.linalg.det(G0 + np.tensordot(x, basis, axes=1)))
                if det <= 0:
                    continue
                mu = (det0 / det) ** (1.0 / 3.0)
                out.append(mu * x + (mu - 1.0) * c)                     # mu (G0 + x.B) - G0
    return out


def _moved_orbits(frac: np.ndarray, sites: list[tuple[int, np.ndarray, list[tuple[int, int]]]],
                  rotations: np.ndarray, translations: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """(n, 3) fractional coordinates, modulo 1: each orbit's first atom (``sites``, from
    :func:`_site_basis`) moved by its coefficients of ``shifts`` along its Wyckoff directions
    (in the order of ``sites``) and the orbit rebuilt from it by the operations
    (``rotations`` (g, 3, 3), ``translations`` (g, 3))."""
    f = np.array(frac, dtype=np.float64)
    k = 0
    for r, b, members in sites:
        p = frac[r] + shifts[k:k + len(b)] @ b
        k += len(b)
        for j, g in members:
            f[j] = rotations[g] @ p + translations[g]
    return f % 1.0


def _coordinate_starts(dims: int, n: int) -> np.ndarray:
    """(n, dims) shifts of the free Wyckoff coordinates in ``[-1/2, 1/2)``: the first n points
    of the unscrambled Halton sequence (deterministic, no seed needed), less 1/2."""
    from scipy.stats import qmc

    return qmc.Halton(d=dims, scramble=False).random(n) - 0.5


def refine_to_profile(particle_profile: np.ndarray, template: CellTemplate, lattice_angstrom: np.ndarray,
                      frac: np.ndarray, slots: np.ndarray, scale_angstrom: float, *, max_evals: int = 300,
                      shape_starts: Sequence[float] = (), coord_starts: int = 0
                      ) -> tuple[np.ndarray, np.ndarray, float]:
    """The cell's free parameters under ``template`` (its symmetric lattice metric and the
    Wyckoff coordinates of each orbit) fitted to the particle's pair profile, from the given
    (template-symmetric) cell: Nelder-Mead on :func:`profile_mismatch` (at most ``max_evals``
    profiles). Returns (lattice (3, 3) rows Å, frac (n, 3), mismatch); the cell stays exactly
    symmetric in the template. Reads only the particle's profile and the cell.

    ``shape_starts`` (relative amplitudes, e.g. ``(0.1, 0.2, 0.3)``): a second Nelder-Mead
    from the best of the volume-keeping shape changes of the cell's metric by ``±t`` along
    every non-isotropic symmetric direction (for a rhombohedral cell its c/a), one profile
    each; the better of the two fits is returned (a multi-start for cells that start far
    from the crystal's shape).

    ``coord_starts`` (N >= 1): a multi-start over the Wyckoff coordinates, for cells whose
    coordinates start far from the crystal's. The first N points of the (unscrambled,
    deterministic) Halton sequence over the free coordinates, each shifted by ``[-1/2, 1/2)``
    along its orbit's Wyckoff directions from the cell's own, are scored with the cell's
    lattice (and with each shape start's, when ``shape_starts`` is given), one profile each;
    a further Nelder-Mead runs from the best of them and the best of all fits is returned.
    Templates without free coordinates skip it."""
    from scipy.optimize import minimize

    L0 = np.asarray(lattice_angstrom, dtype=np.float64)
    f0 = np.asarray(frac, dtype=np.float64) % 1.0
    G0 = L0 @ L0.T
    ev0, V0 = np.linalg.eigh(G0)
    g0_inv_sqrt = (V0 / np.sqrt(ev0)) @ V0.T
    unit_basis, sites = _template_bases(template)
    basis = unit_basis * float(np.trace(G0) / 3.0)
    rot = np.asarray(template.rotations, dtype=np.float64)
    tr = np.asarray(template.translations, dtype=np.float64)
    n_lat = len(basis)

    def cell(x: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        G = G0 + np.tensordot(x[:n_lat], basis, axes=1)
        ev, V = np.linalg.eigh(G)
        if ev.min() <= 1e-6 * ev0.max():
            return None
        L = (V * np.sqrt(ev)) @ V.T @ g0_inv_sqrt @ L0
        return L, _moved_orbits(f0, sites, rot, tr, x[n_lat:])

    def cost(x: np.ndarray) -> float:
        c = cell(x)
        if c is None:
            return float("inf")
        return profile_mismatch(particle_profile, cell_pair_profile(c[0], c[1], slots, scale_angstrom))

    n_par = n_lat + sum(len(b) for _, b, _ in sites)
    simplex = np.zeros((n_par + 1, n_par))
    simplex[1:] = np.diag([0.04] * n_lat + [0.01] * (n_par - n_lat))

    def fit(x0: np.ndarray) -> Any:
        return minimize(cost, x0, method="Nelder-Mead",
                        options={"maxfev": int(max_evals), "initial_simplex": x0 + simplex, "xatol": 1e-4,
                                 "fatol": 1e-5})

    def better_from(starts: list[np.ndarray], res: Any) -> Any:
        """A fit from the best of ``starts`` (one profile each) when it beats ``res``."""
        costs = [cost(x) for x in starts]
        if starts and np.isfinite(np.min(costs)):
            other = fit(starts[int(np.argmin(costs))])
            if other.fun < res.fun:
                return other
        return res

    res = fit(np.zeros(n_par))
    shapes = _shape_starts(G0, basis, shape_starts) if len(shape_starts) and n_lat > 1 else []
    res = better_from([np.r_[x, np.zeros(n_par - n_lat)] for x in shapes], res)
    if coord_starts > 0 and n_par > n_lat:
        res = better_from([np.r_[lat, u] for lat in [np.zeros(n_lat), *shapes]
                           for u in _coordinate_starts(n_par - n_lat, int(coord_starts))], res)
    best = cell(res.x)
    if best is None or not np.isfinite(res.fun):
        return L0, f0, cost(np.zeros(n_par))
    return best[0], best[1], float(res.fun)
