"""The exact pair-distance histogram (compiled column sweep) against a straightforward
``pdist`` re-computation with the same 1e-9 Å edge convention."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import pdist
from scipy.spatial.transform import Rotation

from c2np.metrics import EDGE_SNAP_ANGSTROM, pair_distance_counts

R_MAX, N_BINS = 10.0, 128


def _reference(x: np.ndarray, r_max: float = R_MAX, n_bins: int = N_BINS) -> np.ndarray:
    """bin floor((d + ε) n_bins / r_max) of every pair with d <= r_max + ε, last bin closed."""
    d = pdist(x)
    d = d[d * d <= (r_max + EDGE_SNAP_ANGSTROM) ** 2]
    b = np.floor((d + EDGE_SNAP_ANGSTROM) * (n_bins / r_max)).astype(np.int64)
    return np.bincount(np.minimum(b, n_bins - 1), minlength=n_bins)


def _cubic_ball(a: float, radius: float) -> np.ndarray:
    k = np.arange(-int(radius / a) - 1, int(radius / a) + 2)
    g = np.stack(np.meshgrid(k, k, k, indexing="ij"), axis=-1).reshape(-1, 3) * a
    return g[np.linalg.norm(g, axis=1) <= radius]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_particles_equal_pdist(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1500, 3000))  # several chunks of candidates
    x = rng.normal(size=(n, 3))
    x *= rng.uniform(4.0, 9.0) / np.linalg.norm(x, axis=1, keepdims=True) ** rng.uniform(0, 1)
    ref = _reference(x)
    assert np.array_equal(pair_distance_counts(x), ref)
    # away from edges this is numpy's histogram of the shifted distances
    assert np.array_equal(ref, np.histogram(pdist(x) + EDGE_SNAP_ANGSTROM, N_BINS, (0, R_MAX))[0])
    for column in (0.7, 2.5, 10.0, 40.0):  # the column width changes the work, never the counts
        assert np.array_equal(pair_distance_counts(x, column_angstrom=column), ref)


@pytest.mark.parametrize("a", [2.5, 10.0 / 128 * 20, 4.0])
def test_lattice_pairs_on_bin_edges(a: float) -> None:
    """Cubic lattices whose distances a·k (and 10 Å) lie exactly on bin edges, in several
    orientations: every edge pair goes to the bin above, in every orientation."""
    x0 = _cubic_ball(a, 12.0)
    counts0 = pair_distance_counts(x0)
    assert np.array_equal(counts0, _reference(x0))
    for q in Rotation.random(3, random_state=11).as_quat():
        x = x0 @ Rotation.from_quat(q).as_matrix().T + np.array([0.3, -1.7, 2.2])
        c = pair_distance_counts(x)
        assert np.array_equal(c, _reference(x))
        assert np.array_equal(c, counts0)  # rotation-stable on edges
    if a == 2.5:  # pairs at exactly 2.5 Å and at 10 Å (the closed right edge)
        assert counts0[32] == _reference(x0)[32] > 0
        assert counts0[N_BINS - 1] > 0


def test_far_from_origin_and_spread_out() -> None:
    """Large coordinates (wider rounding margins), far-apart groups (sparse columns) and a
    spread so wide that the columns are widened: the counts stay exact."""
    rng = np.random.default_rng(3)
    base = rng.uniform(-8, 8, size=(600, 3))
    for shift in (50.0, 500.0, 5e4):
        x = base + shift
        assert np.array_equal(pair_distance_counts(x), _reference(x))
    x = np.concatenate([base, base[:300] + [400.0, 0, 0], _cubic_ball(2.5, 8.0) + 900.0])
    assert np.array_equal(pair_distance_counts(x), _reference(x))
    x = np.concatenate([base, base[:200] + [3e7, -2e7, 0.0], base[:50] * 0.3 + 1e9])
    assert np.array_equal(pair_distance_counts(x), _reference(x))
    line = np.zeros((500, 3))
    line[:, 2] = np.arange(500) * 0.37  # one column only
    assert np.array_equal(pair_distance_counts(line), _reference(line))


def test_other_ranges_and_degenerate_sets() -> None:
    rng = np.random.default_rng(4)
    x = rng.uniform(-6, 6, size=(800, 3))
    for r_max, n_bins in ((3.0, 7), (25.0, 200), (10.0, 1)):
        assert np.array_equal(pair_distance_counts(x, r_max_angstrom=r_max, n_bins=n_bins),
                              _reference(x, r_max, n_bins))
    assert pair_distance_counts(np.zeros((40, 3)))[0] == 40 * 39 // 2
    assert pair_distance_counts(np.zeros((1, 3))).sum() == 0
    with pytest.raises(ValueError):
        pair_distance_counts(np.array([[0.0, 0, 0], [np.nan, 0, 0]]))
    with pytest.raises(ValueError, match="shape"):
        pair_distance_counts(np.zeros((5, 2)))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 250),
       spread=st.floats(0.5, 40.0), lattice=st.booleans(),
       r_max=st.floats(0.5, 15.0), n_bins=st.integers(1, 300),
       column=st.one_of(st.none(), st.floats(0.2, 50.0)))
def test_any_point_set_equals_pdist(seed: int, n: int, spread: float, lattice: bool, r_max: float,
                                    n_bins: int, column: float | None) -> None:
    """Property: for any point set (uniform, or on a grid so that many distances coincide and
    sit on bin edges), range, bin count and column width, the counts equal pdist's."""
    rng = np.random.default_rng(seed)
    if lattice:
        x = rng.integers(-6, 7, size=(n, 3)) * (spread / 12.0)
    else:
        x = rng.uniform(-spread, spread, size=(n, 3))
    assert np.array_equal(pair_distance_counts(x, r_max_angstrom=r_max, n_bins=n_bins,
                                               column_angstrom=column),
                          _reference(x, r_max, n_bins))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 400), spread=st.floats(0.05, 20.0),
       buffer=st.integers(1, 64), paired=st.booleans(), n_bins=st.sampled_from([1, 7, 128, 254, 255]))
