"""The matched-RMSD assignment (c2np.assignment): the sparse auction path against the dense
optimum (scipy's linear_sum_assignment, the previous exact path), and every reported bound
against the exact value, on ordinary and degenerate inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment
from scipy.spatial import cKDTree
from scipy.spatial.distance import cdist

import c2np.assignment as assignment
from c2np.assignment import aligned as a_aligned
from c2np.assignment import auction as a_auction
from c2np.assignment import grid as a_grid
from c2np.assignment import min_sq_assignment
from c2np.assignment import result as a_result
from c2np.assignment import solve as a_solve


def _optimum(a: np.ndarray, b: np.ndarray) -> float:
    c = cdist(a, b, "sqeuclidean") if len(a) <= len(b) else cdist(b, a, "sqeuclidean")
    ri, ci = linear_sum_assignment(c)
    return float(c[ri, ci].sum())


def _check(res, opt: float) -> None:
    """The value is that of a valid pairing (>= optimum), the bound is below the optimum,
    and an exact result is the optimum."""
    scale = 1.0 + abs(opt)
    assert res.sum_sq_angstrom2 >= opt - 1e-9 * scale
    assert res.lower_bound_angstrom2 <= opt + 1e-9 * scale
    assert res.gap_angstrom2 >= 0.0
    if res.exact:
        assert res.sum_sq_angstrom2 == pytest.approx(opt, rel=1e-8, abs=res.tolerance_angstrom2 + 1e-12)


@pytest.fixture
def sparse_always(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send every set that is not trivially solved to the sparse (auction) path."""
    monkeypatch.setattr(a_solve, "DENSE_MAX_ENTRIES", 0)


def _cloud(rng: np.random.Generator, kind: str, n: int, ref: np.ndarray) -> np.ndarray:
    if kind == "noisy":
        pick = rng.permutation(len(ref))[:n] if n <= len(ref) else rng.integers(0, len(ref), n)
        return ref[pick] + rng.normal(scale=0.4, size=(n, 3))
    if kind == "uniform":
        return rng.uniform(-6, 6, size=(n, 3))
    if kind == "shifted":  # the reference (or part of it, or with extra atoms) moved
        pick = rng.permutation(len(ref))[:n] if n <= len(ref) else np.r_[np.arange(len(ref)),
                                                                         rng.integers(0, len(ref), n - len(ref))]
        return ref[pick] + np.array([1.3, -0.4, 0.2]) + rng.normal(scale=0.05, size=(n, 3))
    if kind == "collapsed":
        return rng.normal(scale=0.05, size=(n, 3))
    if kind == "duplicates":  # many atoms on the same few sites
        return ref[rng.integers(0, min(3, len(ref)), n)].copy()
    return rng.uniform(-6, 6, size=(n, 3)) + np.array([40.0, 0.0, 0.0])  # far away


