"""Carving spherical nanoparticles from unit cells (contract §3): the ground truth of task 1.

Every periodic image x = (n + f) · L with |x - c| <= R + 1e-6 Å is kept. Only the lattice
translations n whose images can reach the sphere are enumerated (no fixed supercell).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from c2np.cells import UnitCell
from c2np.errors import C2NPInputError
from c2np.limits import check as check_limit
from c2np.particle import Particle

__all__ = [
    "CarveResult",
    "carve",
    "rotate_positions",
    "check_quaternion",
    "canonical_order",
    "interplanar_spacings",
    "IDENTITY_QUAT",
    "INCLUSION_TOL_ANGSTROM",
    "PAPER_SUPERCELL",
    "estimated_atoms",
    "check_carve_size",
]

INCLUSION_TOL_ANGSTROM = 1e-6
PAPER_SUPERCELL = 20
IDENTITY_QUAT = np.array([0.0, 0.0, 0.0, 1.0])


@dataclass(frozen=True, eq=False)
class CarveResult:
    """A carved particle and the facts about how it was carved.

    Attributes:
        particle: the atoms, rotated, in the centred frame, in canonical order.
        radius_angstrom: sphere radius R.
        centre_frac: (3,) centre in fractional coordinates of the cell.
        quaternion: (4,) scalar-last rotation applied, canonical (w >= 0).
        boundary_margin_angstrom: smallest | |x - c| - R | over candidate atoms; small
            values mean a lattice shell lies on the sphere and counts are tolerance-sensitive.
        paper_supercell_clips: True when 10 x the smallest interplanar spacing < R, i.e. the
            original 20 x 20 x 20 supercell could not contain the sphere.
        n_translations: number of lattice translations enumerated.
    """

    particle: Particle
    radius_angstrom: float
    centre_frac: np.ndarray
    quaternion: np.ndarray
    boundary_margin_angstrom: float
    paper_supercell_clips: bool
    n_translations: int


def check_quaternion(quaternion: np.ndarray | tuple[float, ...] | list[float], *,
                     unit_tol: float = 1e-6) -> np.ndarray:
    """Validate a scalar-last quaternion: 4 finite numbers of unit norm (within ``unit_tol``).

    Returns it normalised and canonicalised to w >= 0.
    """
    q = np.asarray(quaternion, dtype=np.float64).reshape(-1)
    if q.shape != (4,):
        raise C2NPInputError(f"quaternion must have 4 components (x, y, z, w), got {q.shape[0]}")
    if not np.all(np.isfinite(q)):
        raise C2NPInputError(f"quaternion {q.tolist()} is not finite")
    norm = float(np.linalg.norm(q))
    if abs(norm - 1.0) > unit_tol:
        raise C2NPInputError(f"quaternion {q.tolist()} is not a unit quaternion (norm {norm:.9g})")
    q = q / norm
    return -q if q[3] < 0 else q


def interplanar_spacings(lattice_angstrom: np.ndarray) -> np.ndarray:
    """(3,) spacings d_i = 1 / |b_i| of the lattice planes (100), (010), (001) in Å."""
    recip = np.linalg.inv(np.asarray(lattice_angstrom, dtype=float)).T  # rows b_i, a_i . b_j = delta
    return 1.0 / np.linalg.norm(recip, axis=1)


_PACK_BITS = 28  # packed sort keys: rounded |coordinates| and distances below 2^28 µÅ (268 Å)
_PACK_MIN_ATOMS = 1500  # fewer atoms: the five-key lexsort is faster (measured)


def canonical_order(numbers: np.ndarray, unrotated_angstrom: np.ndarray) -> np.ndarray:
    """Permutation sorting atoms by atomic number, then distance from the origin, then
    x, y, z of the unrotated (centred) position, all rounded to 1e-6 Å (ties keep the
    input order).

    The permutation of ``np.lexsort((z, y, x, dist, numbers))`` of the rounded values,
    found with two stable sorts of packed uint64 keys, (number, dist, x) and (y, z): numpy
    rounds v to k / 10⁶ (k = rint(v · 10⁶)), and ``rint(round(v, 6) · 10⁶)`` gives k back
    exactly (|k| < 2⁵³), so these integers order and tie exactly as the rounded values;
    each field is offset to be non-negative. Fewer than ``_PACK_MIN_ATOMS`` atoms, atoms
    beyond 268 Å or atomic numbers outside 0..127 are sorted by the five-key lexsort itself."""
    r = np.round(unrotated_angstrom, 6)
    dist = np.round(np.linalg.norm(unrotated_angstrom, axis=1), 6)
    z = np.asarray(numbers)
    lim = float(2 ** _PACK_BITS - 1)
    if (len(z) >= max(_PACK_MIN_ATOMS, 1) and float(np.abs(r).max()) * 1e6 < lim
            and float(dist.max()) * 1e6 < lim and int(z.min()) >= 0 and int(z.max()) < 128):
        k = (np.rint(r * 1e6).astype(np.int64) + (1 << _PACK_BITS)).astype(np.uint64)
        kd = np.rint(dist * 1e6).astype(np.uint64)
        b = np.uint64(_PACK_BITS + 1)
        key1 = (z.astype(np.uint64) << np.uint64(2 * _PACK_BITS + 1)) | (kd << b) | k[:, 0]
        key2 = (k[:, 1] << b) | k[:, 2]
        order = np.argsort(key2, kind="stable")
        return order[np.argsort(key1[order], kind="stable")]
    return np.lexsort((r[:, 2], r[:, 1], r[:, 0], dist, z))


def rotate_positions(positions_angstrom: np.ndarray, quaternion: np.ndarray) -> np.ndarray:
    """Apply the rotation of a scalar-last quaternion to (n, 3) positions about the origin."""
    matrix = Rotation.from_quat(np.asarray(quaternion, dtype=float)).as_matrix()
    return np.asarray(positions_angstrom, dtype=np.float64) @ matrix.T


_CHUNK_IMAGES = 1_000_000  # atom images examined at once while carving


def estimated_atoms(cell: UnitCell, radius_angstrom: float) -> float:
    """Expected atom count of a sphere of radius R (Å): the cell's number density times the
    sphere volume (the count itself differs by the surface shell)."""
    return cell.number_density_per_angstrom3 * 4.0 / 3.0 * np.pi * float(radius_angstrom) ** 3


def check_carve_size(cell: UnitCell, radius_angstrom: float, n_translations: float) -> None:
    """Refuse, before allocating, a sphere beyond the limits ``radius_angstrom``,
    ``atoms_per_particle`` (estimated) or ``carve_candidates`` (translations x basis atoms;
    a nearly flat cell needs very many)."""
    what = f"carving {cell.material_id} at R = {radius_angstrom:g} Å"
    check_limit("radius_angstrom", radius_angstrom, what=what)
    check_limit("atoms_per_particle", estimated_atoms(cell, radius_angstrom), what=what + " (estimated atoms)")
    check_limit("carve_candidates", n_translations * cell.n_atoms, what=what + " (periodic images to examine)")


def carve(cell: UnitCell, radius_angstrom: float, *,
          centre_frac: np.ndarray | tuple[float, float, float] = (0.0, 0.0, 0.0),
          quaternion: np.ndarray | tuple[float, ...] | None = None,
          inclusion_tol_angstrom: float = INCLUSION_TOL_ANGSTROM) -> CarveResult:
    """Carve a sphere of radius R (Å) around ``centre_frac`` from the infinite crystal.

    Returns the atoms with |x - c| <= R + tol, rotated by ``quaternion`` (identity when
    None) about the centre, in the centred frame and canonical order.
    """
    radius = float(radius_angstrom)
    if not np.isfinite(radius) or radius <= 0:
        raise C2NPInputError(f"radius must be a positive number of Å, got {radius_angstrom!r}")
    centre = np.asarray(centre_frac, dtype=np.float64).reshape(-1)
    if centre.shape != (3,) or not np.all(np.isfinite(centre)):
        raise C2NPInputError(f"centre must be 3 finite fractional coordinates, got {centre_frac!r}")
    quat = IDENTITY_QUAT.copy() if quaternion is None else check_quaternion(quaternion)

    lattice = cell.lattice_angstrom
    frac = cell.frac_coords
    recip = np.linalg.inv(lattice).T  # rows b_i: fractional coordinate u_i = x . b_i
    reach = radius + inclusion_tol_angstrom + 1e-9
    half = reach * np.linalg.norm(recip, axis=1)  # sphere's half-extent in each fractional coordinate
    lo_f = np.floor(centre - half - frac.max(axis=0))
    hi_f = np.ceil(centre + half - frac.min(axis=0))
    check_carve_size(cell, radius, float(np.prod(hi_f - lo_f + 1.0)))
    lo, hi = lo_f.astype(np.int64), hi_f.astype(np.int64)
    axes = [np.arange(lo[i], hi[i] + 1, dtype=np.float64) for i in range(3)]
    n_translations = int(np.prod([len(a) for a in axes]))

    centre_cart = centre @ lattice
    rel_basis = frac @ lattice - centre_cart  # (m, 3)
    # Enumerate slab by slab along the first axis to bound memory for large spheres.
    keep_pos: list[np.ndarray] = []
    keep_num: list[np.ndarray] = []
    margin = np.inf
    grid_bc = np.stack(np.meshgrid(axes[1], axes[2], indexing="ij"), axis=-1).reshape(-1, 2)
    t_bc_all = grid_bc @ lattice[1:]  # (k, 3)
    # blocks of at most _CHUNK_IMAGES images (bounded memory): several whole slabs at once
    # where a slab is small, else parts of one slab; the images come in the same order
    slab = len(t_bc_all) * len(rel_basis)
    if slab <= _CHUNK_IMAGES:
        g = _CHUNK_IMAGES // slab
        blocks = [(axes[0][i:i + g], t_bc_all) for i in range(0, len(axes[0]), g)]
    else:
        step = max(1, _CHUNK_IMAGES // len(rel_basis))
        blocks = [(axes[0][i:i + 1], t_bc_all[j:j + step]) for i in range(len(axes[0]))
                  for j in range(0, len(t_bc_all), step)]
    for n0, t_bc in blocks:
        t = (t_bc[None, :, :] + n0[:, None, None] * lattice[0]).reshape(-1, 3)  # (k, 3)
        pos = (t[:, None, :] + rel_basis[None, :, :]).reshape(-1, 3)
        dist = np.sqrt(np.einsum("ij,ij->i", pos, pos))
        margin = min(margin, float(np.min(np.abs(dist - radius))))
        inside = dist <= radius + inclusion_tol_angstrom
        if np.any(inside):
            keep_pos.append(pos[inside])
            keep_num.append(np.tile(cell.numbers, len(t))[inside])
    if keep_pos:
        unrotated = np.concatenate(keep_pos)
        numbers = np.concatenate(keep_num)
    else:
        unrotated = np.zeros((0, 3))
        numbers = np.zeros(0, dtype=np.int64)
    order = canonical_order(numbers, unrotated)
    unrotated = unrotated[order]
    numbers = numbers[order]
    positions = unrotated if np.array_equal(quat, IDENTITY_QUAT) else rotate_positions(unrotated, quat)
    clips = bool(PAPER_SUPERCELL / 2 * float(interplanar_spacings(lattice).min()) < radius)
    return CarveResult(
        particle=Particle(numbers, positions),
        radius_angstrom=radius,
        centre_frac=centre,
        quaternion=quat,
        boundary_margin_angstrom=float(margin),
        paper_supercell_clips=clips,
        n_translations=n_translations,
    )
