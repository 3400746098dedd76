"""The solver's answer: lattice, space group, reconstructed cell, confidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from c2np.cells import UnitCell
from c2np.lattice import LatticeParameters

__all__ = ["SolverResult"]


@dataclass(frozen=True, eq=False)
class SolverResult:
    """What the solver recovered from a particle.

    Attributes:
        lattice: standardized conventional lattice parameters (Å, degrees).
        spacegroup: international space-group number 1..230.
        international: Hermann-Mauguin short symbol, e.g. ``Pm-3m``.
        crystal_system: e.g. ``cubic``.
        confidence: in [0, 1]; see :mod:`c2np.solver`.
        cell: the reconstructed standardized conventional :class:`UnitCell`.
        primitive_lattice_angstrom: (3, 3) Niggli-reduced lattice found in the particle
            (rows, in the particle's own frame).
        symprec_angstrom: tolerance at which the space group was chosen.
        n_atoms: atoms in the particle.
        diagnostics: JSON-serialisable details (noise estimate, translations, sites, sweep).
        lattice_spread_angstrom: how much the lattice varies across the particle (Å per
            lattice vector, rms over the octants' own lattices; 0 for an ideal carving): the
            reported lattice is the particle's mean lattice, fitted over all atoms.
        candidates: ranked answers (:class:`~c2np.solver.ranking.RankedCandidate`), best
            first; the answer alone unless more were asked for (``solve(..., top_k=K)``).
        degree_of_order: long-range chemical order in [0, 1] (1: no antisite atoms; 0: as
            many as random occupancy; 1 for one element).
    """

    lattice: LatticeParameters
    spacegroup: int
    international: str
    crystal_system: str
    confidence: float
    cell: UnitCell = field(repr=False)
    primitive_lattice_angstrom: np.ndarray = field(repr=False)
    symprec_angstrom: float = 0.0
    n_atoms: int = 0
    diagnostics: dict[str, Any] = field(default_factory=dict, repr=False)
    lattice_spread_angstrom: float = 0.0
    degree_of_order: float = 1.0
    candidates: tuple[Any, ...] = field(default=(), repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form: keys a, b, c, alpha, beta, gamma, spacegroup, confidence
        first, then the symbol, system, tolerance, cells and diagnostics."""
        lat = self.lattice
        return {
            "a": lat.a_angstrom, "b": lat.b_angstrom, "c": lat.c_angstrom,
            "alpha": lat.alpha_deg, "beta": lat.beta_deg, "gamma": lat.gamma_deg,
            "spacegroup": self.spacegroup, "confidence": self.confidence,
            "international": self.international, "crystal_system": self.crystal_system,
            "symprec_angstrom": self.symprec_angstrom, "n_atoms": self.n_atoms,
            "lattice_spread_angstrom": self.lattice_spread_angstrom, "degree_of_order": self.degree_of_order,
            "candidates": [c.to_dict() for c in self.candidates],
            "primitive_lattice_angstrom": np.asarray(self.primitive_lattice_angstrom).tolist(),
            "cell": self.cell.to_dict(),
            "diagnostics": self.diagnostics,
        }