KINDS = ("noisy", "uniform", "shifted", "collapsed", "duplicates", "far")


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 70), st.integers(2, 70), st.sampled_from(KINDS), st.integers(0, 2 ** 31))
def test_sparse_path_equals_dense_optimum(n_ref: int, n_pred: int, kind: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ref = rng.uniform(-6, 6, size=(n_ref, 3))
    pred = _cloud(rng, kind, n_pred, ref)
    opt = _optimum(pred, ref)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(a_solve, "DENSE_MAX_ENTRIES", 0)
        res = min_sq_assignment(pred, ref, far_rmsd_angstrom=None)
        far = min_sq_assignment(pred, ref)  # far-off sets may stop at a small certified gap
    for r in (res, far):
        assert r.n_pairs == min(n_ref, n_pred)
        _check(r, opt)
    if kind in ("noisy", "uniform"):
        assert res.exact  # ordinary inputs are certified optimal
        _check_far(far)


def _check_far(res) -> None:
    """Exact, or stopped far off: the RMSD bound is at least FAR_RMSD_ANGSTROM and the RMSD
    value within FAR_REL_GAP of it (ALIGN_ACCEPT_REL_GAP for a result solved aligned)."""
    if res.exact:
        return
    lb, n = res.lower_bound_angstrom2, res.n_pairs
    assert lb >= n * assignment.FAR_RMSD_ANGSTROM ** 2
    rel = a_aligned.ALIGN_ACCEPT_REL_GAP if res.method == "aligned" else assignment.FAR_REL_GAP
    assert np.sqrt(res.sum_sq_angstrom2 / n) <= (1 + rel) * np.sqrt(lb / n) * (1 + 1e-12)


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(KINDS), st.integers(1, 30), st.integers(0, 2 ** 31))
def test_a_spent_budget_still_gives_valid_bounds(kind: str, bids: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ref = rng.uniform(-6, 6, size=(60, 3))
    pred = _cloud(rng, kind, 55, ref)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(a_solve, "DENSE_MAX_ENTRIES", 0)
        res = min_sq_assignment(pred, ref, bids_per_point=bids, max_rounds=1)
    _check(res, _optimum(pred, ref))


def test_larger_sets_are_certified_and_bounds_hold() -> None:
    rng = np.random.default_rng(11)
    ref = rng.uniform(-12, 12, size=(900, 3))
    for pred, method in ((ref[rng.permutation(900)[:870]] + rng.normal(scale=0.6, size=(870, 3)), "auction"),
                         (rng.uniform(-12, 12, size=(930, 3)), "auction"),  # more predicted atoms
                         (rng.normal(scale=0.5, size=(880, 3)), "aligned")):  # collapsed: aligned
        res = min_sq_assignment(pred, ref)  # 870 x 900 > the dense limit: sparse path
        assert res.method == method
        _check(res, _optimum(pred, ref))
    assert min_sq_assignment(ref + 0.01, ref).method == "nearest"


def test_paths_agree_with_each_other(sparse_always: None) -> None:
    rng = np.random.default_rng(3)
    ref = rng.uniform(-5, 5, size=(300, 3))
    pred = ref[rng.permutation(300)[:280]] + rng.normal(scale=0.5, size=(280, 3))
    sparse = min_sq_assignment(pred, ref)
    assert sparse.method == "auction" and sparse.exact
    assert sparse.sum_sq_angstrom2 == pytest.approx(_optimum(pred, ref), rel=1e-10)
    # the caller's trees and nearest neighbours change nothing
    tree = cKDTree(ref)
    d1, j1 = tree.query(pred, k=1)
    again = min_sq_assignment(pred, ref, tree_b=tree, nearest=(d1, j1))
    assert again.sum_sq_angstrom2 == sparse.sum_sq_angstrom2
    # and neither does the order of the arguments
    swapped = min_sq_assignment(ref, pred)
    assert swapped.sum_sq_angstrom2 == pytest.approx(sparse.sum_sq_angstrom2, rel=1e-12)


def test_empty_and_single_points() -> None:
    assert min_sq_assignment(np.zeros((0, 3)), np.ones((4, 3))).n_pairs == 0
    r = min_sq_assignment(np.zeros((1, 3)), np.array([[1.0, 0, 0], [3.0, 0, 0]]))
    assert r.exact and r.sum_sq_angstrom2 == 1.0 and r.n_pairs == 1


def test_grid_queries_match_kdtree() -> None:
    rng = np.random.default_rng(5)
    pts = np.concatenate([rng.uniform(-8, 8, size=(700, 3)), rng.uniform(30, 31, size=(5, 3))])
    grid = a_grid._Grid.build(pts, per_cell=3.0)
    queries = np.concatenate([rng.uniform(-9, 9, size=(200, 3)), [[60.0, 0, 0], [-40, -40, 5]]])
    w = rng.uniform(0, 30, size=len(pts))
    vals, idx, complete = grid.knn(queries, 4, weights=w)
    assert complete.all()
    brute = ((queries[:, None, :] - pts[None]) ** 2).sum(axis=2) + w[None]
    order = np.argsort(brute, axis=1)[:, :4]
    assert np.allclose(vals, np.take_along_axis(brute, order, axis=1))
    ip, ix = grid.radius_graph(queries)
    r2 = (0.999 * grid.h) ** 2
    for i in (0, 17, 200, 201):
        want = np.flatnonzero(((pts - queries[i]) ** 2).sum(axis=1) < r2)
        assert sorted(ix[ip[i]:ip[i + 1]].tolist()) == want.tolist()


CLOUDS = ("uniform", "lattice", "collapsed", "duplicates", "far", "flat")


def _points(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    if kind == "lattice":
        g = np.arange(-3, 4, dtype=np.float64) * 2.5
        pts = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
        return pts[rng.permutation(len(pts))[:n]]
    if kind == "collapsed":
        return rng.normal(scale=0.05, size=(n, 3))
    if kind == "duplicates":
        return rng.uniform(-5, 5, size=(3, 3))[rng.integers(0, 3, n)]
    if kind == "far":
        return rng.uniform(-2, 2, size=(n, 3)) + np.array([80.0, -30.0, 5.0])
    if kind == "flat":
        return np.c_[rng.uniform(-6, 6, size=(n, 2)), np.zeros(n)]
    return rng.uniform(-6, 6, size=(n, 3))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(CLOUDS), st.sampled_from(CLOUDS), st.integers(1, 300), st.integers(1, 300),
       st.integers(0, 2 ** 31))
def test_nearest_neighbours_and_close_pairs_equal_kdtree(kind_p: str, kind_q: str, n_p: int,
                                                        n_q: int, seed: int) -> None:
    """Grid nearest neighbours give cKDTree's distances bit for bit (and a point at that
    distance); close pairs are exactly the pairs within the radius, with those distances."""
    rng = np.random.default_rng(seed)
    pts = _points(rng, kind_p, n_p)
    queries = _points(rng, kind_q, n_q)
    d, j = assignment.nearest_neighbours(queries, pts)
    want, _ = cKDTree(pts).query(queries, k=1)
    assert np.array_equal(d, want)
    assert np.allclose(np.linalg.norm(queries - pts[j], axis=1), d, rtol=1e-12, atol=1e-12)
    radius = 0.5
    grid = assignment.PointGrid.build(pts, min_side=radius * (1 + 1e-6))
    i, k, dist = assignment.close_pairs(queries, grid, radius)
    ref = cKDTree(queries).sparse_distance_matrix(cKDTree(pts), radius, output_type="ndarray")
    got = sorted(zip(i.tolist(), k.tolist(), dist.tolist()))
    exp = sorted(zip(ref["i"].tolist(), ref["j"].tolist(), ref["v"].tolist()))
    assert [g for g in got if g[2] <= radius] == exp


def test_far_off_sets_stop_at_a_certified_gap() -> None:
    """A prediction far from the reference (a random ball against a lattice) stops once
    the RMSD value is within FAR_REL_GAP of a certified bound: never below the optimum,
    the bound never above it; without the rule the same sets are solved exactly."""
    rng = np.random.default_rng(2)
    g = np.arange(-7, 8, dtype=np.float64) * 2.0
    ref = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
    ref = ref[np.linalg.norm(ref, axis=1) <= 14.0]
    u = rng.normal(size=(len(ref) - 20, 3))
    ball = u / np.linalg.norm(u, axis=1, keepdims=True) * 14.0 * rng.random(len(u))[:, None] ** (1 / 3)
    opt = _optimum(ball, ref)
    far = min_sq_assignment(ball, ref)
    exact = min_sq_assignment(ball, ref, far_rmsd_angstrom=None)
    assert far.method == exact.method == "auction"
    _check(far, opt)
    _check(exact, opt)
    assert exact.exact
    _check_far(far)
    assert not far.exact  # the bound is certified, the value within 1 % in RMSD of it
    # far from the nearest neighbours alone: stopped by the early check, before the edges
    # outside the graph are searched and before any fine stage
    d1, _ = cKDTree(ref).query(ball, k=1)
    assert float(np.sum(d1 * d1)) >= len(ball) * assignment.FAR_RMSD_ANGSTROM ** 2
    assert far.rounds == 0
    with pytest.MonkeyPatch.context() as mp:  # the early check changes the work, not the rule
        mp.setattr(a_auction, "FAR_EARLY_EPS", 1e-30)
        late = min_sq_assignment(ball, ref)
    _check(late, opt)
    _check_far(late)


def _dual_bound_searching_every_row(small, grid, prices, graph):
    """The dual bound of auction._dual_bound with every row searched over all pairs."""
    kern = a_grid._kernels()
    w = graph.from_scaled(prices - prices.min())
    u_graph = kern.row_minima(graph.indptr, graph.cost_angstrom2 + w[graph.indices])
    sw, cw = kern.cell_weights(grid.order, grid.cell_start, w)
    v, _ = kern.grid_min_weighted(grid.sorted_points, sw, cw, grid.order, grid.cell_start,
                                  grid.origin, grid.h, grid.dims, np.ascontiguousarray(small),
                                  u_graph, grid.slack)
    u = np.minimum(u_graph, v)
    return a_auction._bound_from_duals(u, w), w, u_graph, v


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=0, max_size=3000), st.integers(0, 2 ** 31))
def test_certified_sums_bracket_the_exact_sum(values: list, seed: int) -> None:
    """_sum_below / _sum_above bracket the exactly rounded sum (math.fsum) for any terms,
    cancellation included, and lie within (log2 n + 24) eps Σ|x| of it."""
    import math

    rng = np.random.default_rng(seed)
    x = np.array(values + list(rng.normal(scale=1e3, size=rng.integers(0, 5000))), dtype=np.float64)
    exact = math.fsum(x)
    lo, hi = a_result._sum_below(x), a_result._sum_above(x)
    assert lo <= exact <= hi
    if len(x):
        slack = 2.0 * (math.log2(len(x)) + 24.0) * np.finfo(np.float64).eps * float(np.abs(x).sum())
        assert hi - lo <= 2.0 * slack


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(KINDS), st.integers(20, 200), st.floats(0.0, 200.0), st.integers(0, 2 ** 31))
def test_dual_bound_searches_only_rows_that_can_be_undercut(kind: str, n: int, price_scale: float,
                                                            seed: int) -> None:
    """The dual bound, searching only rows whose graph minimum exceeds the radius graph's
    r², equals the bound with every row searched, bit for bit, for any prices: a pair
    outside the radius graph costs at least r² (the same float arithmetic)."""
    import math

    rng = np.random.default_rng(seed)
    large = rng.uniform(-6, 6, size=(n + 5, 3))
    small = _cloud(rng, kind, n, large)
    grid = a_grid._Grid.build(large, per_cell=a_auction.GRAPH_DEGREE / (4.0 * math.pi / 3.0))
    indptr, indices = grid.radius_graph(small)
    graph = a_auction._Graph.build(small, large, indptr, indices,
                                    a_auction._Graph.unit_for(small, large))
    extra = rng.integers(0, len(large), size=n)  # a pairing's edges, as the solver adds them
    graph = graph.with_edges(small, large, np.arange(n), extra)
    prices = (rng.random(len(large)) * price_scale / graph.unit * (len(large) + 1)).astype(np.int64)
    got = a_auction._dual_bound(small, grid, prices, graph)
    want = _dual_bound_searching_every_row(small, grid, prices, graph)
    assert got[0] == want[0]
    for a, b in zip(got[1:], want[1:]):
        assert np.array_equal(a, b)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(CLOUDS), st.integers(1, 300), st.integers(0, 2 ** 31))
