"""The compiled kernels of the assignment (numba) in one namespace, as the Python side
uses them (:func:`c2np.assignment.grid._kernels`): the auction and its graph
(:mod:`~c2np.assignment._auction_kernels`), the uniform grid
(:mod:`~c2np.assignment._grid_kernels`) and the k-d tree
(:mod:`~c2np.assignment._tree_kernels`). Imports numba."""

from __future__ import annotations

from c2np.assignment._auction_kernels import (
    auction,
    csr_merge,
    edge_costs,
    greedy_pairing,
    row_minima,
)
from c2np.assignment._grid_kernels import (
    bounds,
    cell_weights,
    centroid_rms,
    far_queries,
    grid_build,
    grid_knn,
    grid_min_weighted,
    occupied_cells,
    offset_knn,
    radius_pairs,
)
from c2np.assignment._tree_kernels import (
    kdtree_build,
    kdtree_knn,
    kdtree_nearest,
)

__all__ = [
    "auction",
    "bounds",
    "cell_weights",
    "centroid_rms",
    "csr_merge",
    "edge_costs",
    "far_queries",
    "greedy_pairing",
    "grid_build",
    "grid_knn",
    "grid_min_weighted",
    "kdtree_build",
    "kdtree_knn",
    "kdtree_nearest",
    "occupied_cells",
    "offset_knn",
    "radius_pairs",
    "row_minima",
]
