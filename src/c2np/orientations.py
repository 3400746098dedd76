"""Orientation sets over SO(3) (contract §4): the paper's greedy rejection sampler, geodesic
angles, and separation measured modulo a crystal's rotational site symmetry.

Quaternions are scalar-last (x, y, z, w), canonical with w >= 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from c2np.cells import UnitCell
from c2np.errors import SamplingError

__all__ = [
    "n_rotations",
    "geodesic_angle_deg",
    "canonical_quat",
    "draw_paper_quaternion",
    "OrientationSet",
    "sample_orientations",
    "min_separation_deg",
    "site_rotation_group",
]


def n_rotations(theta_deg: float) -> int:
    """The paper's count N(θ) = ceil(2 / (1 - cos θ))."""
    return int(np.ceil(2.0 / (1.0 - np.cos(np.radians(theta_deg)))))


def canonical_quat(q: np.ndarray) -> np.ndarray:
    """Flip quaternion(s) (..., 4) so that w >= 0."""
    q = np.asarray(q, dtype=np.float64)
    sign = np.where(q[..., 3:4] < 0, -1.0, 1.0)
    return q * sign


def geodesic_angle_deg(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Geodesic angle 2 arccos(|p · q|) in degrees between quaternions (broadcasting on ...,4)."""
    dot = np.abs(np.sum(np.asarray(p, dtype=float) * np.asarray(q, dtype=float), axis=-1))
    return np.degrees(2.0 * np.arccos(np.clip(dot, 0.0, 1.0)))


def draw_paper_quaternion(rng: np.random.Generator) -> np.ndarray:
    """One draw of ``Rotation.random(random_state=rng)``: ``rng.normal(size=4)`` normalised,
    read as (x, y, z, w). Written out so it does not depend on scipy's keyword names; the norm
    is summed in a fixed order (not BLAS, whose kernel and so last bit depend on the CPU)."""
    q = rng.normal(size=4)
    sq = q * q
    return q / np.sqrt(((sq[0] + sq[1]) + sq[2]) + sq[3])


def _group_products(q: np.ndarray, group: np.ndarray | None) -> np.ndarray:
    """All q * g for g in the group, as a (g, 4) array (q itself when group is None)."""
    if group is None:
        return q[None, :]
    return (Rotation.from_quat(q) * Rotation.from_quat(group)).as_quat()


@dataclass(frozen=True, eq=False)
class OrientationSet:
    """Quaternions accepted by a sampler, with its settings.

    Attributes:
        quaternions: (N, 4) canonical scalar-last quaternions in acceptance order.
        theta_deg: minimum pairwise geodesic separation enforced.
        seed: seed of ``numpy.random.default_rng``.
        n_trials: draws used.
        modulo_group: whether separations were measured modulo a rotation group.
    """

    quaternions: np.ndarray
    theta_deg: float
    seed: int
    n_trials: int
    modulo_group: bool = False


def sample_orientations(n_target: int, theta_deg: float, seed: int, *,
                        offset_euler_xyz_deg: tuple[float, float, float] | None = None,
                        avoid: np.ndarray | None = None,
                        avoid_margin_deg: float = 0.0,
                        max_trials: int = 200_000,
                        group: np.ndarray | None = None) -> OrientationSet:
    """Greedy rejection sampler of the original generator.

    Each draw is ``draw_paper_quaternion(rng)``, optionally left-multiplied by the fixed
    offset rotation (Euler xyz, degrees), canonicalised to w >= 0, and accepted when its
    geodesic angle to every accepted rotation is >= ``theta_deg`` and to every rotation in
    ``avoid`` is >= ``avoid_margin_deg``. With ``group`` ((g, 4) quaternions of a rotation
    group), angles are taken modulo the group: min over g of angle(p, q g).
    Raises :class:`SamplingError` after ``max_trials`` draws.
    """
    rng = np.random.default_rng(seed)
    offset = Rotation.from_euler("xyz", offset_euler_xyz_deg, degrees=True) if offset_euler_xyz_deg else None
    avoid_arr = None if avoid is None or len(avoid) == 0 else np.asarray(avoid, dtype=float)
    accepted = np.zeros((n_target, 4))
    n_acc = 0
    trials = 0
    while n_acc < n_target:
        if trials >= max_trials:
            raise SamplingError(f"orientation sampler (theta {theta_deg}°, seed {seed}) accepted only "
                                f"{n_acc} of {n_target} rotations in {max_trials} trials")
        trials += 1
        q = draw_paper_quaternion(rng)
        if offset is not None:
            q = (offset * Rotation.from_quat(q)).as_quat()
        q = canonical_quat(q)
        images = _group_products(q, group)  # (g, 4)
        if n_acc:
            angles = geodesic_angle_deg(images[:, None, :], accepted[None, :n_acc, :])
            if np.min(angles) < theta_deg:
                continue
        if avoid_arr is not None:
            angles = geodesic_angle_deg(images[:, None, :], avoid_arr[None, :, :])
            if np.min(angles) < avoid_margin_deg:
                continue
        accepted[n_acc] = q
        n_acc += 1
    return OrientationSet(accepted, float(theta_deg), int(seed), trials, group is not None)


def min_separation_deg(a: np.ndarray, b: np.ndarray | None = None, *,
                       group: np.ndarray | None = None) -> float:
    """Smallest geodesic angle (degrees) within set ``a`` (b None) or between ``a`` and ``b``,
    optionally modulo a rotation group ((g, 4) quaternions). inf for fewer than two rotations."""
    a = np.asarray(a, dtype=float).reshape(-1, 4)
    if b is None and len(a) < 2 or b is not None and (len(a) == 0 or len(b) == 0):
        return float("inf")
    other = a if b is None else np.asarray(b, dtype=float).reshape(-1, 4)
    if group is None:
        imgs = a[:, None, :]  # (n, 1, 4)
    else:
        ra = Rotation.from_quat(a)
        imgs = np.stack([(ra * Rotation.from_quat(g)).as_quat() for g in group], axis=1)  # (n, g, 4)
    dots = np.abs(np.einsum("ngk,mk->ngm", imgs, other)).max(axis=1)  # (n, m)
    if b is None:
        np.fill_diagonal(dots, -1.0)
    return float(np.degrees(2.0 * np.arccos(np.clip(dots.max(), 0.0, 1.0))))


def site_rotation_group(cell: UnitCell, centre_frac: np.ndarray | tuple[float, float, float] = (0, 0, 0), *,
                        symprec_angstrom: float = 1e-3) -> np.ndarray:
    """Proper rotations (as (g, 4) canonical quaternions, Cartesian frame of the cell) of the
    crystal's site-symmetry group at the carving centre: the rotations that map the carved
    sphere onto itself, so orientations that differ by them give the same particle."""
    import spglib

    # spglib's hints ask for nested Sequences; it takes (and documents) NumPy arrays
    sym = spglib.get_symmetry(cell.to_spglib(), symprec=symprec_angstrom)  # type: ignore[arg-type]
    centre = np.asarray(centre_frac, dtype=float)
    lat_t = cell.lattice_angstrom.T
    inv_lat_t = np.linalg.inv(lat_t)
    quats = []
    if sym is None:
        return np.array([[0.0, 0.0, 0.0, 1.0]])
    tol_frac = symprec_angstrom / np.min(np.linalg.norm(cell.lattice_angstrom, axis=1)) * 10
    for w, t in zip(sym["rotations"], sym["translations"]):
        moved = w @ centre + t - centre
        if np.max(np.abs(moved - np.round(moved))) > tol_frac:
            continue
        r_cart = lat_t @ w @ inv_lat_t
        if np.linalg.det(r_cart) < 0:
            continue
        # orthonormalise (cells from files are only approximately exact)
        u, _, vt = np.linalg.svd(r_cart)
        quats.append(canonical_quat(Rotation.from_matrix(u @ vt).as_quat()))
    arr = np.unique(np.round(np.array(quats), 10), axis=0)
    return arr