def test_bounding_box_equals_numpy(kind: str, n: int, seed: int) -> None:
    pts = _points(np.random.default_rng(seed), kind, n)
    lo, hi, amax = assignment.bounding_box(pts)
    assert np.array_equal(lo, pts.min(axis=0)) and np.array_equal(hi, pts.max(axis=0))
    assert amax == float(np.abs(pts).max())


def test_degenerate_prediction_reports_valid_bounds() -> None:
    """Every predicted point on one spot: the graph reaches few reference points, the
    auction is skipped, and the value (a valid pairing) and bound still hold."""
    rng = np.random.default_rng(4)
    ref = rng.uniform(-10, 10, size=(700, 3))
    pred = rng.normal(scale=0.05, size=(700, 3))
    opt = _optimum(pred, ref)
    with pytest.MonkeyPatch.context() as mp:  # the sets as they are, not aligned
        mp.setattr(a_aligned, "ALIGN_SCALE_REL", np.inf)
        res = min_sq_assignment(pred, ref)
    assert res.method == "auction" and res.rounds == 0
    _check(res, opt)
    # aligned on centre and size the same sets are paired near-optimally
    aligned = min_sq_assignment(pred, ref)
    assert aligned.method == "aligned"
    _check(aligned, opt)
    assert aligned.gap_angstrom2 < 0.02 * opt < res.gap_angstrom2


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(CLOUDS), st.sampled_from(CLOUDS), st.integers(1, 400), st.integers(1, 200),
       st.integers(1, 16), st.integers(0, 2 ** 31))
