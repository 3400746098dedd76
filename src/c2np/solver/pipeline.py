"""The solver as a sequence of named steps (see :mod:`c2np.solver`)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from c2np.cells import UnitCell, crystal_system, lattice_parameters
from c2np.errors import C2NPInputError, C2NPNoAnswerError
from c2np.lattice import LatticeParameters
from c2np.particle import Particle
from c2np.solver.candidates import CandidateTranslations, candidate_translations
from c2np.solver.confidence import Confidence, confidence
from c2np.solver.consolidation import ConsolidatedLattice, consolidate_lattice
from c2np.solver.frame import ParticleFrame, particle_frame
from c2np.solver.neighbours import neighbour_scale
from c2np.solver.noncrystal import classify_noncrystal
from c2np.solver.ranking import RankedCandidate, rank_candidates
from c2np.solver.reach import LatticePass, longest_candidate_angstrom, reach_refusal, search_passes
from c2np.solver.result import SolverResult
from c2np.solver.search import LatticeSearch, find_lattice
from c2np.solver.settings import SolverSettings
from c2np.solver.sites import SiteFit, fit_sites
from c2np.solver.symmetry import SymmetryChoice, choose_symmetry
from c2np.solver.verification import Verification, verify_cell

__all__ = ["solve", "solve_particle"]

_DEFAULT_SETTINGS = SolverSettings()

#: An answer below this confidence is checked for five-fold twinning (never a space group),
#: and the next search pass is tried.
NONCRYSTAL_CHECK_CONFIDENCE = 0.5
#: The first pass's lattice is exact when its translations leave at most this many times the
#: residual floor ``min_translation_tol_angstrom``.
CLEAN_TRANSLATION_FACTOR = 10.0
#: Confidence factor of an answer of a pass with a strain allowance: the allowance hides a
#: distortion below it, so the group may be a pseudo-symmetric supergroup.
STRAINED_PASS_FACTOR = 0.85


def solve(numbers: np.ndarray, positions_angstrom: np.ndarray, *,
          settings: SolverSettings = _DEFAULT_SETTINGS, top_k: int = 1) -> SolverResult:
    """Recover the bulk crystal of a finite particle.

    Args:
        numbers: (n,) atomic numbers.
        positions_angstrom: (n, 3) Cartesian positions in Å (any frame, any order).
        settings: tolerances and budgets (:class:`SolverSettings`).
        top_k: ranked answers to return in ``result.candidates`` (space group, lattice,
            probability; :mod:`c2np.solver.ranking`), at least 1.

    Returns:
        A :class:`SolverResult`.

    Raises:
        C2NPInputError: malformed input, or no lattice could be found.
    """
    t_start = time.perf_counter()
    if int(top_k) < 1:
        raise C2NPInputError(f"top_k must be at least 1, got {top_k}")
    frame = particle_frame(numbers, positions_angstrom, settings)
    try:
        result = _solve_frame(frame, settings, top_k=int(top_k), t_start=t_start)
    except C2NPNoAnswerError as exc:
        seen = classify_noncrystal(frame.rel, lattice_found=False)
        if seen is None:
            raise
        raise C2NPNoAnswerError(f"solver input: not a crystal: {seen.description}; no space group "
                                f"({exc})") from exc
    if result.confidence < NONCRYSTAL_CHECK_CONFIDENCE:
        seen = classify_noncrystal(frame.rel, lattice_found=True)
        if seen is not None:
            raise C2NPNoAnswerError(f"solver input: not a crystal: {seen.description}; no space group "
                                    f"(the best lattice explains it with confidence {result.confidence:.2f})")
    return result


def _solve_frame(frame: ParticleFrame, settings: SolverSettings, *, top_k: int, t_start: float) -> SolverResult:
    """Steps 2-11 of :func:`solve` on the particle's frame, pass after pass of the lattice
    search (:func:`~c2np.solver.reach.search_passes`) until one answers with confidence
    ``NONCRYSTAL_CHECK_CONFIDENCE`` or more; the most confident answer of the passes run, or
    the refusal of the first pass with the longest translation tried."""
    best: SolverResult | None = None
    first_error: C2NPNoAnswerError | None = None
    longest = 0.0
    for search_pass in search_passes(frame, settings):
        run = search_pass.settings
        try:
            scale = neighbour_scale(frame, run)
            cands = candidate_translations(frame, scale, run)
            longest = max(longest, longest_candidate_angstrom(cands))
            found = find_lattice(frame, scale, cands, run)
            lattice_pass = LatticePass(found, cands, scale, run, search_pass.kind, longest)
            result = _answer(frame, lattice_pass, top_k=top_k, t_start=t_start)
        except C2NPNoAnswerError as exc:
            first_error = first_error if first_error is not None else exc
            continue
        if best is None or result.confidence > best.confidence:
            best = result
        # an exact lattice (translations clean to the first pass's floor: an ideal carving) is
        # the answer whatever its confidence: the later passes' looser rules could only take a
        # pseudo-translation for a lattice vector
        clean = found.accepted.rms_angstrom <= CLEAN_TRANSLATION_FACTOR * run.min_translation_tol_angstrom
        if best.confidence >= NONCRYSTAL_CHECK_CONFIDENCE or (search_pass.kind == "standard" and clean):
            break
    if best is not None:
        return best
    assert first_error is not None
    raise C2NPNoAnswerError(reach_refusal(first_error, frame, settings, longest)) from first_error


def _answer(frame: ParticleFrame, lattice_pass: LatticePass, *, top_k: int, t_start: float) -> SolverResult:
    """Steps 5-11 on the lattice of one search pass."""
    found, cands, scale, settings = (lattice_pass.found, lattice_pass.cands, lattice_pass.scale,
                                     lattice_pass.settings)
    lattice = consolidate_lattice(found, frame, scale, settings)
    sites = fit_sites(frame.rel, frame.numbers, frame.by_centre, cands.elements,
                      frame.rel[cands.origins[0]], lattice.lattice_angstrom,
                      translation_rms_angstrom=found.accepted.rms_angstrom,
                      d_same_min_angstrom=scale.d_same_min_angstrom)
    symmetry = choose_symmetry(sites, settings)
    conf = confidence(found, lattice, sites, symmetry, stable_plateau=settings.stable_plateau)
    check = _verify(frame, sites, symmetry)
    if check.refusal is not None:
        raise C2NPNoAnswerError(f"solver input: the answer ({symmetry.spacegroup}) does not reproduce the "
                                f"particle: {check.refusal}")
    ranked = rank_candidates(sites.lattice_angstrom, symmetry, _confidence_value(conf, check, settings),
                             k=top_k, tolerances=settings.symprec_sweep_angstrom)
    return _result(frame, cands, found, lattice, sites, symmetry, conf, lattice_pass=lattice_pass,
                   check=check, ranked=ranked, t_start=t_start)


def _confidence_value(conf: Confidence, check: Verification, settings: SolverSettings) -> float:
    """The reported confidence: the product of the factors, the checks' factor, and
    ``STRAINED_PASS_FACTOR`` for a lattice found with a strain allowance."""
    return conf.value * check.factor * (STRAINED_PASS_FACTOR if settings.strain_allowance > 0 else 1.0)


def _verify(frame: ParticleFrame, sites: SiteFit, symmetry: SymmetryChoice) -> Verification:
    """The checks of step 9 on the chosen answer."""
    ds = symmetry.dataset
    assert symmetry.cell_frac is not None and symmetry.cell_numbers is not None
    return verify_cell(frame.numbers, sites.lattice_angstrom, symmetry.cell_frac, symmetry.cell_numbers,
                       np.asarray(ds.std_lattice_angstrom), np.asarray(ds.std_positions),
                       np.asarray(ds.std_numbers), symmetry.spacegroup,
                       symprec_angstrom=symmetry.symprec_angstrom, matched_fraction=sites.explained_fraction,
                       atoms_per_slot=sites.atoms_per_slot)


def _result(frame: ParticleFrame, cands: CandidateTranslations, found: LatticeSearch,
            lattice: ConsolidatedLattice, sites: SiteFit, symmetry: SymmetryChoice, conf: Confidence,
            *, lattice_pass: LatticePass, check: Verification, ranked: tuple[RankedCandidate, ...],
            t_start: float) -> SolverResult:
    """The result record: moyopy's standardized cell at the chosen tolerance, with the
    diagnostics of every step (``t_start``: ``time.perf_counter()`` at the start)."""
    import moyopy

    ds = symmetry.dataset
    number = symmetry.spacegroup
    std_lat = np.array(ds.std_lattice_angstrom, dtype=float)
    cell = UnitCell("identified", std_lat, np.array(ds.std_numbers, dtype=np.int64),
                    np.array(ds.std_positions, dtype=float))
    symbol = moyopy.SpaceGroupType(int(number)).hm_short.replace(" ", "")
    acc = found.accepted
    diagnostics: dict[str, Any] = {
        "reference_element": cands.reference_element,
        "inscribed_radius_angstrom": frame.bounds.r_in,
        "n_candidates": cands.n_candidates,
        "n_prescreened": acc.n_prescreened,
        "n_scored": int(acc.n_scored),
        "boundary_margin_angstrom": float(found.margin_angstrom),
        "n_translations_accepted": lattice.n_accepted,
        "n_translations_inconsistent": lattice.n_inconsistent,
        "translation_tolerance_angstrom": float(acc.tolerance_angstrom),
        "translation_rms_angstrom": float(acc.rms_angstrom),
        "cluster_radius_angstrom": sites.cluster_radius_angstrom,
        "site_rms_angstrom": float(sites.rms_angstrom),
        "n_sites": sites.n_sites,
        "n_stray_clusters": sites.n_stray_clusters,
        "n_sites_restored": symmetry.n_restored,
        "low_support_lattice": bool(found.low_support),
        "lattice_pass": lattice_pass.kind,
        "longest_translation_tried_angstrom": lattice_pass.longest_tried_angstrom,
        "max_translation_angstrom": float(lattice_pass.settings.max_translation_angstrom),
        "site_counts": sites.counts.tolist(),
        "explained_fraction": conf.explained,
        "symprec_floor_angstrom": symmetry.floor_angstrom,
        "symprec_ceiling_angstrom": (symmetry.ceiling_angstrom if np.isfinite(symmetry.ceiling_angstrom)
                                     else None),
        "symmetry_stopped_by": symmetry.sweep.stopped_by,
        "sweep": [[float(step.symprec_angstrom), step.spacegroup] for step in symmetry.sweep.steps],
        "plateau_length": int(symmetry.sweep.plateau_length),
        "stability": conf.stability,
        "repeat_support": conf.support,
        "translation_consistency": conf.consistency,
        "site_fit": conf.fit,
        "symmetry_library": "moyopy",
        "symmetry_library_version": str(moyopy.__version__),
        "verification": {"composition_deviation": check.composition_deviation,
                         "density_ratio": check.density_ratio, "atoms_per_slot": check.atoms_per_slot,
                         "matched_fraction": check.matched_fraction,
                         "spglib_spacegroup": check.spglib_spacegroup, "confidence_factor": check.factor},
        "degree_of_order": sites.degree_of_order,
        "n_antisite_atoms": sites.n_antisite_atoms,
        "lattice_spread_angstrom": sites.lattice_spread_angstrom,
        "elapsed_s": time.perf_counter() - t_start,
    }
    return SolverResult(
        lattice=LatticeParameters(*lattice_parameters(std_lat)), spacegroup=int(number),
        international=symbol, crystal_system=crystal_system(int(number)),
        confidence=_confidence_value(conf, check, lattice_pass.settings),
        cell=cell, primitive_lattice_angstrom=np.array(sites.lattice_angstrom),
        symprec_angstrom=symmetry.symprec_angstrom, n_atoms=frame.n_atoms, diagnostics=diagnostics,
        lattice_spread_angstrom=float(sites.lattice_spread_angstrom), degree_of_order=float(sites.degree_of_order),
        candidates=ranked)


def solve_particle(particle: Particle, *, settings: SolverSettings = _DEFAULT_SETTINGS,
                   top_k: int = 1) -> SolverResult:
    """:func:`solve` on a :class:`c2np.particle.Particle`."""
    return solve(particle.numbers, particle.positions_angstrom, settings=settings, top_k=top_k)
