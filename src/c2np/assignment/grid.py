"""Points in a uniform grid of cubic cells (:class:`PointGrid`): exact nearest neighbours
and close pairs by ring searches of cells, with queries far outside the points' box sent to
a k-d tree (:mod:`c2np.assignment._tree_kernels`). The compiled kernels (numba) are
imported on first use (:func:`_kernels`)."""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass

import numpy as np

__all__ = ["PointGrid", "nearest_neighbours", "close_pairs", "bounding_box"]

#: points per leaf of the k-d tree of the far queries (measured: 8-16 equally fast)
KDTREE_LEAF_SIZE = 8
#: a query whose cell has no point within this many cells (Chebyshev) goes to the k-d tree
FAR_EMPTY_REACH = 1


def nearest_neighbours(queries_angstrom: np.ndarray, points_angstrom: np.ndarray, *,
                       grid: _Grid | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest neighbour among ``points`` (n >= 1, 3) of every query (m, 3), Å.

    Returns ``(distances (m,) Å, indices (m,))``; the distances are those
    ``scipy.spatial.cKDTree.query`` gives (``sqrt(dx² + dy² + dz²)`` in float64). A grid
    search (rings of cells, a cell skipped when its box is farther than the best so far);
    queries far outside the points' box (when there are many) go to a k-d tree with tight
    node boxes instead (``kdtree_nearest``), where the grid would visit too many cells.
    ``grid``: a :class:`PointGrid` of ``points``.
    """
    q = np.ascontiguousarray(queries_angstrom, dtype=np.float64).reshape(-1, 3)
    g = grid if grid is not None else _Grid.build(points_angstrom)
    dist = np.empty(len(q))
    idx = np.empty(len(q), dtype=np.int64)
    far = _far(q, g)
    if int(np.count_nonzero(far)) > max(64, len(q) // 16):
        kern = _kernels()
        tree = kern.kdtree_build(g.points, KDTREE_LEAF_SIZE)
        v, i = kern.kdtree_nearest(*tree, np.ascontiguousarray(q[far]))
        dist[far], idx[far] = np.sqrt(v), i
        near = np.flatnonzero(~far)
    else:
        near = np.arange(len(q))
    if len(near):
        # the weighted search with zero weights and no bound: the plain nearest neighbour
        v, i = _kernels().grid_min_weighted(g.sorted_points, np.zeros(len(g.sorted_points)),
                                            np.zeros(len(g.cell_start) - 1), g.order, g.cell_start,
                                            g.origin, g.h, g.dims, q[near], np.full(len(near), np.inf),
                                            g.slack)
        dist[near], idx[near] = np.sqrt(v), i
    return dist, idx


def close_pairs(queries_angstrom: np.ndarray, grid: _Grid, radius_angstrom: float
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (query i, point j) pair with ``|q_i − p_j| <= radius`` (plus a relative 1e-9):
    ``(i, j, distance Å)``, distances as :func:`nearest_neighbours` computes them. ``grid``
    must have a cell side above the radius (``PointGrid.build(..., min_side=1.000001 radius)``)."""
    q = np.ascontiguousarray(queries_angstrom, dtype=np.float64).reshape(-1, 3)
    r2 = (float(radius_angstrom) * (1.0 + 1e-9)) ** 2
    if grid.h * grid.h < r2:
        raise ValueError("close_pairs: the grid's cells are smaller than the radius")
    kern = _kernels()
    indptr, cols = kern.radius_pairs(grid.sorted_points, grid.order, grid.cell_start,
                                     grid.origin, grid.h, grid.dims, q, r2)
    w, _ = kern.edge_costs(q, grid.points, indptr, cols, 1.0, 1)
    rows = np.repeat(np.arange(len(q), dtype=np.int64), np.diff(indptr))
    return rows, cols, np.sqrt(w)


@dataclass(frozen=True)
class _Grid:
    """Points sorted into a uniform grid of cubic cells (see the kernels' ``grid_build``),
    with the neighbour offsets of the offset-list queries."""

    points: np.ndarray
    sorted_points: np.ndarray  # in cell order
    order: np.ndarray
    cell_start: np.ndarray
    origin: np.ndarray
    h: float
    dims: np.ndarray
    slack: float
    offsets: np.ndarray
    off_d2: np.ndarray

    @classmethod
    def build(cls, points: np.ndarray, *, per_cell: float = 2.0, reach: int = 3,
              min_side: float = 0.0) -> _Grid:
        """Cells of about ``per_cell`` points (from the occupied volume), side at least
        ``min_side`` (Å) and 1/1024 of the extent, at most 8 n + 64 cells; offsets up to
        ``reach`` cells."""
        kern = _kernels()
        x = np.ascontiguousarray(points, dtype=np.float64)
        lo, hi, amax = bounding_box(x)
        ext = hi - lo
        vol = float(np.prod(np.maximum(ext, 1e-3)))
        h = max((per_cell * vol / len(x)) ** (1.0 / 3.0), 1e-6)
        # the occupied fraction of the box: refine once from a first grid's occupancy
        dims = np.floor(ext / h).astype(np.int64) + 1
        if _cells(dims) <= 8 * len(x) + 64:
            occupied = int(kern.occupied_cells(x, lo, h, dims))
            h = max((per_cell * occupied * h ** 3 / len(x)) ** (1.0 / 3.0), 1e-6)
        h = max(h, float(ext.max()) / 1024.0, min_side)
        dims = np.floor(ext / h).astype(np.int64) + 1
        while _cells(dims) > 8 * len(x) + 64:
            h *= 1.25
            dims = np.floor(ext / h).astype(np.int64) + 1
        slack = 1e-9 + 64.0 * float(np.spacing(float(amax) + float(ext.max())))
        order, start = kern.grid_build(x, lo, h, dims)
        off, l1, gap_cells = _offsets(reach)
        d2 = np.maximum(gap_cells * h - slack, 0.0) ** 2
        o = np.lexsort((l1, d2))
        return cls(x, np.ascontiguousarray(x[order]), order, start, lo, h, dims, slack,
                   np.ascontiguousarray(off[o]), np.ascontiguousarray(d2[o]))

    @property
    def radius_graph_r2(self) -> float:
        """Squared radius (Å²) of :meth:`radius_graph`: 0.999 × the cell side, squared."""
        r = 0.999 * self.h
        return r * r

    def radius_graph(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """CSR (by query) of the pairs closer than 0.999 × the cell side: every pair whose
        ``|q − p|²`` (computed as the kernels do) is below :attr:`radius_graph_r2`."""
        return _kernels().radius_pairs(self.sorted_points, self.order, self.cell_start, self.origin,
                                       self.h, self.dims,
                                       np.ascontiguousarray(queries, dtype=np.float64),
                                       self.radius_graph_r2)

    def knn(self, queries: np.ndarray, k: int, weights: np.ndarray | None = None,
            bound: np.ndarray | None = None, *, exhaustive: bool = True
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(m, k) smallest ``|q − p|² + w`` (w >= 0) below ``bound``, their indices (-1
        where fewer qualify), and per query whether the search was complete: the offset
        list first, then (``exhaustive``) a ring search where it fell short. Without it, a
        query left incomplete has only been compared with the points within the offset
        list's reach; every other point is at least ``reach_d2`` (Å²) away."""
        kern = _kernels()
        q = np.ascontiguousarray(queries, dtype=np.float64)
        w = np.zeros(len(self.points)) if weights is None else np.ascontiguousarray(weights)
        b = np.full(len(q), np.inf) if bound is None else np.ascontiguousarray(bound, dtype=np.float64)
        sw, cw = kern.cell_weights(self.order, self.cell_start, w)
        vals, idx, complete = kern.offset_knn(self.sorted_points, self.order, self.cell_start,
                                              self.origin, self.h, self.dims, sw, cw,
                                              self.offsets, self.off_d2, q, int(k), b)
        redo = np.flatnonzero(~complete)
        if exhaustive and len(redo):
            v2, i2 = kern.grid_knn(self.points, self.order, self.cell_start, self.origin,
                                   self.h, self.dims, w, q[redo], int(k), b[redo], self.slack)
            vals[redo], idx[redo] = v2, i2
            complete[redo] = True
        return vals, idx, complete

    @property
    def reach_d2(self) -> float:
        """Smallest squared distance from a point of a cell to a cell beyond the offsets."""
        return max(float(np.abs(self.offsets).max()) * self.h - self.slack, 0.0) ** 2


def _cells(dims: np.ndarray) -> int:
    """Number of cells of a grid of ``dims`` (3,) cells (exact Python integers)."""
    return int(dims[0]) * int(dims[1]) * int(dims[2])


def bounding_box(points_angstrom: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``(lo (3,), hi (3,), largest |coordinate|)`` of ``(n, 3)`` float64 points, n >= 1, in
    one compiled pass (the values of ``x.min(axis=0)``, ``x.max(axis=0)`` and
    ``abs(x).max()``, which NumPy computes slowly for an ``(n, 3)`` array)."""
    lo, hi, amax = _kernels().bounds(np.ascontiguousarray(points_angstrom, dtype=np.float64))
    return lo, hi, float(amax)


@functools.cache
def _offsets(reach: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cell offsets within ``reach`` (n, 3), their L1 norms and the norm of their gaps in
    cells (``max(|o| - 1, 0)``; times the side: the smallest distance between the cells)."""
    r = np.arange(-reach, reach + 1)
    off = np.stack(np.meshgrid(r, r, r, indexing="ij"), axis=-1).reshape(-1, 3)
    gap = np.sqrt((np.maximum(np.abs(off) - 1, 0) ** 2).sum(axis=1).astype(np.float64))
    for a in (off, gap):
        a.setflags(write=False)
    l1 = np.abs(off).sum(axis=1)
    l1.setflags(write=False)
    return off, l1, gap


def _far(queries: np.ndarray, grid: _Grid) -> np.ndarray:
    """(m,) True for the ``(m, 3)`` queries a ring search of ``grid`` serves badly: outside its
    box widened by one cell, or with no point within :data:`FAR_EMPTY_REACH` cells of their
    cell (e.g. a particle's atoms beyond a prediction of the wrong size, or in the empty
    corners of a ball's box); they go to a k-d tree instead. Routing only: both are exact."""
    return _kernels().far_queries(np.ascontiguousarray(queries, dtype=np.float64), grid.cell_start,
                                  grid.origin, grid.h, grid.dims, FAR_EMPTY_REACH)


PointGrid = _Grid  # public name: points in a uniform grid of cells (nearest_neighbours, close_pairs)


@functools.cache
def _kernels() -> types.ModuleType:
    """The compiled kernels (:mod:`c2np.assignment._kernels`, numba), imported on first use."""
    from c2np.assignment import _kernels

    return _kernels