def test_kdtree_nearest_equals_kdtree(kind_p: str, kind_q: str, n_p: int, n_q: int, leaf: int,
                                      seed: int) -> None:
    """The tight-box k-d tree of the far queries gives cKDTree's distances bit for bit and a
    point at that distance, for any leaf size; its nodes partition the points."""
    from c2np.assignment import _kernels as kern

    rng = np.random.default_rng(seed)
    pts = _points(rng, kind_p, n_p)  # (a lattice has at most 343 points)
    queries = _points(rng, kind_q, n_q)
    tree = kern.kdtree_build(np.ascontiguousarray(pts), leaf)
    perm, sp, lo, hi, start, end, left = tree
    assert sorted(perm.tolist()) == list(range(len(pts))) and np.array_equal(sp, pts[perm])
    for t in range(len(start)):  # tight boxes; children split the parent's points
        box = sp[start[t]:end[t]]
        assert np.array_equal(lo[t], box.min(axis=0)) and np.array_equal(hi[t], box.max(axis=0))
        if left[t] >= 0:
            c = left[t]
            assert start[c] == start[t] and end[c] == start[c + 1] and end[c + 1] == end[t]
        else:
            assert end[t] - start[t] <= leaf
    v, j = kern.kdtree_nearest(*tree, np.ascontiguousarray(queries))
    want, _ = cKDTree(pts).query(queries, k=1)
    assert np.array_equal(np.sqrt(v), want)
    assert np.allclose(np.linalg.norm(queries - pts[j], axis=1), want, rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(CLOUDS), st.sampled_from(CLOUDS), st.integers(1, 400), st.integers(1, 200),
       st.integers(1, 16), st.integers(1, 8), st.integers(0, 2 ** 31))
