"""Aggregation: seeded bootstrap intervals, failure-penalised means, groups."""

import numpy as np

from c2np.evaluation.aggregate import aggregate, aggregate_groups, bootstrap_mean_ci


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    v = np.random.default_rng(0).random((200, 2))
    a = bootstrap_mean_ci(v, seed=3)
    assert np.array_equal(a, bootstrap_mean_ci(v, seed=3))
    assert not np.array_equal(a, bootstrap_mean_ci(v, seed=4))
    assert np.all(a[:, 0] < v.mean(0)) and np.all(v.mean(0) < a[:, 1])
    assert np.all(bootstrap_mean_ci(np.ones((50, 1)))[0] == 1.0)
    assert np.all(np.isnan(bootstrap_mean_ci(np.zeros((0, 3)))))


def test_failures_count_at_their_penalty_and_groups_are_sorted() -> None:
    values = np.array([[1.0], [1.0], [0.0], [0.0]])  # the last two failed, penalty 0
    ok = np.array([True, True, False, False])
    s = aggregate(values, ok, ["f1"], n_resamples=50)["f1"]
    assert s["mean"] == 0.5 and s["mean_successes"] == 1.0 and s["n"] == 4 and s["n_failed"] == 2
    groups = aggregate_groups(values, ok, ["f1"], np.array([10, 6, 10, 6]), "radius", n_resamples=20)
    assert list(groups) == ["6", "10"]
    assert groups["6"]["f1"]["mean"] == 0.5 and groups["6"]["f1"]["n_failed"] == 1
    none_ok = aggregate(values[2:], ok[2:], ["f1"], n_resamples=10)["f1"]
    assert none_ok["mean_successes"] is None and none_ok["mean"] == 0.0


def test_bootstrap_in_blocks_equals_one_draw_and_is_limited(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import numpy as np
    import pytest

    import c2np.evaluation.aggregate as agg
    from c2np.errors import C2NPLimitError

    v = np.random.default_rng(3).normal(size=(37, 4))
    whole = agg.bootstrap_mean_ci(v, n_resamples=501, seed=9)
    monkeypatch.setattr(agg, "_BLOCK_DRAWS", 37 * 7)  # 7 resamples per block
    assert np.array_equal(agg.bootstrap_mean_ci(v, n_resamples=501, seed=9), whole)
    with pytest.raises(C2NPLimitError, match="bootstrap resamples: 100,000,000 resamples exceeds the limit"):
        agg.bootstrap_mean_ci(v, n_resamples=100_000_000)
