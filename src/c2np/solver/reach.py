"""How long a lattice translation a particle can show, and the search passes of the solver:
the first one (translations up to ``max_translation_angstrom``), then, where it gives no
answer or a doubtful one, a pass for strained or defective particles, and passes up to the
particle's supported reach."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import brentq

from c2np.solver.candidates import CandidateTranslations
from c2np.solver.frame import ParticleFrame
from c2np.solver.neighbours import NeighbourScale
from c2np.solver.search import LatticeSearch
from c2np.solver.settings import SolverSettings

__all__ = [
    "LONG_PASS_PROBE_FACTOR",
    "LatticePass",
    "SearchPass",
    "longest_candidate_angstrom",
    "overlap_fraction",
    "reach_fraction",
    "reach_refusal",
    "search_passes",
    "supported_reach_angstrom",
]

#: The passes up to the supported reach score candidates on this many times the usual probes
#: (long translations are seen only by atoms away from the centre).
LONG_PASS_PROBE_FACTOR = 4


def overlap_fraction(u: float) -> float:
    """Share of a ball that its copy shifted by ``u`` diameters still covers (the lens
    volume over the ball volume, ``(1 - u)^2 (1 + u / 2)`` for 0 <= u <= 1)."""
    u = float(np.clip(u, 0.0, 1.0))
    return (1.0 - u) ** 2 * (1.0 + 0.5 * u)


def reach_fraction(min_overlap: float) -> float:
    """The shift (in diameters) at which a ball and its shifted copy share ``min_overlap`` of
    its volume: the longest translation a particle supports, per Å of diameter."""
    return float(brentq(lambda u: overlap_fraction(u) - min_overlap, 0.0, 1.0))


def supported_reach_angstrom(frame: ParticleFrame, settings: SolverSettings) -> float:
    """Longest translation (Å) the particle supports: ``reach_fraction(reach_overlap_fraction)``
    x its diameter (twice the largest distance of an atom from the centroid), so that at
    least that share of the atoms have their image inside the particle."""
    return reach_fraction(settings.reach_overlap_fraction) * 2.0 * frame.bounds.r_out


@dataclass(frozen=True)
class SearchPass:
    """One pass of the lattice search: its name and the settings it runs with."""

    kind: str
    settings: SolverSettings


@dataclass(frozen=True, eq=False)
class LatticePass:
    """The search pass that found the lattice and what it used.

    Attributes:
        found: the lattice search.
        cands: its candidate translations.
        scale: its neighbour scale (probe atoms).
        settings: the settings it ran with (the next steps use them too).
        kind: "standard", "strained or defective particle", "long translations" or "long
            translations, strained or defective particle".
        longest_tried_angstrom: longest candidate translation of the passes run so far (Å).
    """

    found: LatticeSearch
    cands: CandidateTranslations
    scale: NeighbourScale
    settings: SolverSettings
    kind: str
    longest_tried_angstrom: float


def longest_candidate_angstrom(cands: CandidateTranslations) -> float:
    """Length of the longest candidate translation (Å; 0 without any)."""
    return float(np.max(np.linalg.norm(cands.vectors, axis=1))) if len(cands.vectors) else 0.0


def search_passes(frame: ParticleFrame, settings: SolverSettings) -> list[SearchPass]:
    """The passes, in order: as configured; for a strained or defective particle (the match
    fractions of vacancies: a true translation lands on an atom for only ~1 - vacancy share
    of the images, and a few long pseudo-translations may pass the strict rule instead; and a
    residual that may grow with the translation's length by the strain allowance); and, where
    the particle supports translations longer than ``max_translation_angstrom``, both again
    up to that reach with more probe atoms."""
    def strained(base: SolverSettings) -> SolverSettings:
        return replace(base, match_fraction=base.defect_match_fraction, strain_allowance=base.defect_strain_allowance,
                       prescreen_match_fraction=min(base.prescreen_match_fraction, base.defect_match_fraction - 0.15))

    passes = [SearchPass("standard", settings), SearchPass("strained or defective particle", strained(settings))]
    reach = supported_reach_angstrom(frame, settings)
    if reach > settings.max_translation_angstrom:
        probes = LONG_PASS_PROBE_FACTOR * settings.max_probe_atoms
        long_settings = replace(settings, max_translation_angstrom=reach,
                                max_probe_atoms=max(settings.max_probe_atoms, probes),
                                max_ref_probes=max(settings.max_ref_probes, probes))
        passes.append(SearchPass("long translations", long_settings))
        passes.append(SearchPass("long translations, strained or defective particle", strained(long_settings)))
    return passes


def reach_refusal(first_error: Exception, frame: ParticleFrame, settings: SolverSettings,
                  longest_tried_angstrom: float) -> str:
    """The refusal of a particle with no lattice: the first pass's reason, the longest
    translation tried, and the particle size a longer one needs."""
    frac = reach_fraction(settings.reach_overlap_fraction)
    return (f"{first_error}; translations up to {longest_tried_angstrom:.1f} Å were tried (the particle, "
            f"{2 * frame.bounds.r_out:.1f} Å across, supports {frac:.2f} x its diameter); a lattice translation "
            f"of T Å needs a particle at least T / {frac:.2f} Å across")
