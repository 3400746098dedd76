"""Lattice parameters: the six numbers of a cell (lengths in Å, angles in degrees).

One record used by the standardized cell, the task-2 target, the solver result and the
task-2 predictions, so that the order and the units are written down once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["LatticeParameters", "LATTICE_PARAMETER_NAMES"]

#: Field order of :meth:`LatticeParameters.as_array` and of the task-2 CSV columns.
LATTICE_PARAMETER_NAMES: tuple[str, ...] = ("a", "b", "c", "alpha", "beta", "gamma")


@dataclass(frozen=True)
class LatticeParameters:
    """a, b, c (Å) and alpha, beta, gamma (degrees) of a cell.

    The record holds whatever numbers it is given (a prediction may be unusable); use
    :meth:`is_valid` to ask whether they describe a real cell.
    """

    a_angstrom: float
    b_angstrom: float
    c_angstrom: float
    alpha_deg: float
    beta_deg: float
    gamma_deg: float

    @classmethod
    def from_array(cls, values: Sequence[float] | np.ndarray) -> LatticeParameters:
        """From (6,) a, b, c, alpha, beta, gamma."""
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
        if arr.shape != (6,):
            raise ValueError(f"lattice parameters need 6 numbers (a, b, c, alpha, beta, gamma), got {arr.size}")
        return cls(*(float(v) for v in arr))

    @classmethod
    def from_lattice(cls, lattice_angstrom: np.ndarray) -> LatticeParameters:
        """From (3, 3) lattice rows a, b, c (Å)."""
        lat = np.asarray(lattice_angstrom, dtype=np.float64).reshape(3, 3)
        lengths = np.linalg.norm(lat, axis=1)

        def angle(i: int, j: int) -> float:
            cos = float(np.dot(lat[i], lat[j]) / (lengths[i] * lengths[j]))
            return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))

        return cls(float(lengths[0]), float(lengths[1]), float(lengths[2]), angle(1, 2), angle(0, 2), angle(0, 1))

    def as_array(self) -> np.ndarray:
        """(6,) a, b, c (Å), alpha, beta, gamma (degrees)."""
        return np.array([self.a_angstrom, self.b_angstrom, self.c_angstrom,
                         self.alpha_deg, self.beta_deg, self.gamma_deg], dtype=np.float64)

    @property
    def lengths_angstrom(self) -> np.ndarray:
        """(3,) a, b, c in Å."""
        return self.as_array()[:3]

    @property
    def angles_deg(self) -> np.ndarray:
        """(3,) alpha, beta, gamma in degrees."""
        return self.as_array()[3:]

    def is_valid(self) -> bool:
        """Finite positive lengths and angles that close a cell of positive volume."""
        v = self.as_array()
        if not np.all(np.isfinite(v)) or np.any(v[:3] <= 0) or np.any(v[3:] <= 0) or np.any(v[3:] >= 180):
            return False
        al, be, ga = np.radians(v[3:])
        if al + be + ga >= 2 * np.pi or al + be <= ga or al + ga <= be or be + ga <= al:
            return False
        ca, cb, cg = np.cos(al), np.cos(be), np.cos(ga)
        return bool(1 - ca * ca - cb * cb - cg * cg + 2 * ca * cb * cg > 0)