def test_kdtree_knn_equals_kdtree(kind_p: str, kind_q: str, n_p: int, n_q: int, leaf: int, k: int,
                                  seed: int) -> None:
    """The k-d tree's k nearest neighbours: cKDTree's k distances bit for bit, ascending,
    distinct points at those distances; -1 / inf beyond the tree's points."""
    from c2np.assignment import _kernels as kern

    rng = np.random.default_rng(seed)
    pts = _points(rng, kind_p, n_p)
    queries = _points(rng, kind_q, n_q)
    tree = kern.kdtree_build(np.ascontiguousarray(pts), leaf)
    v, j = kern.kdtree_knn(*tree, np.ascontiguousarray(queries), k)
    kk = min(k, len(pts))
    want, _ = cKDTree(pts).query(queries, k=kk)
    want = np.asarray(want).reshape(len(queries), kk)
    assert np.array_equal(np.sqrt(v[:, :kk]), want)
    assert np.all(j[:, kk:] == -1) and np.all(np.isinf(v[:, kk:]))
    got = np.linalg.norm(queries[:, None, :] - pts[j[:, :kk]], axis=2)
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12)
    assert all(len(set(row)) == kk for row in j[:, :kk].tolist())


def test_particle_against_a_collapsed_larger_set_uses_the_tree_and_keeps_bounds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference is the smaller set and lies far from a larger collapsed prediction:
    its rows have no partners nearby, and their nearest points come from the k-d tree
    (not the grid's ring search), with the same pairing and bounds as the ring search."""
    rng = np.random.default_rng(7)
    ref = rng.uniform(-10, 10, size=(400, 3))
    pred = rng.normal(scale=0.05, size=(440, 3))
    monkeypatch.setattr(a_aligned, "ALIGN_SCALE_REL", np.inf)  # the sets as they are
    res = min_sq_assignment(pred, ref, far_rmsd_angstrom=None)  # no far rule: the auction
    assert res.method == "auction"
    _check(res, _optimum(pred, ref))
    monkeypatch.setattr(a_auction, "KDTREE_MIN_FAR_QUERIES", 10 ** 9)  # the ring search
    ring = min_sq_assignment(pred, ref, far_rmsd_angstrom=None)
    assert (ring.sum_sq_angstrom2, ring.lower_bound_angstrom2) == pytest.approx(
        (res.sum_sq_angstrom2, res.lower_bound_angstrom2), rel=1e-12)


def test_column_floor_gives_a_valid_looser_bound() -> None:
    """A degenerate pairing's bound from caller-given lower bounds of the larger set's
    nearest distances (here: to a superset of the smaller set) stays below the optimum and
    at most the bound from the exact distances; a floor of the wrong shape is refused."""
    rng = np.random.default_rng(4)
    ref = rng.uniform(-10, 10, size=(700, 3))
    pred = rng.normal(scale=0.05, size=(700, 3))
    other = rng.normal(scale=0.3, size=(300, 3))  # more predicted atoms, of another element
    floor, _ = assignment.nearest_neighbours(ref, np.concatenate([pred, other]))
    with pytest.MonkeyPatch.context() as mp:  # the sets as they are (the degenerate path)
        mp.setattr(a_aligned, "ALIGN_SCALE_REL", np.inf)
        exact = min_sq_assignment(pred, ref)
        loose = min_sq_assignment(pred, ref, column_floor=floor)
    opt = _optimum(pred, ref)
    _check(loose, opt)
    assert loose.sum_sq_angstrom2 == exact.sum_sq_angstrom2
    assert loose.lower_bound_angstrom2 <= exact.lower_bound_angstrom2
    assert loose.lower_bound_angstrom2 > 0.5 * opt  # still a useful bound
    with pytest.raises(ValueError, match="column_floor"):
        min_sq_assignment(pred, ref, column_floor=floor[:10])


@settings(max_examples=40, deadline=None)
@given(st.floats(0.3, 2.5), st.floats(0.0, 8.0), st.integers(-40, 40), st.sampled_from(["ball", "lattice"]),
       st.integers(0, 2 ** 31))
def test_a_prediction_of_the_wrong_size_or_place_is_paired_in_aligned_coordinates(
        scale: float, shift: float, extra: int, kind: str, seed: int) -> None:
    """A prediction shrunk, grown or moved (with a few atoms more or fewer): solved in
    coordinates aligned on centre and RMS radius, valued and certified in the original
    ones. The value is a valid pairing's, the bound below the optimum (dense solver), and
    the gap small where the sizes are equal (the two problems are then equivalent)."""
    rng = np.random.default_rng(seed)
    if kind == "lattice":
        g = np.arange(-4, 5, dtype=np.float64) * 2.2
        ref = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
        ref = ref[np.linalg.norm(ref, axis=1) <= 9.0] + rng.normal(scale=0.01, size=(1, 3))
    else:
        u = rng.normal(size=(400, 3))
        ref = u / np.linalg.norm(u, axis=1, keepdims=True) * 9.0 * rng.random(400)[:, None] ** (1 / 3)
    n = len(ref) + extra
    base = ref[rng.integers(0, len(ref), n)] if extra > 0 else ref[rng.permutation(len(ref))[:n]]
    direction = rng.normal(size=3)
    pred = scale * (base + rng.normal(scale=0.3, size=base.shape)) + shift * direction / np.linalg.norm(direction)
    res = min_sq_assignment(pred, ref)
    opt = _optimum(pred, ref)
    _check(res, opt)
    if res.method == "aligned" and extra == 0:
        rmsd, lower = np.sqrt(res.sum_sq_angstrom2 / n), np.sqrt(res.lower_bound_angstrom2 / n)
        assert rmsd - lower <= 0.05 * rmsd + 1e-6


def test_a_shrunk_prediction_gets_a_near_optimal_pairing() -> None:
    """The random ball shrunk to 0.6 of the radius: before the aligned path the greedy
    fallback pairing was reported (about twice the optimum's RMSD, gap 60 %); now value and
    bound are within a few % of each other and of the radial pairing's RMSD."""
    rng = np.random.default_rng(8)
    u = rng.normal(size=(900, 3))
    ref = u / np.linalg.norm(u, axis=1, keepdims=True) * 12.0 * rng.random(900)[:, None] ** (1 / 3)
    u = rng.normal(size=(880, 3))
    pred = 0.6 * u / np.linalg.norm(u, axis=1, keepdims=True) * 12.0 * rng.random(880)[:, None] ** (1 / 3)
    res = min_sq_assignment(pred, ref)
    opt = _optimum(pred, ref)
    _check(res, opt)
    assert res.method == "aligned"
    assert np.sqrt(res.sum_sq_angstrom2 / opt) <= 1.02
    assert np.sqrt(res.lower_bound_angstrom2 / opt) >= 0.95


def test_queries_beyond_a_smaller_ball_go_to_the_tree_and_stay_exact() -> None:
    """A particle's atoms against a prediction shrunk to 0.6 of its size: the atoms with no
    prediction atom within a cell of theirs (outside the small ball, also inside its box) are
    routed to the k-d tree, the atoms inside the small ball are not, and the nearest
    neighbours are cKDTree's bit for bit either way."""
    rng = np.random.default_rng(11)

    def ball(n: int, r: float) -> np.ndarray:
        u = rng.normal(size=(n, 3))
        return u / np.linalg.norm(u, axis=1, keepdims=True) * r * rng.random(n)[:, None] ** (1 / 3)

    queries, pts = ball(4000, 20.0), ball(4000, 12.0)
    grid = assignment.PointGrid.build(pts)
    far = a_grid._far(queries, grid)
    r = np.linalg.norm(queries, axis=1)
    box = np.all(np.abs(queries) < 11.0, axis=1)
    assert np.all(far[r > 12.0 + 2.0 * np.sqrt(3.0) * grid.h])  # no point within a cell
    assert not np.any(far[r < 10.0])  # inside the small ball
    assert np.count_nonzero(far & box) > 0  # the empty corners of its box count too
    assert np.count_nonzero(far) > a_auction.KDTREE_MIN_FAR_QUERIES
    d, j = assignment.nearest_neighbours(queries, pts)
    want, _ = cKDTree(pts).query(queries, k=1)
    assert np.array_equal(d, want)
    assert np.allclose(np.linalg.norm(queries - pts[j], axis=1), d, rtol=1e-12, atol=1e-12)
    k_idx = a_auction._knn_indices(grid, queries, 3)
    k_want, _ = cKDTree(pts).query(queries, k=3)
    got = np.sort(np.linalg.norm(queries[:, None, :] - pts[k_idx], axis=2), axis=1)
    assert np.allclose(got, k_want, rtol=1e-12, atol=1e-12)


def test_far_rule_accepts_the_first_pairing_when_it_is_within_the_gap(sparse_always: None) -> None:
    """A prediction with 4x the atoms spread uniformly: few nearest neighbours collide, the
    greedy first pairing is within the far rule's 1 % of the nearest-neighbour bound, and no
    auction runs; value >= optimum >= bound holds. Without the far rule the same sets are
    solved exactly by the auction."""
    rng = np.random.default_rng(5)
    g = np.arange(-3, 4, dtype=np.float64) * 3.0
    ref = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
    pred = rng.uniform(-10.5, 10.5, size=(4 * len(ref), 3))
    opt = _optimum(ref, pred)
    res = min_sq_assignment(pred, ref)
    assert res.method == "greedy" and res.rounds == 0
    _check(res, opt)
    assert res.lower_bound_angstrom2 >= len(ref) * assignment.FAR_RMSD_ANGSTROM ** 2
    assert res.sum_sq_angstrom2 <= res.lower_bound_angstrom2 * (1.0 + assignment.FAR_REL_GAP) ** 2
    exact = min_sq_assignment(pred, ref, far_rmsd_angstrom=None)
    assert exact.method == "auction" and exact.exact
    _check(exact, opt)


def test_nearest_neighbours_searched_only_when_the_pairing_needs_them() -> None:
    """Given the larger set's grid, a strong mismatch settled in aligned coordinates (a cloud
    shrunk to 0.6 of the reference's size) runs no nearest-neighbour search of the sets as
    they are; a good prediction does, and both agree with the precomputed-neighbours call."""
    rng = np.random.default_rng(11)
    ref = rng.uniform(-12, 12, size=(900, 3))
    cases = {"shrunk": 0.6 * rng.uniform(-12, 12, size=(880, 3)),
             "good": ref[:880] + rng.normal(scale=0.05, size=(880, 3))}
    for name, pred in cases.items():
        grid = assignment.PointGrid.build(ref)
        calls: list[bool] = []      # per search: were the queries the prediction as it is?
        real = assignment.nearest_neighbours

        def counting(q, p, *, grid=None, _real=real, _calls=calls, _pred=pred):
            _calls.append(bool(np.array_equal(q, _pred)))
            return _real(q, p, grid=grid)

        with pytest.MonkeyPatch.context() as mp:
            for mod in (a_solve, a_aligned, a_auction):  # each module that searches
                mp.setattr(mod, "nearest_neighbours", counting)
            lazy = min_sq_assignment(pred, ref, large_grid=grid)
        eager = min_sq_assignment(pred, ref, nearest=real(pred, ref, grid=grid))
        assert (lazy.sum_sq_angstrom2, lazy.lower_bound_angstrom2) == \
            (eager.sum_sq_angstrom2, eager.lower_bound_angstrom2), name
        _check(lazy, _optimum(pred, ref))
        if name == "shrunk":     # one search, of the aligned image
            assert lazy.method == "aligned" and calls == [False]
        else:
            assert lazy.exact and calls == [True]


def test_leftover_rows_take_distinct_nearby_free_columns() -> None:
    """The first pairing's leftover rows get distinct partners among the free columns only;
    paired by their nearest free columns they cost less than the free columns in order of x
    (the fill used before), and a row set larger than the nearest-column passes can pair
    still gets every free column (the rest in order of x)."""
    rng = np.random.default_rng(5)
    large = rng.uniform(-10, 10, size=(600, 3))
    free = rng.permutation(600)[:150]
    rows = large[free[:120]] + rng.normal(scale=0.4, size=(120, 3))
    got = a_auction._pair_leftovers(rows, large, free)
    assert len(set(got.tolist())) == 120 and set(got.tolist()) <= set(free.tolist())
    by_x = free[np.argsort(large[free, 0], kind="stable")]
    old = np.empty(120, dtype=np.int64)
    old[np.argsort(rows[:, 0], kind="stable")] = by_x[np.linspace(0, 149, 120).round().astype(np.int64)]
    assert np.sum((rows - large[got]) ** 2) < 0.5 * np.sum((rows - large[old]) ** 2)
    # every row onto one spot: passes of 8 nearest columns cannot pair them all
    spot = np.zeros((60, 3))
    tight = a_auction._pair_leftovers(spot, large, free[:60])
    assert sorted(tight.tolist()) == sorted(free[:60].tolist())


def test_a_strong_mismatch_stops_once_the_original_gap_is_accepted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A prediction shrunk to 0.3 of the size, the same atom count: the aligned problem's first
    pairing already values and bounds the original one within ALIGN_ACCEPT_REL_GAP, so no
    auction runs; the result is a valid pairing with a certified bound (dense optimum), and
    solving the aligned problem on (no acceptance share) gives a value no worse."""
    rng = np.random.default_rng(12)

    def ball(n: int, r: float) -> np.ndarray:
        u = rng.normal(size=(n, 3))
        return u / np.linalg.norm(u, axis=1, keepdims=True) * r * rng.random(n)[:, None] ** (1 / 3)

    ref, pred = ball(700, 14.0), 0.3 * ball(700, 14.0)
    calls = []
    solve = a_auction._solve
    monkeypatch.setattr(a_auction, "_solve", lambda *a, **k: calls.append(1) or solve(*a, **k))
    res = min_sq_assignment(pred, ref)
    opt = _optimum(pred, ref)
    _check(res, opt)
    _check_far(res)
    assert res.method == "aligned" and not res.exact and calls == []
    fit = a_aligned._alignment(pred, ref)
    assert fit is not None and fit[3]  # a strong mismatch
    opts = {"max_rounds": a_solve.MAX_ROUNDS, "bids_per_point": a_solve.BIDS_PER_POINT,
            "far_sum": None, "far_rel_gap": assignment.FAR_REL_GAP}
    full = a_aligned._aligned_assignment(pred, ref, *fit[:3], **opts)
    _check(full, opt)
    assert calls and full.sum_sq_angstrom2 <= res.sum_sq_angstrom2 * (1 + 1e-12)
