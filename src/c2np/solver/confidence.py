"""Step 8 of the solver: the confidence, a product of six factors in [0, 1]."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from c2np.solver.consolidation import ConsolidatedLattice
from c2np.solver.search import LatticeSearch
from c2np.solver.sites import SiteFit
from c2np.solver.symmetry import LATTICE_SPREAD_FACTOR, SymmetryChoice

__all__ = ["Confidence", "confidence"]


@dataclass(frozen=True)
class Confidence:
    """The factors of the confidence and their product (``value``, clipped to [0, 1]).

    Attributes:
        explained: atoms that sit on a reconstructed site.
        stability: plateau length of the space group / ``stable_plateau`` (capped at 1).
        support: median copies of a site in the particle, (m - 1) / 3 capped to [0, 1].
        consistency: accepted translations that fit the lattice.
        fit: the atoms scatter about their sites no more than the translation residuals
            predict (capped at 1).
        completeness: sites seen, not restored; halved for a low-support lattice.
    """

    explained: float
    stability: float
    support: float
    consistency: float
    fit: float
    completeness: float

    @property
    def value(self) -> float:
        """The product, in [0, 1]."""
        return float(np.clip(self.explained * self.stability * self.support * self.consistency
                             * self.fit * self.completeness, 0.0, 1.0))


def confidence(found: LatticeSearch, lattice: ConsolidatedLattice, sites: SiteFit,
               symmetry: SymmetryChoice, *, stable_plateau: int) -> Confidence:
    """The confidence factors of one solution."""
    s0 = found.accepted.rms_angstrom
    # a wrong lattice smears every atom; a relaxed surface shell moves a minority of them:
    # the typical atom's scatter (robust rms) is what is compared
    rms = sites.robust_rms_angstrom
    stability = min(1.0, symmetry.sweep.plateau_length / float(stable_plateau))
    support = float(min(1.0, max(0.0, (np.median(sites.counts) - 1.0) / 3.0)))
    consistency = max(0.0, 1.0 - lattice.n_inconsistent / max(1, lattice.n_accepted))
    # the atoms scatter about their sites as much as the translations said they would
    # (sqrt(3) sigma vs sqrt(6) sigma); a wrong lattice smears the sites far more. A real
    # particle's lattice is strained: its measured spread adds to what the sites may scatter
    expected_rms = 2.0 * s0 / np.sqrt(2.0) + 2e-3 + LATTICE_SPREAD_FACTOR * sites.lattice_spread_angstrom
    fit = float(min(1.0, expected_rms / rms)) if rms > 0 else 1.0
    n_restored = symmetry.n_restored
    completeness = 1.0 - n_restored / float(symmetry.n_sites_seen + n_restored)  # restored sites are inferred
    if found.low_support:
        completeness *= 0.5
    return Confidence(float(sites.explained_fraction), float(stability), support, float(consistency),
                      fit, float(completeness))
