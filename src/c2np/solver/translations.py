"""Records of accepted lattice translations (what a search hands on)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["AcceptedTranslations", "PartialTranslations"]


@dataclass(frozen=True, eq=False)
class AcceptedTranslations:
    """A basis and the translations that support it.

    Attributes:
        basis: (3, 3) shortest three independent accepted translations (rows, Å).
        vectors: (m, 3) accepted (refined) translations (Å).
        weights: (m,) in-particle images of each.
        rms_angstrom: rms residual of the best candidate (Å; inf when none was matched).
        tolerance_angstrom: largest residual accepted (Å).
        n_prescreened: candidates that went through the pre-screen.
        n_scored: candidates scored in full.
    """

    basis: np.ndarray
    vectors: np.ndarray
    weights: np.ndarray
    rms_angstrom: float
    tolerance_angstrom: float
    n_prescreened: int
    n_scored: int


@dataclass(frozen=True, eq=False)
class PartialTranslations:
    """What a failed search accepted (kept for the low-support fallback).

    Attributes:
        vectors, weights: (m, 3) accepted translations (images of two elements) and their
            in-particle image counts.
        loose_vectors, loose_weights: (l, 3) translations that map the particle onto itself
            before the rule that asks for images of two elements, and their counts.
        rms_angstrom, tolerance_angstrom, n_prescreened, n_scored: as in
            :class:`AcceptedTranslations`.
    """

    vectors: np.ndarray
    weights: np.ndarray
    loose_vectors: np.ndarray
    loose_weights: np.ndarray
    rms_angstrom: float
    tolerance_angstrom: float
    n_prescreened: int
    n_scored: int
