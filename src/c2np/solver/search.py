"""Step 4 of the solver: the lattice search (translations scored in length order) and its
fallbacks for small particles (noise-sized margin, exact re-search, low-support third vector)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from c2np.errors import C2NPNoAnswerError
from c2np.solver.candidates import CandidateTranslations
from c2np.solver.frame import Bounds, ParticleFrame
from c2np.solver.geometry import greedy_basis
from c2np.solver.low_support import low_support_basis
from c2np.solver.neighbours import NeighbourScale
from c2np.solver.scoring import BatchScores, concatenate_scores, score_batch
from c2np.solver.settings import SolverSettings
from c2np.solver.translations import AcceptedTranslations, PartialTranslations

__all__ = ["LatticeSearch", "SearchOutcome", "find_lattice", "search_translations"]


@dataclass(frozen=True, eq=False)
class SearchOutcome:
    """One pass of the search: ``accepted`` (None when no basis was found), the best
    candidate's rms residual (Å, inf when none matched) and, for a failed pass whose every
    scored candidate could be judged, its partial translations."""

    accepted: AcceptedTranslations | None
    rms_angstrom: float
    partial: PartialTranslations | None


@dataclass(frozen=True, eq=False)
class LatticeSearch:
    """The search that found the lattice.

    Attributes:
        accepted: its basis and translations.
        margin_angstrom: hull clearance it used (Å; negative: the exact re-search).
        low_support: the third lattice vector rests on a single atom pair.
    """

    accepted: AcceptedTranslations
    margin_angstrom: float
    low_support: bool


def search_translations(frame: ParticleFrame, scale: NeighbourScale, cands: CandidateTranslations,
                        bnd: Bounds, settings: SolverSettings, *, min_in_bounds: int) -> SearchOutcome:
    """Score candidates in length order until three independent translations are accepted
    (and a margin beyond them is covered)."""
    rel, positions4, tree = frame.rel, frame.positions4, frame.tree
    tol_loose = scale.tol_loose_angstrom
    probe_pos = rel[scale.probe]
    probe_key = positions4[scale.probe, 3]
    ref_probe = cands.ref_probe
    vec = cands.vectors
    min_tol = settings.min_translation_tol_angstrom
    batches: list[BatchScores] = []
    basis = None
    tol_acc = np.inf
    s0 = np.inf
    accepted = np.zeros(0, dtype=bool)
    n_prescreened = 0
    start = 0
    while start < len(vec):
        chunk = vec[start:start + settings.chunk_size]
        start += len(chunk)
        n_prescreened += len(chunk)
        # cheap pre-screen on the central reference-element atoms only
        pre = score_batch(chunk, rel[ref_probe], positions4[ref_probe, 3], tree, positions4, bnd, tol_loose)
        frac_ref = np.array([np.mean(np.isfinite(rr)) if len(rr) else 0.0 for rr in pre.residuals])
        batch = chunk[(pre.n_in < 2) | (frac_ref >= settings.prescreen_match_fraction)]  # reject only on evidence
        if len(batch) == 0:
            continue
        batches.append(score_batch(batch, probe_pos, probe_key, tree, positions4, bnd, tol_loose))
        scores = concatenate_scores(batches)
        all_ref, all_n, all_elem = scores.refined, scores.n_in, scores.n_elem
        support_min = max(min_in_bounds, settings.support_fraction * float(all_n.max()))
        frac_m = np.array([np.mean(np.isfinite(rr)) if len(rr) else 0.0 for rr in scores.residuals])
        ms = scores.ms
        matched = (all_n >= min_in_bounds) & (frac_m >= settings.match_fraction)
        well = matched & (all_n >= support_min)
        if not well.any():
            continue
        i0 = int(np.flatnonzero(well)[np.argmin(ms[well])])
        ms0 = float(ms[i0])
        # a true translation leaves pure noise: its mean squared residual matches the best
        # candidate's within sampling error (each pair is seen twice, from +t and -t)
        rel_sd = np.sqrt(2.0 / (3.0 * np.maximum(all_n / 2.0, 1.0)) + 2.0 / (3.0 * max(all_n[i0] / 2.0, 1.0)))
        bound = np.maximum(ms0 * (1.0 + settings.translation_z * rel_sd), min_tol ** 2)
        if settings.strain_allowance > 0:
            # a strained particle (relaxed surface, strain gradient): the residual of a true
            # translation grows with its length, by about the strain times the length
            bound = bound + (settings.strain_allowance * np.linalg.norm(all_ref, axis=1)) ** 2
        diverse = (all_elem >= min(2, cands.n_species)) | (all_n >= 8)
        accepted = matched & (ms <= bound) & diverse
        s0 = float(np.sqrt(ms0))
        tol_acc = float(np.sqrt(np.max(bound[accepted]))) if accepted.any() else np.inf
        basis = greedy_basis(all_ref[accepted], min_sin=settings.min_basis_sin)
        if basis is not None:
            longest = float(np.max(np.linalg.norm(basis, axis=1)))
            # a basis that does not map the particle onto itself exactly may be the
            # sub-cell of a superstructure (perovskite tilts: sqrt(2) and 2 times
            # longer): then the search goes on to twice its length
            reach = 1.25 if s0 <= 10.0 * min_tol else 2.0
            if float(np.linalg.norm(chunk[-1])) > reach * longest + 0.5:
                break
    if basis is None:
        partial = None
        if len(accepted) and len(accepted) == len(concatenate_scores(batches).vectors):
            scores = concatenate_scores(batches)
            # the translations that map the particle onto itself, before the rule that
            # asks for images of two elements (kept for the low-support fallback)
            loose = matched & (ms <= bound)
            partial = PartialTranslations(scores.refined[accepted], scores.n_in[accepted].astype(float),
                                          scores.refined[loose], scores.n_in[loose].astype(float),
                                          s0, tol_acc, n_prescreened, len(scores.vectors))
        return SearchOutcome(None, s0, partial)
    scores = concatenate_scores(batches)
    found = AcceptedTranslations(basis, scores.refined[accepted], scores.n_in[accepted].astype(float),
                                 s0, tol_acc, n_prescreened, len(scores.vectors))
    return SearchOutcome(found, s0, None)


def find_lattice(frame: ParticleFrame, scale: NeighbourScale, cands: CandidateTranslations,
                 settings: SolverSettings) -> LatticeSearch:
    """The search at the fixed margin, then the fallbacks of small particles: a noise-sized
    margin when the translations look clean (or none was found), an exact search (every
    image in the hull, two images suffice) when the lattice leaves a residual, and the
    low-support third vector when only two translations are well supported. Raises
    C2NPInputError when no lattice is found."""
    bounds = frame.bounds
    n = frame.n_atoms
    margin0 = settings.boundary_margin_angstrom
    slack = settings.hull_slack_angstrom
    small = n <= settings.rescore_max_atoms
    low_support = False  # the third lattice vector rests on a single atom pair
    first = search_translations(frame, scale, cands, bounds, settings, min_in_bounds=settings.min_in_bounds)
    partial = first.partial  # accepted translations of the latest failed search
    found = first.accepted
    margin_used = margin0
    if found is None or (small and found.rms_angstrom < 0.05 * margin0):
        # the fixed margin guards against noise; when the translations show little noise (or
        # none was found) small particles are re-scored with a margin sized to the noise, so
        # that images near the surface, where long translations land, count too
        s_est = first.rms_angstrom
        # (atoms on the hull itself count: a hull vertex is inside the particle; the slack
        # absorbs rounding of stored coordinates)
        margin2 = float(3.0 * s_est - slack) if np.isfinite(s_est) else 0.5 * margin0
        if margin2 < margin0:
            again = search_translations(frame, scale, cands, bounds.with_margin(margin2), settings,
                                        min_in_bounds=settings.min_in_bounds)
            partial = again.partial if again.partial is not None else partial
            if again.accepted is not None:
                found, margin_used = again.accepted, margin2
    if small and (found is None or found.rms_angstrom > 10.0 * settings.min_translation_tol_angstrom):
        # a small particle whose best lattice leaves a residual (or none was found): every
        # image inside the hull is tested and two images suffice, so that long translations,
        # seen only by a few atom pairs near the surface, count. A clean particle is mapped
        # onto itself exactly by its true lattice; that result is kept when it fits clearly
        # better than the first
        exact = search_translations(frame, scale, cands, bounds.with_margin(-slack), settings,
                                    min_in_bounds=min(settings.min_in_bounds, 2))
        partial = exact.partial if exact.partial is not None else partial
        if exact.accepted is not None and (found is None or exact.rms_angstrom < 0.5 * found.rms_angstrom):
            found, margin_used = exact.accepted, -slack
        elif exact.accepted is None and found is None and partial is not None:
            low = low_support_basis(partial, frame.rel, frame.numbers, scale.d_same_min_angstrom, settings)
            if low is not None:
                found, margin_used, low_support = low, -slack, True
    if found is None:
        raise C2NPNoAnswerError("solver input: no lattice found (no three independent translations "
                                "map the particle onto itself)")
    return LatticeSearch(found, float(margin_used), low_support)
