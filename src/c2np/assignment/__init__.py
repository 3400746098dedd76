"""Minimum squared-distance one-to-one assignment between two point sets, with a certificate.

Used by the matched RMSD (contract §6): every point of the smaller set ``S`` (``(n_s, 3)`` Å) is
paired with a distinct point of the larger set ``L`` (``(n_l, 3)`` Å) so that
``Σ |s − l|²`` (Å²) is minimal. :func:`min_sq_assignment` returns the value of a valid
pairing (an upper bound), a certified lower bound of the optimum, and whether the two
meet (then the value is the optimum); its work is bounded for any input.

Method (docs/explanation/metrics.md, "Matched RMSD: how the assignment is found"):

1. nearest neighbours of ``S`` all distinct: pairing each with its nearest is optimal;
2. small sets (``n_s · n_l <= 40,000``): dense ``scipy.optimize.linear_sum_assignment``;
3. otherwise the pairs closer than a radius (about 16 partners per point), solved by a
   compiled ε-scaling auction (:mod:`c2np.assignment._auction_kernels`) on integer costs, and
   certified over *all* ``n_s · n_l`` pairs by LP duality: any column prices ``p`` give
   the lower bound ``LB = Σ_s min_l (|s − l|² + p_l) + (n_l − n_s) min_l p_l − Σ_l p_l``,
   each minimum found exactly by a grid search that prunes cells by their smallest price.
   Pairs outside the graph that undercut a row's best are added (after the coarse
   phases, and again after the fine ones, at most ``max_rounds`` times) until the bound
   meets the value; otherwise both are reported with their gap;
4. sets that differ in centre or size (a prediction of the wrong size or place): path 3 on
   the smaller set mapped onto the larger one's centroid and RMS radius, valued and
   certified in the original coordinates through an exact identity of the pair costs
   (:func:`~c2np.assignment.aligned._aligned_assignment`), where the sparse graph of the sets as they are would miss
   the optimal pairs.

Modules: :mod:`~c2np.assignment.solve` (:func:`min_sq_assignment`, paths 1-2 and the choice),
:mod:`~c2np.assignment.auction` (path 3), :mod:`~c2np.assignment.aligned` (path 4),
:mod:`~c2np.assignment.grid` (:class:`PointGrid`, nearest neighbours, close pairs) and
:mod:`~c2np.assignment.result`; the compiled kernels (numba) of the auction, the grid and
the k-d tree are ``_auction_kernels``, ``_grid_kernels`` and ``_tree_kernels``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from c2np._lazy import lazy_getattr

# name -> the module that defines it (resolved on first use, PEP 562)
_EXPORTS: dict[str, str] = {
    "AssignmentResult": "c2np.assignment.result",
    "min_sq_assignment": "c2np.assignment.solve",
    "nearest_neighbours": "c2np.assignment.grid",
    "close_pairs": "c2np.assignment.grid",
    "PointGrid": "c2np.assignment.grid",
    "bounding_box": "c2np.assignment.grid",
    "FAR_RMSD_ANGSTROM": "c2np.assignment.result",
    "FAR_REL_GAP": "c2np.assignment.result",
}

__all__ = [*_EXPORTS]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from c2np.assignment.grid import PointGrid, bounding_box, close_pairs, nearest_neighbours
    from c2np.assignment.result import FAR_REL_GAP, FAR_RMSD_ANGSTROM, AssignmentResult
    from c2np.assignment.solve import min_sq_assignment


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
