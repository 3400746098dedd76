"""Step 5 of the solver: consolidation of the accepted translations into one reduced lattice
(integrality check, spurious translations dropped, least squares, Niggli reduction)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from c2np.errors import C2NPNoAnswerError
from c2np.solver.frame import ParticleFrame
from c2np.solver.geometry import best_triple, coset_representatives, niggli
from c2np.solver.neighbours import NeighbourScale
from c2np.solver.scoring import score_batch
from c2np.solver.search import LatticeSearch
from c2np.solver.settings import SolverSettings

__all__ = ["ConsolidatedLattice", "consolidate_lattice"]


@dataclass(frozen=True, eq=False)
class ConsolidatedLattice:
    """The lattice the accepted translations define.

    Attributes:
        lattice_angstrom: (3, 3) Niggli-reduced lattice rows in the particle's frame (Å).
        n_accepted: accepted translations after spurious ones were dropped.
        n_inconsistent: dropped or still non-integral translations.
    """

    lattice_angstrom: np.ndarray
    n_accepted: int
    n_inconsistent: int


def consolidate_lattice(found: LatticeSearch, frame: ParticleFrame, scale: NeighbourScale,
                        settings: SolverSettings) -> ConsolidatedLattice:
    """An accepted vector that is not an integer combination of the basis is checked through
    the short vectors it implies and dropped if they fail; otherwise a search over triples
    finds the finer lattice. The basis is then refined by least squares over all integral
    translations and Niggli-reduced. Raises C2NPInputError for a degenerate lattice."""
    acc = found.accepted
    basis, acc_vec, acc_w, tol_acc = acc.basis, acc.vectors, acc.weights, acc.tolerance_angstrom
    int_tol = settings.integrality_tol
    min_in_bounds = settings.min_in_bounds
    coef = acc_vec @ np.linalg.inv(basis)
    nonint = np.max(np.abs(coef - np.round(coef)), axis=1) > int_tol
    n_inconsistent = 0
    if nonint.any():
        # an accepted vector that is not an integer combination of the basis implies a finer
        # lattice, hence a short vector (its coset representative). Score the shortest
        # implied vectors directly: when they fail, the accepted vector was a
        # pseudo-translation seen through too few images (e.g. all from one sublattice)
        spurious = np.zeros(len(acc_vec), dtype=bool)
        bnd_used = frame.bounds.with_margin(found.margin_angstrom)
        probe_pos = frame.rel[scale.probe]
        probe_key = frame.positions4[scale.probe, 3]
        for i in np.flatnonzero(nonint):
            implied = coset_representatives(acc_vec[i], basis)
            implied = implied[np.argsort(np.linalg.norm(implied, axis=1))[:4]]
            sc = score_batch(implied, probe_pos, probe_key, frame.tree, frame.positions4, bnd_used,
                             scale.tol_loose_angstrom)
            ok_i = [len(rr) >= min_in_bounds and np.mean(np.isfinite(rr)) >= settings.match_fraction
                    and m_i <= tol_acc ** 2 for rr, m_i in zip(sc.residuals, sc.ms)]
            refuted_i = [len(rr) >= min_in_bounds and not ok for rr, ok in zip(sc.residuals, ok_i)]
            spurious[i] = any(refuted_i) and not any(ok_i)
        n_inconsistent = int(spurious.sum())
        acc_vec, acc_w, coef, nonint = acc_vec[~spurious], acc_w[~spurious], coef[~spurious], nonint[~spurious]
    if nonint.any():
        better = best_triple(acc_vec, max_vectors=settings.best_triple_max_vectors, int_tol=int_tol,
                             min_sin=settings.min_basis_sin)
        if better is not None:
            basis = better
            coef = acc_vec @ np.linalg.inv(basis)
            nonint = np.max(np.abs(coef - np.round(coef)), axis=1) > int_tol
        n_inconsistent += int(nonint.sum())
    good = ~nonint
    ncoef = np.round(coef[good])
    w = np.sqrt(acc_w[good])[:, None]
    sol, *_ = np.linalg.lstsq(ncoef * w, acc_vec[good] * w, rcond=None)
    lattice = niggli(sol)
    if abs(np.linalg.det(lattice)) < 1e-3:
        raise C2NPNoAnswerError("solver input: no lattice found (degenerate translations)")
    return ConsolidatedLattice(lattice, len(acc_vec), int(n_inconsistent))
