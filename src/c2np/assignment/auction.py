"""Path 3 of the assignment: the pairs closer than a radius (about 16 partners per point)
solved by a compiled ε-scaling auction (:mod:`c2np.assignment._auction_kernels`) on integer
costs, and certified over all pairs by LP duality (:func:`_dual_bound`); pairs outside the
graph that undercut a row's best are added until the bound meets the value."""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from c2np.assignment.grid import (
    KDTREE_LEAF_SIZE,
    _far,
    _Grid,
    _kernels,
    bounding_box,
    nearest_neighbours,
)
from c2np.assignment.result import (
    EXACT_RTOL,
    FAR_REL_GAP,
    AssignmentResult,
    _far_rule,
    _pair_sum,
    _sum_above,
    _sum_below,
)

GRAPH_DEGREE = 16.0  # mean partners per point in the radius graph
MIN_DEGREE = 3  # points with fewer partners get their 3 nearest
ADD_K = 8  # pairs added per undercut row (its cheapest in c + p)
MIN_BUDGET_POINTS = 500  # the budget (solve.BIDS_PER_POINT per point) counts at least this many more points
EPS0_COLD = 1.0  # first ε: this times the mean nearest-neighbour cost (Å²)
EPS_MID = 1e-3  # end of the coarse stage: this times the median edge cost ...
MEDIAN_SAMPLE = 4096  # ... of about this many edges (every k-th)
EPS_FACTOR = 8  # ε-scaling factor
GIVE_UP_SHARE = 0.25  # more undercut rows than this after a fine stage: stop refining
EXHAUSTIVE_CELL_VISITS = 400  # per point: budget of exhaustive searches in a bound
FAR_EARLY_EPS = 1.0 / 64.0  # far from the nearest neighbours alone: first check at this ε / ε0
_SCALED_COST_MAX = 2.0 ** 50  # largest integer pair cost handed to the auction
#: far queries from which a k-d tree is built for them (below, the grid's ring search)
KDTREE_MIN_FAR_QUERIES = 64


