"""How long a lattice translation a particle can show, and the search passes beyond the
first (longer translations, defective particles)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import brentq

from c2np.errors import C2NPNoAnswerError
from c2np.solver.candidates import CandidateTranslations, candidate_translations
from c2np.solver.frame import ParticleFrame
from c2np.solver.neighbours import NeighbourScale, neighbour_scale
from c2np.solver.search import LatticeSearch, find_lattice
from c2np.solver.settings import SolverSettings

__all__ = ["LatticePass", "overlap_fraction", "reach_fraction", "search_with_reach", "supported_reach_angstrom"]


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


@dataclass(frozen=True, eq=False)
class LatticePass:
    """The search pass that found the lattice and what it used.

    Attributes:
        found: the lattice search.
        cands: its candidate translations.
        scale: its neighbour scale (probe atoms).
        settings: the settings it ran with (the next steps use them too).
        kind: "standard", "long translations" or "defective particle".
        longest_tried_angstrom: longest candidate translation of the passes run (Å).
    """

    found: LatticeSearch
    cands: CandidateTranslations
    scale: NeighbourScale
    settings: SolverSettings
    kind: str
    longest_tried_angstrom: float


def _longest(cands: CandidateTranslations) -> float:
    return float(np.max(np.linalg.norm(cands.vectors, axis=1))) if len(cands.vectors) else 0.0


def search_with_reach(frame: ParticleFrame, scale: NeighbourScale, cands: CandidateTranslations,
                      settings: SolverSettings) -> LatticePass:
    """The lattice search up to ``max_translation_angstrom``; where it finds none, again up to
    the particle's supported reach with every atom a probe (long translations are seen only
    by atoms far from the centre), then once more with the match fractions of a defective
    particle (vacancies: a true translation lands on an atom for only ~1 - vacancy share of
    the images). A particle with no lattice raises :class:`C2NPNoAnswerError` stating the
    longest translation tried and the particle size a longer one needs."""
    longest = _longest(cands)
    try:
        return LatticePass(find_lattice(frame, scale, cands, settings), cands, scale, settings,
                           "standard", longest)
    except C2NPNoAnswerError as exc:
        first_error = exc
    reach = supported_reach_angstrom(frame, settings)
    passes: list[tuple[str, SolverSettings]] = []
    if reach > settings.max_translation_angstrom:
        passes.append(("long translations", replace(
            settings, max_translation_angstrom=reach, max_probe_atoms=max(settings.max_probe_atoms, frame.n_atoms),
            max_ref_probes=max(settings.max_ref_probes, frame.n_atoms))))
    passes.append(("defective particle", replace(
        settings, max_translation_angstrom=max(reach, settings.max_translation_angstrom),
        match_fraction=settings.defect_match_fraction,
        prescreen_match_fraction=min(settings.prescreen_match_fraction, settings.defect_match_fraction - 0.15))))
    for kind, alt in passes:
        try:
            alt_scale = neighbour_scale(frame, alt)
            alt_cands = candidate_translations(frame, alt_scale, alt)
        except C2NPNoAnswerError:
            continue
        longest = max(longest, _longest(alt_cands))
        try:
            return LatticePass(find_lattice(frame, alt_scale, alt_cands, alt), alt_cands, alt_scale, alt,
                               kind, longest)
        except C2NPNoAnswerError:
            continue
    frac = reach_fraction(settings.reach_overlap_fraction)
    raise C2NPNoAnswerError(
        f"{first_error}; translations up to {longest:.1f} Å were tried (the particle, {2 * frame.bounds.r_out:.1f} Å "
        f"across, supports {frac:.2f} x its diameter); a lattice translation of T Å needs a particle at "
        f"least T / {frac:.2f} Å across")
