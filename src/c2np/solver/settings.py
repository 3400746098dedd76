"""Every tolerance and budget of the solver, in one frozen record."""

from __future__ import annotations

import math
from dataclasses import dataclass

from c2np.errors import C2NPInputError

__all__ = ["DEFAULT_SYMPREC_SWEEP_ANGSTROM", "SolverSettings"]

#: Tolerances (Å) tried by the symmetry sweep, tight to loose.
DEFAULT_SYMPREC_SWEEP_ANGSTROM: tuple[float, ...] = (
    0.001, 0.002, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.45)


@dataclass(frozen=True, kw_only=True)
class SolverSettings:
    """Tolerances and budgets of :func:`c2np.solver.solve` (keyword-only; defaults are the
    measured ones of ``docs/explanation/solver.md``).

    Input and frame:
        min_atoms: fewer atoms than this is an error.
        boundary_margin_angstrom: images closer than this to the particle's convex hull
            (or outside it) are not asked to land on atoms (Å).
        hull_slack_angstrom: the negative margin of the exact re-search: atoms on the hull
            count, and this much rounding of stored coordinates is absorbed (Å).
        max_probe_atoms: central atoms used to score translations (all elements).
        min_same_element_distance_angstrom: a typical same-element nearest-neighbour
            distance below this is an error (overlapping atoms, Å).
        loose_tolerance_fraction: an image lands on an atom within this fraction of the
            same-element nearest-neighbour distance (at most ``max_loose_tolerance_angstrom``).
        max_loose_tolerance_angstrom: cap of that tolerance (Å).

    Candidate translations:
        min_reference_atoms: the reference element is the rarest one with at least this
            many atoms.
        n_origins: at least this many reference-element atoms (closest to the centre) are
            origins of candidate translations; more, up to all, while the number of
            origin-target pairs stays below ``max_candidate_pairs``.
        max_candidate_pairs: budget of candidate difference vectors before deduplication.
        max_translation_angstrom: longest lattice translation of the first search (Å);
            where it finds no lattice, translations up to the particle's supported reach
            are searched (``reach_overlap_fraction``).
        reach_overlap_fraction: a translation is supported when a ball of the particle's
            diameter and its shifted copy share at least this fraction of the volume (0.25:
            translations up to 0.56 x the diameter).
        defect_match_fraction: ``match_fraction`` of the search passes for defective
            particles (vacancies).
        strain_allowance: relative strain by which a translation's residual may grow with its
            length (0 in the first pass; ``defect_strain_allowance`` in the passes for
            strained or defective particles).
        defect_strain_allowance: that allowance in the passes for strained or defective
            particles.
        max_ref_probes: central reference-element atoms for the cheap pre-screen.

    Lattice search:
        chunk_size: candidates scored per batch.
        prescreen_match_fraction: a candidate seen by two or more reference images goes on
            to full scoring when at least this fraction of them lands on an atom.
        match_fraction: fraction of in-particle images that must land on an atom for a
            translation to be accepted.
        min_in_bounds: a candidate needs at least this many in-particle images.
        support_fraction: the best candidate needs at least this fraction of the largest
            image count among the scored ones.
        min_translation_tol_angstrom: smallest tolerance (Å) for an image to count as
            landing on an atom (clean particles; kept below the 1e-3 Å of the targets so that
            a pseudo-translation is never taken for a lattice vector).
        translation_z: a candidate is a lattice translation when its mean squared residual
            exceeds the best candidate's by less than this many standard errors.
        min_basis_sin: smallest sine between basis vectors (and of a vector out of the plane
            of two) for them to count as independent.
        rescore_max_atoms: particles up to this size are re-scored with a noise-sized
            boundary margin when the translations look clean (or none was found), and
            searched exactly when they leave a residual.
        low_support_max_third: third vectors tried by the low-support fallback.

    Consolidation:
        integrality_tol: largest distance of a fractional coefficient from an integer for
            a translation to be a lattice vector.
        best_triple_max_vectors: shortest accepted vectors searched for a finer basis.

    Sites and symmetry:
        symprec_sweep_angstrom: symmetry tolerances tried, tight to loose (Å); values below
            the estimated noise floor are skipped. Stored sorted.
        stable_plateau: consecutive sweep tolerances agreeing on a space group for full
            stability (the sweep stops there).
        max_restored_sites: sites restored by symmetry at most.
        min_restore_tol_angstrom: smallest tolerance (Å) of the lattice point group and of
            site restoration.
        restore_max_sites: cells with more sites are not completed by symmetry (the search
            costs rotations x sites^2 per reference site; a small particle of a catalog cell
            has at most a few dozen sites, a very noisy large one may have thousands).
    """

    min_atoms: int = 8
    boundary_margin_angstrom: float = 0.3
    hull_slack_angstrom: float = 1e-5
    max_probe_atoms: int = 160
    min_same_element_distance_angstrom: float = 0.05
    loose_tolerance_fraction: float = 0.45
    max_loose_tolerance_angstrom: float = 1.0
    min_reference_atoms: int = 4
    n_origins: int = 6
    max_candidate_pairs: int = 3000
    max_translation_angstrom: float = 16.0
    reach_overlap_fraction: float = 0.25
    defect_match_fraction: float = 0.7
    strain_allowance: float = 0.0
    defect_strain_allowance: float = 0.01
    max_ref_probes: int = 48
    chunk_size: int = 48
    prescreen_match_fraction: float = 0.75
    match_fraction: float = 0.9
    min_in_bounds: int = 3
    support_fraction: float = 0.25
    min_translation_tol_angstrom: float = 5e-4
    translation_z: float = 4.0
    min_basis_sin: float = 0.1
    rescore_max_atoms: int = 600
    low_support_max_third: int = 24
    integrality_tol: float = 0.12
    best_triple_max_vectors: int = 14
    symprec_sweep_angstrom: tuple[float, ...] = DEFAULT_SYMPREC_SWEEP_ANGSTROM
    stable_plateau: int = 3
    max_restored_sites: int = 2
    min_restore_tol_angstrom: float = 0.01
    restore_max_sites: int = 200

    def __post_init__(self) -> None:
        try:
            sweep = tuple(float(s) for s in self.symprec_sweep_angstrom)
        except (TypeError, ValueError) as exc:
            raise C2NPInputError(f"symprec_sweep_angstrom must be positive finite tolerances ({exc})") from exc
        if not sweep or any(not (s > 0 and math.isfinite(s)) for s in sweep):
            raise C2NPInputError("symprec_sweep_angstrom must be positive finite tolerances")
        object.__setattr__(self, "symprec_sweep_angstrom", tuple(sorted(sweep)))
        for name in ("min_atoms", "max_probe_atoms", "min_reference_atoms", "n_origins",
                     "max_candidate_pairs", "max_ref_probes", "chunk_size", "min_in_bounds",
                     "stable_plateau", "low_support_max_third", "best_triple_max_vectors",
                     "restore_max_sites"):
            if int(getattr(self, name)) < 1:
                raise C2NPInputError(f"solver settings: {name} must be at least 1, got {getattr(self, name)}")
        for name in ("boundary_margin_angstrom", "max_translation_angstrom", "loose_tolerance_fraction",
                     "max_loose_tolerance_angstrom", "min_translation_tol_angstrom", "translation_z",
                     "min_basis_sin", "integrality_tol", "min_restore_tol_angstrom"):
            value = float(getattr(self, name))
            if not (value > 0 and math.isfinite(value)):
                raise C2NPInputError(f"solver settings: {name} must be positive and finite, got {value}")
        for name in ("prescreen_match_fraction", "match_fraction", "support_fraction", "reach_overlap_fraction",
                     "defect_match_fraction", "strain_allowance", "defect_strain_allowance"):
            value = float(getattr(self, name))
            if not 0.0 <= value <= 1.0:
                raise C2NPInputError(f"solver settings: {name} must lie in [0, 1], got {value}")
