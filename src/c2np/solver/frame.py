"""Step 1 of the solver: the particle's frame (centroid, hull, distance order, neighbour tree)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from c2np.errors import C2NPInputError, C2NPNoAnswerError
from c2np.limits import check as check_limit
from c2np.solver.settings import SolverSettings

#: A particle whose median nearest-neighbour distance exceeds this (Å) is not a solid in Å.
MAX_TYPICAL_NEIGHBOUR_ANGSTROM = 10.0

__all__ = ["ELEMENT_KEY", "Bounds", "ParticleFrame", "particle_bounds", "particle_frame", "validate_input"]

#: 4th coordinate per atomic number: nearest neighbours in the tree stay within an element.
ELEMENT_KEY = 1.0e4


def validate_input(numbers: np.ndarray, positions: np.ndarray, min_atoms: int) -> tuple[np.ndarray, np.ndarray]:
    """(n,) int64 atomic numbers and (n, 3) float64 positions (Å); bad input raises
    :class:`~c2np.errors.C2NPInputError` with one line naming the problem."""
    try:
        nums = np.asarray(numbers).reshape(-1)
        # C order: the sums below then do not depend on how the caller stored the array
        pos = np.ascontiguousarray(positions, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise C2NPInputError(f"solver input: cannot read species/positions as arrays ({exc})") from exc
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise C2NPInputError(f"solver input: positions must have shape (n, 3), got {pos.shape}")
    if len(nums) != len(pos):
        raise C2NPInputError(f"solver input: {len(nums)} species but {len(pos)} positions")
    if not np.all(np.isfinite(pos)):
        bad = int(np.flatnonzero(~np.all(np.isfinite(pos), axis=1))[0])
        raise C2NPInputError(f"solver input: atom {bad} has a non-finite position")
    if not np.issubdtype(nums.dtype, np.integer) and (
            not np.all(np.isfinite(nums.astype(float))) or np.any(nums != np.round(nums))):
        raise C2NPInputError("solver input: atomic numbers must be integers")
    nums = nums.astype(np.int64)
    if np.any(nums < 1) or np.any(nums > 118):
        raise C2NPInputError("solver input: atomic numbers must be in 1..118")
    from scipy.spatial import cKDTree

    check_limit("solver_atoms", len(nums), what="solver input")
    if len(nums) < min_atoms:
        raise C2NPNoAnswerError(f"solver input: {len(nums)} atoms is too few to find a lattice "
                                f"(at least {min_atoms} needed)")
    nearest, _ = cKDTree(pos).query(pos, k=2)
    typical = float(np.median(nearest[:, 1]))
    if typical > MAX_TYPICAL_NEIGHBOUR_ANGSTROM:
        raise C2NPInputError(f"solver input: atoms are typically {typical:.4g} Å from their nearest "
                             f"neighbour (a solid has neighbours within {MAX_TYPICAL_NEIGHBOUR_ANGSTROM:g} Å); "
                             "positions must be in Å")
    return nums, pos


@dataclass(frozen=True, eq=False)
class Bounds:
    """The particle's convex hull about its centroid, for in-particle tests.

    Attributes:
        equations: (F, 4) hull facets, ``n . x + d <= 0`` inside (unit normals).
        r_in: radius of the largest ball about the origin inside the hull (Å).
        r_out: largest distance of an atom from the origin (Å).
        margin: required clearance from the hull (Å; negative: a little outside counts).
    """

    equations: np.ndarray
    r_in: float
    r_out: float
    margin: float

    def with_margin(self, margin_angstrom: float) -> Bounds:
        """The same hull with another clearance (Å)."""
        return replace(self, margin=float(margin_angstrom))

    def inside(self, y: np.ndarray) -> np.ndarray:
        """(..., 3) points -> bool mask: at least ``margin`` inside the hull."""
        r2 = np.einsum("...k,...k->...", y, y)
        sure = r2 <= (self.r_in - self.margin) ** 2
        maybe = ~sure & (r2 <= (self.r_out - self.margin) ** 2)
        out = sure.copy()
        if maybe.any():
            pts = y[maybe]
            dist = pts @ self.equations[:, :3].T + self.equations[:, 3]
            out[maybe] = np.all(dist <= -self.margin, axis=-1)
        return out


def particle_bounds(rel: np.ndarray, r: np.ndarray, margin: float) -> Bounds:
    """Hull of (n, 3) atoms relative to the centroid, ``r`` (n,) their distances (Å)."""
    from scipy.spatial import ConvexHull, QhullError

    outer = rel[r >= 0.75 * r.max()]  # hull(subset) lies inside hull(all): conservative
    pts = outer if len(outer) >= 8 else rel
    try:
        hull = ConvexHull(pts)
    except QhullError:
        try:
            hull = ConvexHull(rel)
        except QhullError as exc:
            raise C2NPNoAnswerError("solver input: the atoms are flat or collinear; a particle "
                                    "must extend in three dimensions") from exc
    eq = np.unique(np.round(np.asarray(hull.equations, dtype=float), 9), axis=0)  # coplanar facets once
    r_in = float(np.min(-eq[:, 3]))
    return Bounds(eq, r_in, float(r.max()), float(margin))


@dataclass(frozen=True, eq=False)
class ParticleFrame:
    """The particle about its centroid.

    Attributes:
        numbers: (n,) atomic numbers.
        rel: (n, 3) positions relative to the centroid (Å).
        r: (n,) distances from the centroid (Å).
        by_centre: (n,) atom indices by distance from the centroid (stable).
        bounds: the hull at ``boundary_margin_angstrom``.
        positions4: (n, 4) positions with ``number * ELEMENT_KEY`` as 4th coordinate.
        tree: ``cKDTree`` over ``positions4``.
    """

    numbers: np.ndarray
    rel: np.ndarray
    r: np.ndarray
    by_centre: np.ndarray
    bounds: Bounds
    positions4: np.ndarray
    tree: Any

    @property
    def n_atoms(self) -> int:
        """Atoms in the particle."""
        return len(self.numbers)


def particle_frame(numbers: np.ndarray, positions_angstrom: np.ndarray,
                   settings: SolverSettings) -> ParticleFrame:
    """Validate the input and build the frame: positions about the centroid, the hull and
    the element-keyed neighbour tree. Raises C2NPInputError for bad or too small input."""
    from scipy.spatial import cKDTree

    nums, pos = validate_input(numbers, positions_angstrom, settings.min_atoms)
    centre = pos.mean(axis=0)
    rel = pos - centre
    r = np.linalg.norm(rel, axis=1)
    bounds = particle_bounds(rel, r, settings.boundary_margin_angstrom)
    if bounds.r_out - settings.boundary_margin_angstrom <= 1.0:
        raise C2NPNoAnswerError(f"solver input: the particle is too small (radius "
                                f"{bounds.r_out:.2f} Å) to find a lattice")
    # every "closest k atoms" below takes whole shells of equal distance from the centroid,
    # so the sets do not depend on the atom order or on rounding in the particle's frame
    by_centre = np.argsort(r, kind="stable")
    positions4 = np.column_stack([rel, nums * ELEMENT_KEY])
    return ParticleFrame(nums, rel, r, by_centre, bounds, positions4, cKDTree(positions4))
