"""Step 2 of the solver: the neighbour scale (same-element spacing, matching tolerance)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from c2np.errors import C2NPInputError, C2NPNoAnswerError
from c2np.solver.frame import ELEMENT_KEY, ParticleFrame
from c2np.solver.geometry import whole_shells
from c2np.solver.settings import SolverSettings

__all__ = ["NeighbourScale", "neighbour_scale"]


@dataclass(frozen=True, eq=False)
class NeighbourScale:
    """Length scale of the particle, measured on its central atoms.

    Attributes:
        probe: (p,) indices of the central probe atoms (whole distance shells).
        d_same_min_angstrom: smallest per-element median same-element nearest-neighbour
            distance of the probes (Å).
        tol_loose_angstrom: an image lands on an atom within this distance (Å).
    """

    probe: np.ndarray
    d_same_min_angstrom: float
    tol_loose_angstrom: float


def neighbour_scale(frame: ParticleFrame, settings: SolverSettings) -> NeighbourScale:
    """Same-element nearest-neighbour distances of the central atoms -> loose tolerance."""
    nums = frame.numbers
    probe = frame.by_centre[:whole_shells(frame.r[frame.by_centre], settings.max_probe_atoms)]
    dnn, _ = frame.tree.query(frame.positions4[probe], k=2)
    same = dnn[:, 1] < ELEMENT_KEY * 0.5
    if not same.any():
        raise C2NPNoAnswerError("solver input: no two atoms of the same element; no lattice to find")
    per_elem = [float(np.median(dnn[same & (nums[probe] == z), 1]))
                for z in np.unique(nums[probe]) if np.any(same & (nums[probe] == z))]
    d_same_min = min(per_elem)
    if d_same_min < settings.min_same_element_distance_angstrom:
        raise C2NPInputError(f"solver input: atoms of the same element overlap "
                             f"(typical nearest-neighbour distance {d_same_min:.3f} Å)")
    tol_loose = min(settings.max_loose_tolerance_angstrom, settings.loose_tolerance_fraction * d_same_min)
    return NeighbourScale(probe, d_same_min, tol_loose)
