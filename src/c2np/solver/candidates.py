"""Step 3 of the solver: candidate lattice translations (differences between atoms)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from c2np.errors import C2NPNoAnswerError
from c2np.solver.frame import ParticleFrame
from c2np.solver.geometry import whole_shells
from c2np.solver.neighbours import NeighbourScale
from c2np.solver.settings import SolverSettings

__all__ = ["CandidateTranslations", "candidate_translations"]

#: Generic direction: a candidate and its negative are one translation, kept with this sign.
_SIGN_DIRECTION = np.array([0.5773, 0.3090, 0.7557])


@dataclass(frozen=True, eq=False)
class CandidateTranslations:
    """Deduplicated difference vectors, sorted by length, and the atoms that score them.

    Attributes:
        vectors: (m, 3) candidate translations (Å), shortest first.
        elements: (k,) the distinct atomic numbers, ascending.
        n_species: elements with at least two atoms.
        reference_element: atomic number of the rarest element with enough atoms.
        origins: (o,) reference-element atoms closest to the centre (origins of candidates).
        ref_probe: (q,) central reference-element atoms of the pre-screen.
    """

    vectors: np.ndarray
    elements: np.ndarray
    n_species: int
    reference_element: int
    origins: np.ndarray
    ref_probe: np.ndarray

    @property
    def n_candidates(self) -> int:
        """Candidates after deduplication."""
        return len(self.vectors)


def candidate_translations(frame: ParticleFrame, scale: NeighbourScale,
                           settings: SolverSettings) -> CandidateTranslations:
    """Differences between atoms of the rarest element (origins: the few closest to the
    centre; in small particles every element contributes while the pair budget lasts),
    merged by distance and sorted by length."""
    from scipy.spatial import cKDTree

    nums, rel, r_key = frame.numbers, frame.rel, frame.r
    by_centre = frame.by_centre
    zs, counts = np.unique(nums, return_counts=True)
    n_species = int(np.sum(counts >= 2))
    order_z = np.argsort(counts, kind="stable")
    ref_z = None
    for i in order_z:
        if counts[i] >= settings.min_reference_atoms:
            ref_z = int(zs[i])
            break
    if ref_z is None:
        raise C2NPNoAnswerError(f"solver input: no element has {settings.min_reference_atoms} or more "
                                "atoms; no lattice to find")
    ref_idx = by_centre[nums[by_centre] == ref_z]
    n_orig = int(np.clip(settings.max_candidate_pairs // len(ref_idx), settings.n_origins, len(ref_idx)))
    origins = ref_idx[:whole_shells(r_key[ref_idx], n_orig)]
    n_orig = len(origins)
    lmax = min(settings.max_translation_angstrom,
               2.0 * (frame.bounds.r_out - settings.boundary_margin_angstrom))
    pieces = [(rel[ref_idx][None, :, :] - rel[origins][:, None, :]).reshape(-1, 3)]
    budget = settings.max_candidate_pairs - n_orig * len(ref_idx)
    # small particles: a lattice vector may join no two atoms of the reference element,
    # so the other elements contribute candidates while the budget lasts
    for i in order_z:
        z = int(zs[i])
        if z == ref_z or counts[i] < 2 or budget < 2 * counts[i]:
            continue
        idx_z = by_centre[nums[by_centre] == z]
        k = whole_shells(r_key[idx_z], int(min(len(idx_z), budget // len(idx_z))))
        pieces.append((rel[idx_z][None, :, :] - rel[idx_z[:k]][:, None, :]).reshape(-1, 3))
        budget -= k * len(idx_z)
    vec = np.concatenate(pieces)
    lens = np.linalg.norm(vec, axis=1)
    keep = (lens > max(0.3, 0.5 * scale.d_same_min_angstrom)) & (lens <= lmax)
    vec = vec[keep]
    if len(vec) == 0:
        raise C2NPNoAnswerError("solver input: no candidate translations (particle too small)")
    s = np.sign(vec @ _SIGN_DIRECTION)
    s[s == 0] = 1.0
    vec = vec * s[:, None]
    # near-duplicates are merged by distance, not on a grid in the particle's frame (a
    # grid would merge differently in every orientation): in length order, a vector closer
    # than ``grid`` to a shorter one is dropped
    grid = max(0.5 * scale.tol_loose_angstrom, 0.05)
    vec = vec[np.lexsort((vec[:, 2], vec[:, 1], vec[:, 0], np.round(np.linalg.norm(vec, axis=1), 6)))]
    pairs = cKDTree(vec).query_pairs(grid, output_type="ndarray")
    if len(pairs):
        vec = vec[np.setdiff1d(np.arange(len(vec)), np.max(pairs, axis=1))]
    ref_probe = ref_idx[:whole_shells(r_key[ref_idx], settings.max_ref_probes)]
    return CandidateTranslations(vec, zs, n_species, ref_z, origins, ref_probe)
