"""Ranked answers: the space groups the symmetry sweep saw, each with its lattice and a
probability (``c2np identify --top K``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from c2np.cells import lattice_parameters
from c2np.lattice import LatticeParameters
from c2np.solver.symmetry import SymmetryChoice, symmetry_sweep

__all__ = ["RankedCandidate", "rank_candidates"]


@dataclass(frozen=True)
class RankedCandidate:
    """One ranked answer.

    Attributes:
        spacegroup: international number 1..230.
        international: Hermann-Mauguin short symbol.
        lattice: standardized conventional lattice of that group (Å, degrees).
        probability: in [0, 1]; the first candidate's is the answer's confidence, the others
            share the rest in proportion to the tolerances at which they were found.
        symprec_angstrom: tightest tolerance at which the group was found (Å).
    """

    spacegroup: int
    international: str
    lattice: LatticeParameters
    probability: float
    symprec_angstrom: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        lat = self.lattice
        return {"spacegroup": self.spacegroup, "international": self.international,
                "a": lat.a_angstrom, "b": lat.b_angstrom, "c": lat.c_angstrom,
                "alpha": lat.alpha_deg, "beta": lat.beta_deg, "gamma": lat.gamma_deg,
                "probability": self.probability, "symprec_angstrom": self.symprec_angstrom}


def rank_candidates(lattice_angstrom: np.ndarray, symmetry: SymmetryChoice, confidence: float, *,
                    k: int, tolerances: tuple[float, ...]) -> tuple[RankedCandidate, ...]:
    """Up to ``k`` answers, best first: the chosen group with probability ``confidence``, then
    the other groups found on the reconstructed cell ((3, 3) ``lattice_angstrom``; sites of
    ``symmetry``) over every tolerance of ``tolerances`` below the ceiling, ranked by how
    many tolerances found them (ties: the tighter first)."""
    import moyopy

    def candidate(number: int, ds: Any, sp: float, p: float) -> RankedCandidate:
        std = np.asarray(ds.std_lattice_angstrom, dtype=float)
        return RankedCandidate(int(number), moyopy.SpaceGroupType(int(number)).hm_short.replace(" ", ""),
                               LatticeParameters(*lattice_parameters(std)), float(p), float(sp))

    best = candidate(symmetry.spacegroup, symmetry.dataset, symmetry.symprec_angstrom, confidence)
    if k <= 1:
        return (best,)
    assert symmetry.cell_frac is not None and symmetry.cell_numbers is not None
    # tolerances under the noise floor count too: the subgroups they find are the answers a
    # distortion hidden by the noise would give
    tried = [s for s in tolerances if s < symmetry.ceiling_angstrom]
    sweep = symmetry_sweep(lattice_angstrom, symmetry.cell_frac, symmetry.cell_numbers, tried,
                           stable_plateau=len(tried) + 1) if tried else symmetry.sweep
    seen: dict[int, list[Any]] = {}
    for step in sweep.steps:
        if step.spacegroup is None or step.spacegroup == symmetry.spacegroup:
            continue
        entry = seen.setdefault(int(step.spacegroup), [0, step.symprec_angstrom, step.dataset])
        entry[0] += 1
        if step.symprec_angstrom < entry[1]:
            entry[1], entry[2] = step.symprec_angstrom, step.dataset
    others = sorted(seen.items(), key=lambda kv: (-kv[1][0], kv[1][1]))[:k - 1]
    total = sum(v[0] for _, v in others)
    rest = max(0.0, 1.0 - confidence)
    ranked = [best] + [candidate(g, v[2], v[1], rest * v[0] / total) for g, v in others]
    return tuple(ranked)
