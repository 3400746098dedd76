"""The paper's pair-histogram metric: the RDF energy of density-normalised
histograms (``paper_rdf_energy``), as the C2NP paper defines it."""

from __future__ import annotations

import numpy as np

from c2np.metrics.registry import RDF_R_MAX_ANGSTROM

__all__ = [
    "density_normalised_histogram",
    "rdf_energy",
]


def density_normalised_histogram(counts: np.ndarray, *,
                                 r_max_angstrom: float = RDF_R_MAX_ANGSTROM) -> np.ndarray:
    """``h_k = c_k / (Σ c · Δ)`` in 1/Å (numpy ``density=True``: integrates to 1 over
    ``[0, r_max]``), with ``Δ = r_max / n_bins``; all zeros when there are no pairs."""
    c = np.asarray(counts, dtype=np.float64)
    total = float(c.sum())
    if total == 0:
        return np.zeros_like(c)
    return c / (total * (r_max_angstrom / len(c)))


def rdf_energy(counts_pred: np.ndarray, counts_ref: np.ndarray, *,
               r_max_angstrom: float = RDF_R_MAX_ANGSTROM) -> float:
    """Paper's "RDF energy" ``Σ_k (h_P,k − h_G,k)²`` (1/Å²) of density-normalised histograms."""
    hp = density_normalised_histogram(counts_pred, r_max_angstrom=r_max_angstrom)
    hg = density_normalised_histogram(counts_ref, r_max_angstrom=r_max_angstrom)
    return float(np.sum((hp - hg) ** 2))