def _sparse_assignment(small: np.ndarray, large: np.ndarray, d1: np.ndarray, *,
                       column_floor: np.ndarray | None = None, max_rounds: int,
                       bids_per_point: int, far_sum: float | None = None,
                       far_rel_gap: float = FAR_REL_GAP,
                       accept: Callable[[np.ndarray, float, tuple[np.ndarray, np.ndarray] | None],
                                        bool] | None = None
                       ) -> tuple[AssignmentResult, np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """Path 3 of :func:`min_sq_assignment` (``n_s <= n_l``, nearest neighbours not
    distinct; ``d1`` their distances). ``far_sum``: the bound (Å²) from which a relative
    RMSD gap of ``far_rel_gap`` is accepted (None: never); ``column_floor``: see
    :func:`min_sq_assignment`. Returns the result, the ``(n_s,)`` pairing whose value it
    reports (the larger-set partner of each smaller-set point) and the dual solution of its
    bound, ``(w (n_l,), u (n_s,))`` in Å² — column prices with min 0 and each row's
    smallest ``|s − l|² + w`` over all pairs, so that the bound is ``Σu − Σw`` — or None
    when the bound is the column bound. ``accept``: optional ``(pairing, bound, dual) -> bool``
    asked after the first pairing and after every stage; True stops there (the caller's own
    far rule, e.g. the aligned path's in the original coordinates)."""
    kern = _kernels()
    ns, nl = len(small), len(large)
    grid = _Grid.build(large, per_cell=GRAPH_DEGREE / (4.0 * math.pi / 3.0))  # side = radius
    indptr, indices = grid.radius_graph(small)
    lonely = np.flatnonzero(np.diff(indptr) < MIN_DEGREE)
    if len(lonely):
        jk = _knn_indices(grid, small[lonely], min(MIN_DEGREE, nl))
        ok = jk >= 0
        indptr, indices = kern.csr_merge(indptr, indices,
                                         np.repeat(lonely, jk.shape[1])[ok.reshape(-1)], jk[ok], nl)
    graph = _Graph.build(small, large, indptr, indices, _Graph.unit_for(small, large))
    # a pairing of every row keeps the balanced problem feasible and is a first value
    fallback = kern.greedy_pairing(graph.indptr, graph.indices, graph.cost, nl)
    left = np.flatnonzero(fallback < 0)
    lb0 = float(np.sum(d1 * d1))  # no pairing costs less than every point's nearest
    nearer: np.ndarray | None = None
    if len(left):  # rows whose partners were all taken: paired among the free columns in
        # order of x (this pairing's edges join the graph, as always); where this first
        # value may be the answer (a caller's acceptance, or the far rule on the first
        # pairing) also by nearness, and the cheaper of the two is the first value
        taken = np.zeros(nl, dtype=bool)
        taken[fallback[fallback >= 0]] = True
        free = np.flatnonzero(~taken)
        maybe = accept is not None
        if not maybe and far_sum is not None and lb0 >= far_sum:
            # the far rule can accept a completion of the greedy pairing only if its paired
            # rows plus each leftover row's nearest free column stay within the share
            from scipy.spatial import cKDTree

            paired = np.flatnonzero(fallback >= 0)
            d_free = np.asarray(cKDTree(large[free]).query(small[left], k=1)[0])
            least = float(np.sum((small[paired] - large[fallback[paired]]) ** 2)) + \
                float(np.sum(d_free ** 2))
            maybe = _far_rule(least, lb0, far_sum, far_rel_gap)
        if maybe:
            nearer = fallback.copy()
            nearer[left] = _pair_leftovers(small[left], large, free)
        fallback[left] = _pair_leftovers(small[left], large, free, near=False)
    best_ub = _pair_sum(small, large, fallback)
    best_cols = fallback
    if nearer is not None:
        value = _pair_sum(small, large, nearer)
        if value < best_ub:
            best_ub, best_cols = value, nearer
    best_lb = lb0
    dual: tuple[np.ndarray, np.ndarray] | None = (np.zeros(nl), d1 * d1)

    def accepted(lb: float) -> bool:
        """The best pairing so far with the bound ``lb`` meets the far rule or the caller's
        acceptance."""
        return _far_rule(best_ub, lb, far_sum, far_rel_gap) or \
            (accept is not None and accept(best_cols, lb, dual))

    if accepted(lb0):
        # the far rule on the first pairing: far off by the nearest neighbours alone and the
        # greedy pairing already within the accepted share (e.g. a prediction with several
        # times the atoms, where few nearest neighbours collide); no auction
        tol0 = EXACT_RTOL * (1.0 + best_ub)
        return AssignmentResult(best_ub, lb0, ns, best_ub - lb0 <= tol0, tolerance_angstrom2=tol0,
                                method="greedy", rounds=0), best_cols, dual
    # the distinct columns the graph reaches: a bincount (15x cheaper than np.unique)
    if len(left) > GIVE_UP_SHARE * ns and \
            np.count_nonzero(np.bincount(graph.indices, minlength=nl)) < GIVE_UP_SHARE * ns:
        # degenerate (e.g. every point of one set on a spot): the graph reaches few
        # points of the larger set, so no auction on it can find the optimum; report the
        # pairing and the certified bounds
        column = _column_bound(small, large, column_floor)
        if column > best_lb:
            best_lb, dual = column, None
        return AssignmentResult(best_ub, min(best_lb, best_ub), ns,
                                best_ub - best_lb <= EXACT_RTOL * (1.0 + best_ub),
                                tolerance_angstrom2=EXACT_RTOL * (1.0 + best_ub),
                                method="auction", rounds=0), best_cols, dual
    graph = graph.with_edges(small, large, np.arange(ns), fallback)
    tol = EXACT_RTOL * (1.0 + best_ub)
    budget = int(bids_per_point) * (nl + MIN_BUDGET_POINTS)
    eps_final = 0.25 * EXACT_RTOL * (1.0 + lb0) / nl  # Å²: n ε below the tolerance
    # the median edge cost sets the coarse stage's end only (a schedule, not a result):
    # from every k-th edge (at most about 4,096), not a partition of them all
    costs = graph.cost_angstrom2
    med = float(np.median(costs[::max(1, len(costs) // MEDIAN_SAMPLE)]))
    eps_mid = max(EPS_MID * med, eps_final)
    eps0 = EPS0_COLD * max(float(np.mean(d1 * d1)), 64.0 * eps_mid)
    prices = np.zeros(nl, dtype=np.int64)
    assign = np.full(ns, -1, dtype=np.int64)
    rounds = 0
    far_stop = False
    # coarse stage (cold): prices settle at eps_mid, and pairs outside the graph that
    # undercut it join before the fine phases, which then mostly run once
    stages = [(eps0, eps_mid, False)] + [(eps_mid, eps_final, True)] * max_rounds
    eps_early = FAR_EARLY_EPS * eps0
    if far_sum is not None and lb0 >= far_sum and eps_early > eps_mid:
        # far off by the nearest neighbours alone: a first bound part-way through the
        # coarse stage, which usually meets the far rule already
        stages = [(eps0, eps_early, False), (eps_early, eps_mid, False)] + stages[1:]
    for eps_hi, eps_lo, final in stages:
        if budget <= 0:
            break
        assign, prices, status, used = _solve(kern, graph, prices, assign, eps_hi, eps_lo,
                                              budget)
        budget -= used
        if assign[0] >= 0:
            value = _pair_sum(small, large, assign)
            if value < best_ub:
                best_ub, best_cols = value, assign.copy()
        else:
            assign = np.full(ns, -1, dtype=np.int64)
        tol = EXACT_RTOL * (1.0 + best_ub) + (ns + 2) * graph.unit
        lb, w, u_graph, u_all = _dual_bound(small, grid, prices, graph)
        if lb > best_lb:
            best_lb, dual = lb, (w, np.minimum(u_graph, u_all))
        rounds += final
        undercut = np.flatnonzero(u_all < u_graph - tol / ns)
        if status != 0 or best_ub - best_lb <= tol or (final and len(undercut) == 0):
            break
        if accepted(best_lb):
            far_stop = True
            break  # far off: the value is within the accepted share of the bound
        if final and len(undercut) > GIVE_UP_SHARE * ns:
            break  # the graph misses most of the optimum (a degenerate prediction)
        if eps_lo > eps_mid:
            continue  # the early far check: the coarse stage goes on, edges join after it
        if len(undercut):
            few = len(undercut) * (len(grid.cell_start) - 1) <= EXHAUSTIVE_CELL_VISITS * nl
            _, jk, _ = grid.knn(small[undercut], min(ADD_K, nl), weights=w,
                                bound=u_graph[undercut], exhaustive=few)
            ok = jk >= 0
            graph = graph.with_edges(small, large,
                                     np.repeat(undercut, jk.shape[1])[ok.reshape(-1)], jk[ok])
    if best_ub - best_lb > tol and not far_stop:
        column = _column_bound(small, large, column_floor)
        if column > best_lb:
            best_lb, dual = column, None
    best_lb = min(best_lb, best_ub)
    return AssignmentResult(best_ub, best_lb, ns, best_ub - best_lb <= tol,
                            tolerance_angstrom2=tol, method="auction", rounds=rounds), best_cols, dual


#: the first pairing's leftover rows take their nearest free columns in up to this many
#: greedy passes (each over their :data:`LEFTOVER_K` nearest); what is still left, in order of x
LEFTOVER_PASSES = 3
LEFTOVER_K = 8


def _pair_leftovers(rows: np.ndarray, large: np.ndarray, free: np.ndarray, *,
                    near: bool = True) -> np.ndarray:
    """Distinct partners (indices into ``large``, from ``free``) for the ``(m, 3)`` points
    ``rows`` that the greedy pairing left without one: with ``near``, greedy passes over each
    row's nearest free columns (:data:`LEFTOVER_PASSES`, :data:`LEFTOVER_K`); what is left,
    the free columns in order of x. Only a first value (an upper bound): any choice keeps
    the bounds certified."""
    m = len(rows)
    out = np.full(m, -1, dtype=np.int64)
    todo = np.arange(m)
    avail = np.asarray(free, dtype=np.int64)
    for _ in range(LEFTOVER_PASSES if near else 0):
        if len(todo) == 0 or len(avail) == 0:
            break
        from scipy.spatial import cKDTree

        k = min(LEFTOVER_K, len(avail))
        d, j = cKDTree(large[avail]).query(rows[todo], k=k)
        d, j = np.asarray(d).reshape(len(todo), k), np.asarray(j).reshape(len(todo), k)
        order = np.argsort(d[:, 0], kind="stable")  # the closest rows choose first
        got = _kernels().greedy_pairing(np.arange(0, len(todo) * k + 1, k, dtype=np.int64),
                                  np.ascontiguousarray(j[order].reshape(-1), dtype=np.int64),
                                  np.ascontiguousarray((d[order] ** 2).reshape(-1)), len(avail))
        hit = got >= 0
        out[todo[order[hit]]] = avail[got[hit]]
        used = np.zeros(len(avail), dtype=bool)
        used[got[hit]] = True
        avail = avail[~used]
        todo = np.flatnonzero(out < 0)
    if len(todo):
        avail = avail[np.argsort(large[avail, 0], kind="stable")]
        order = todo[np.argsort(rows[todo, 0], kind="stable")]
        out[order] = avail[np.linspace(0, len(avail) - 1, len(order)).round().astype(np.int64)]
    return out


def _knn_indices(grid: _Grid, queries: np.ndarray, k: int) -> np.ndarray:
    """``(m, k)`` indices of the k nearest grid points of every query (-1 where fewer).
    Queries far outside the grid's box (when there are many) go to a k-d tree
    (``kdtree_knn``), where the grid's ring search would cross many empty cells — e.g.
    every point of a particle against a prediction collapsed onto a spot."""
    far = _far(queries, grid)
    if int(np.count_nonzero(far)) <= KDTREE_MIN_FAR_QUERIES:
        return grid.knn(queries, k)[1]
    kern = _kernels()
    idx = np.empty((len(queries), k), dtype=np.int64)
    tree = kern.kdtree_build(grid.points, KDTREE_LEAF_SIZE)
    idx[far] = kern.kdtree_knn(*tree, np.ascontiguousarray(queries[far]), k)[1]
    near = np.flatnonzero(~far)
    if len(near):
        idx[near] = grid.knn(queries[near], k)[1]
    return idx


def _column_bound(small: np.ndarray, large: np.ndarray, floor: np.ndarray | None = None) -> float:
    """Lower bound of any pairing (Å²): it uses n_s distinct points of the larger set, each
    at least its nearest-neighbour distance from the smaller set (or ``floor``, lower bounds
    of those distances, Å)."""
    m = nearest_neighbours(large, small)[0] if floor is None else floor
    return _sum_below(np.partition(m * m, len(small) - 1)[:len(small)]) * (1.0 - 1e-12)


def _solve(kern: types.ModuleType, graph: _Graph, prices: np.ndarray, init: np.ndarray,
           eps_hi: float, eps_final: float, budget: int
           ) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Auction on ``graph`` from integer ``prices`` and the assignment ``init`` (-1: none),
    ε-scaling from ``eps_hi`` down to ``eps_final`` (Å²). Returns ``(assignment, integer
    prices, status, bids)``."""
    e_fin = graph.eps_scaled(eps_final)
    e_hi = max(graph.eps_scaled(eps_hi), e_fin)
    return kern.auction(graph.indptr, graph.indices, graph.cost, graph.n_cols,
                        prices - prices.min(), init, e_hi, e_fin, EPS_FACTOR, budget)


@dataclass(frozen=True)
class _Graph:
    """Candidate edges (CSR by row, no duplicates) with float and scaled integer costs."""

    indptr: np.ndarray
    indices: np.ndarray
    cost_angstrom2: np.ndarray
    cost: np.ndarray  # int64, in units of unit / (n_cols + 1)
    unit: float  # Å² per integer cost step before the (n_cols + 1) scaling
    n_cols: int

    @staticmethod
    def unit_for(small: np.ndarray, large: np.ndarray) -> float:
        """Integer cost step (a power of 2, Å²) such that any pair's cost, scaled by
        n_l + 1, stays below 2^50: from the diameter of the two sets' bounding box."""
        (lo_s, hi_s, _), (lo_l, hi_l, _) = bounding_box(small), bounding_box(large)
        lo = np.minimum(lo_s, lo_l)
        hi = np.maximum(hi_s, hi_l)
        wmax = float(np.sum((hi - lo) ** 2)) * (1.0 + 1e-9) + 1.0
        return 2.0 ** math.ceil(math.log2((len(large) + 1) * wmax / _SCALED_COST_MAX))

    @classmethod
    def build(cls, small: np.ndarray, large: np.ndarray, indptr: np.ndarray,
              indices: np.ndarray, unit: float) -> _Graph:
        w, cost = _kernels().edge_costs(small, large, indptr, indices, unit, len(large) + 1)
        return cls(indptr, indices, w, cost, unit, len(large))

    def with_edges(self, small: np.ndarray, large: np.ndarray, rows: np.ndarray,
                   cols: np.ndarray) -> _Graph:
        ip, ix = _kernels().csr_merge(self.indptr, self.indices, rows.astype(np.int64),
                                      cols.astype(np.int64), self.n_cols)
        return _Graph.build(small, large, ip, ix, self.unit)

    def eps_scaled(self, eps_angstrom2: float) -> int:
        return max(1, int(eps_angstrom2 / self.unit * (self.n_cols + 1)))

    def from_scaled(self, prices: np.ndarray) -> np.ndarray:
        return prices.astype(np.float64) * (self.unit / (self.n_cols + 1))


def _dual_bound(small: np.ndarray, grid: _Grid, prices: np.ndarray, graph: _Graph
                ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """Lower bound of the optimum over all pairs from integer column prices (Å², module
    docstring), the shifted prices ``w = p − min p`` (Å²), each row's smallest ``c + w``
    over the graph's edges, and over all pairs where that is smaller (else ``inf``).

    The graph holds every pair of the radius graph of ``grid`` (``|s − l|² <`` its
    ``radius_graph_r2``, the same float arithmetic as the search), so a pair outside it
    costs ``c + w >= r2`` (w >= 0): only rows whose graph minimum exceeds r2 can be
    undercut, and only those are searched."""
    kern = _kernels()
    w = graph.from_scaled(prices - prices.min())
    u_graph = kern.row_minima(graph.indptr, graph.cost_angstrom2 + w[graph.indices])
    v = np.full(len(small), np.inf)
    need = np.flatnonzero(u_graph > grid.radius_graph_r2)
    if len(need):
        sw, cw = kern.cell_weights(grid.order, grid.cell_start, w)
        v[need], _ = kern.grid_min_weighted(grid.sorted_points, sw, cw, grid.order,
                                            grid.cell_start, grid.origin, grid.h, grid.dims,
                                            np.ascontiguousarray(small[need]), u_graph[need],
                                            grid.slack)  # exact: every pair below u_graph
    u = np.minimum(u_graph, v)
    return _bound_from_duals(u, w), w, u_graph, v


def _bound_from_duals(u: np.ndarray, w: np.ndarray) -> float:
    """The certified ``Σu − Σw`` (Å²) of row minima ``u`` and shifted prices ``w >= 0``,
    rounded down (each sum bounded by :func:`_sum_below` / :func:`_sum_above`, less 8 eps of
    the magnitudes for the subtraction)."""
    lb = _sum_below(u) - _sum_above(w)
    return lb - 8.0 * float(np.finfo(np.float64).eps) * (float(np.abs(u).sum()) + float(w.sum()))
