"""A finite set of atoms in its own centred frame: the object task 1 predicts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from c2np.errors import C2NPInputError

__all__ = ["Particle", "central_crop"]


@dataclass(frozen=True, eq=False)
class Particle:
    """A finite set of atoms in its centred frame (the sphere centre is the origin).

    Attributes:
        numbers: (n,) int64 atomic numbers.
        positions_angstrom: (n, 3) float64 Cartesian positions in Å.
    """

    numbers: np.ndarray
    positions_angstrom: np.ndarray

    def __post_init__(self) -> None:
        nums = np.array(self.numbers, dtype=np.int64, copy=True).reshape(-1)
        pos = np.array(self.positions_angstrom, dtype=np.float64, copy=True)
        if pos.size == 0:
            pos = pos.reshape(0, 3)
        if pos.ndim != 2 or pos.shape[1] != 3:
            raise C2NPInputError(f"particle positions must have shape (n, 3), got {pos.shape}")
        if len(nums) != len(pos):
            raise C2NPInputError(f"particle has {len(nums)} species but {len(pos)} positions")
        nums.setflags(write=False)
        pos.setflags(write=False)
        object.__setattr__(self, "numbers", nums)
        object.__setattr__(self, "positions_angstrom", pos)

    @property
    def n_atoms(self) -> int:
        """Number of atoms."""
        return int(len(self.numbers))

    def to_ase(self, info: dict[str, Any] | None = None) -> Any:
        """As a non-periodic :class:`ase.Atoms`."""
        from ase import Atoms

        atoms = Atoms(numbers=self.numbers, positions=self.positions_angstrom, pbc=False)
        if info:
            atoms.info.update(info)
        return atoms


def central_crop(particle: Particle, radius_angstrom: float) -> Particle:
    """The atoms of ``particle`` within ``radius_angstrom`` (Å) of its centroid, centred
    there: a smaller sphere of the same particle (the input cropped, no cell involved)."""
    if not radius_angstrom > 0.0:
        raise C2NPInputError(f"crop radius must be > 0 Å, got {radius_angstrom!r}")
    pos = particle.positions_angstrom - particle.positions_angstrom.mean(axis=0) if particle.n_atoms else \
        particle.positions_angstrom
    keep = np.linalg.norm(pos, axis=1) <= radius_angstrom
    return Particle(particle.numbers[keep], pos[keep])