def test_any_buffer_size_equals_pdist(seed: int, n: int, spread: float, buffer: int,
                                      paired: bool, n_bins: int) -> None:
    """The two-pass sweep (bins into a buffer, counted when it is full) gives pdist's counts
    for any buffer size: runs of candidates longer than the buffer are split, and the buffer
    is flushed in the middle of a run, at its end and after the last run. Also when two
    bins share one increment of the bin-pair table (any fill, odd ones included; up to 254
    bins, beyond which the bins are counted one by one)."""
    import c2np.metrics.pair_histogram as metrics

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)) * spread
    old = metrics._SWEEP_BUFFER, metrics._PACKED_MIN_PAIRS_PER_ATOM
    metrics._SWEEP_BUFFER = buffer
    metrics._PACKED_MIN_PAIRS_PER_ATOM = 0.0 if paired else math.inf
    try:
        got = pair_distance_counts(x, n_bins=n_bins)
    finally:
        metrics._SWEEP_BUFFER, metrics._PACKED_MIN_PAIRS_PER_ATOM = old
    assert np.array_equal(got, _reference(x, R_MAX, n_bins))


@pytest.mark.parametrize("paired", [True, False])
def test_bin_pairs_and_single_bins_count_alike(paired: bool) -> None:
    """Counting two bins per increment (the default for dense clouds) and one by one give the
    same counts, on a dense cloud whose bins are few (many equal cells in a row) and on
    a lattice with pairs on bin edges."""
    import c2np.metrics.pair_histogram as metrics

    rng = np.random.default_rng(8)
    u = rng.normal(size=(3000, 3))
    clouds = [u / np.linalg.norm(u, axis=1, keepdims=True) * rng.random(3000)[:, None],
              _cubic_ball(2.5, 14.0)]
    old = metrics._PACKED_MIN_PAIRS_PER_ATOM
    metrics._PACKED_MIN_PAIRS_PER_ATOM = 0.0 if paired else math.inf
    try:
        for x in clouds:
            assert np.array_equal(pair_distance_counts(x), _reference(x))
    finally:
        metrics._PACKED_MIN_PAIRS_PER_ATOM = old


def test_dense_cloud_longer_runs_than_the_buffer() -> None:
    """A collapsed cloud (every pair within range, runs of thousands of candidates, more
    than the 8,192-bin buffer holds) counts exactly."""
    rng = np.random.default_rng(7)
    u = rng.normal(size=(9000, 3))
    x = u / np.linalg.norm(u, axis=1, keepdims=True) * rng.random(9000)[:, None]
    assert np.array_equal(pair_distance_counts(x), _reference(x))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2 ** 31), st.integers(2, 600), st.sampled_from([0.5, 3.0, 12.0]),
       st.floats(0.0, 1.5))
def test_a_pair_budget_counts_exactly_or_refuses(seed: int, n: int, spread: float, share: float) -> None:
    """With ``max_pairs`` at or above the pairs within r_max the counts are the exact ones;
    below, :class:`TooManyPairs` is raised, having counted more than the budget."""
    from c2np.metrics import TooManyPairs

    x = np.random.default_rng(seed).uniform(-spread, spread, size=(n, 3))
    want = _reference(x)
    total = int(want.sum())
    budget = int(share * total)
    if budget >= total:
        assert np.array_equal(pair_distance_counts(x, max_pairs=budget), want)
    else:
        with pytest.raises(TooManyPairs) as err:
            pair_distance_counts(x, max_pairs=budget)
        assert budget < err.value.pairs_counted <= total
        assert err.value.max_pairs == budget


def test_a_dense_cloud_stops_soon_after_the_pair_budget() -> None:
    """A cloud of 6,000 atoms within 1 Å (18 million pairs) against a budget of 100,000
    pairs: refused having counted past the budget by at most 8 buffers of candidates."""
    from c2np.metrics import TooManyPairs
    from c2np.metrics import pair_histogram as metrics

    x = np.random.default_rng(0).uniform(-1.0, 1.0, size=(6000, 3))
    with pytest.raises(TooManyPairs) as err:
        pair_distance_counts(x, max_pairs=100_000)
    assert 100_000 < err.value.pairs_counted <= 100_000 + 8 * metrics._SWEEP_BUFFER
