"""Task-1 and task-2 metrics: exact hand-computed values, invariances, failures, and
agreement with a straightforward re-computation (pdist / directed_hausdorff / dense LSA)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment
from scipy.spatial import ConvexHull
from scipy.spatial.distance import cdist, directed_hausdorff, pdist
from scipy.spatial.transform import Rotation

from c2np.carving import carve
from c2np.lattice import LatticeParameters
from c2np.metrics import (
    InverseTarget,
    Metric,
    ReferenceSummary,
    composition_distance,
    forward_failure,
    forward_metrics,
    forward_penalties,
    hull_volume_ratio,
    inverse_metrics,
    inverse_penalties,
    matched_sq_distances,
    pair_distance_counts,
    pair_distance_error,
    permutation_invariant_lattice_rmse,
)
from helpers import perovskite


def _particle(radius: float = 8.0, quat=None):
    p = carve(perovskite(), radius, quaternion=quat).particle
    return p.numbers, p.positions_angstrom


def _score(zp, xp, zg, xg, radius=8.0):
    return forward_metrics(zp, xp, zg, xg, radius_angstrom=radius)


def test_perfect_prediction_scores_perfectly() -> None:
    z, x = _particle()
    s = _score(z, x, z, x)
    assert s.ok and s.failure_reason is None
    v = s.values
    for key in ("f1@0.1", "precision@0.1", "recall@0.1", "f1@0.5"):
        assert v[key] == 1.0
    for key in ("count_error", "composition_distance", "hausdorff", "chamfer", "matched_rmsd",
                "hull_volume_rel_error", "pair_distance_error", "paper_rmsd",
                "paper_abs_delta_hull_volume", "paper_rdf_energy"):
        assert v[key] == 0.0, key
    assert s.details["matched_rmsd_certified"]
    assert v["hull_volume_ratio"] == 1.0  # a perfect prediction scores 1
    # the paper's ratio against the sphere is below 1 even for a perfect prediction
    assert 0.0 < v["volume_ratio_sphere_paper"] < 1.0
    ref = ReferenceSummary.from_particle(z, x, radius_angstrom=8.0)
    assert v["volume_ratio_sphere_paper"] == pytest.approx(ref.volume_ratio_sphere_paper)


def test_hull_volume_ratio_is_the_ratio_of_the_hulls() -> None:
    z, x = _particle()
    assert _score(z, 1.1 * x, z, x).values["hull_volume_ratio"] == pytest.approx(1.1 ** 3)
    assert _score(z, 0.5 * x, z, x).values["hull_volume_ratio"] == pytest.approx(0.125)
    assert hull_volume_ratio(0.0, 0.0) == 1.0 and hull_volume_ratio(5.0, 0.0) == 0.0


def test_shuffling_atom_order_changes_nothing() -> None:
    z, x = _particle()
    rng = np.random.default_rng(0)
    xp = x + rng.normal(scale=0.08, size=x.shape)
    keep = rng.random(len(z)) > 0.05
    zp, xp = z[keep], xp[keep]
    a = _score(zp, xp, z, x).values
    perm_p = rng.permutation(len(zp))
    perm_g = rng.permutation(len(z))
    b = _score(zp[perm_p], xp[perm_p], z[perm_g], x[perm_g]).values
    assert a.keys() == b.keys()
    for k in a:
        assert a[k] == pytest.approx(b[k], rel=1e-10, abs=1e-12), k


def test_rotating_both_sides_changes_nothing() -> None:
    z, x = _particle()
    rng = np.random.default_rng(1)
    xp = x + rng.normal(scale=0.1, size=x.shape)
    rot = Rotation.from_quat([0.3, -0.2, 0.5, 0.78]).as_matrix()
    a = _score(z, xp, z, x).values
    b = _score(z, xp @ rot.T, z, x @ rot.T).values
    for k in a:
        assert a[k] == pytest.approx(b[k], rel=1e-9, abs=1e-9), k


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2 ** 31), st.floats(0.0, 0.6), st.floats(0.0, 0.3))
def test_random_predictions_are_order_and_rotation_invariant(seed: int, noise: float,
                                                             drop: float) -> None:
    rng = np.random.default_rng(seed)
    z, x = _particle(6.0)
    keep = rng.random(len(z)) >= drop
    zp = z[keep]
    xp = x[keep] + rng.normal(scale=noise, size=(int(keep.sum()), 3))
    base = _score(zp, xp, z, x, radius=6.0)
    rot = Rotation.random(random_state=seed % 1000).as_matrix()
    perm = rng.permutation(len(zp))
    other = _score(zp[perm], xp[perm] @ rot.T, z, x @ rot.T, radius=6.0)
    for k, v in base.values.items():
        assert other.values[k] == pytest.approx(v, rel=1e-8, abs=1e-8), k
    assert 0.0 <= base.values["f1@0.1"] <= base.values["f1@0.5"] <= 1.0


def test_shift_of_0p2_angstrom() -> None:
    z, x = _particle()
    s = _score(z, x + np.array([0.2, 0.0, 0.0]), z, x).values
    assert s["f1@0.1"] == 0.0 and s["precision@0.1"] == 0.0
    assert s["f1@0.5"] == 1.0 and s["recall@0.5"] == 1.0
    assert s["matched_rmsd"] == pytest.approx(0.2, abs=1e-12)
    assert s["paper_rmsd"] == pytest.approx(0.2 / math.sqrt(3), abs=1e-12)
    assert s["hausdorff"] == pytest.approx(0.2, abs=1e-12)
    assert s["chamfer"] == pytest.approx(0.2, abs=1e-12)
    assert s["pair_distance_error"] == 0.0  # a rigid shift keeps every pair distance


def test_hand_computed_small_case() -> None:
    zg = np.array([1, 1])
    xg = np.array([[0.0, 0, 0], [1.0, 0, 0]])
    zp = np.array([1])
    xp = np.array([[0.0, 0, 0.3]])
    v = _score(zp, xp, zg, xg, radius=2.0).values
    d = math.sqrt(1 + 0.09)
    assert v["count_error"] == pytest.approx(0.5)
    assert v["precision@0.5"] == 1.0 and v["recall@0.5"] == 0.5
    assert v["f1@0.5"] == pytest.approx(2 / 3)
    assert v["f1@0.1"] == 0.0
    assert v["hausdorff"] == pytest.approx(d)
    assert v["chamfer"] == pytest.approx(0.5 * (0.3 + (0.3 + d) / 2))
    assert v["matched_rmsd"] == pytest.approx(0.3)
    assert v["composition_distance"] == 0.0
    # one pair each side -> both histograms are empty / one pair at 1 Å (bin 12)
    assert pair_distance_counts(xg)[12] == 1 and pair_distance_counts(xg).sum() == 1
    assert v["pair_distance_error"] == 1.0


def test_composition_distance_hand_computed() -> None:
    assert composition_distance(np.array([1, 1, 19]), np.array([1, 19, 19, 19])) == pytest.approx(5 / 12)
    assert composition_distance(np.array([1]), np.array([8])) == 1.0


def test_pair_histogram_bins_and_error() -> None:
    x = np.array([[0.0, 0, 0], [1.0, 0, 0], [3.0, 0, 0], [0.0, 20.0, 0]])
    c = pair_distance_counts(x)
    assert c.sum() == 3 and c[12] == 1 and c[25] == 1 and c[38] == 1  # 1, 2, 3 Å; 20 Å out
    assert pair_distance_error(c, 4, c, 4) == 0.0
    assert pair_distance_error(np.zeros_like(c), 4, c, 4) == 1.0


def test_maximum_matching_beats_min_cost_assignment() -> None:
    # p1 sits on g1 and is 0.49 Å from g2; p2 is 0.49 Å from g1 and 0.6 Å from g2.
    cos_t = 1 - 0.36 / (2 * 0.49 ** 2)
    sin_t = math.sqrt(1 - cos_t ** 2)
    xg = np.array([[0.0, 0, 0], [0.49, 0, 0]])
    xp = np.array([[0.0, 0, 0], [0.49 * cos_t, 0.49 * sin_t, 0]])
    z = np.array([1, 1])
    cost = cdist(xp, xg, "sqeuclidean")
    ri, ci = linear_sum_assignment(cost)
    kept = int(np.sum(np.sqrt(cost[ri, ci]) < 0.5))
    assert kept == 1  # the minimum-cost assignment keeps one close pair ...
    v = _score(z, xp, z, xg, radius=2.0).values
    assert v["f1@0.5"] == 1.0  # ... the maximum matching pairs both
    assert v["matched_rmsd"] == pytest.approx(math.sqrt(0.36 / 2))


def test_failures_get_penalties_never_best() -> None:
    z, x = _particle(6.0)
    ref = ReferenceSummary.from_particle(z, x, radius_angstrom=6.0)
    bad = x.copy()
    bad[3, 1] = np.nan
    cases = {"nan": (z, bad), "empty": (np.zeros(0, int), np.zeros((0, 3))),
             "missing": (None, None), "unknown Z": (np.full(len(z), 200), x)}
    pen = forward_penalties(ref)
    for name, (zp, xp) in cases.items():
        s = forward_metrics(zp, xp, z, x, reference=ref)
        assert not s.ok and s.failure_reason, name
        assert s.values == pen
        assert s.values["f1@0.1"] == 0.0 and s.values["hausdorff"] == 12.0
        assert s.values["volume_ratio_sphere_paper"] == 0.0 and s.values["pair_distance_error"] == 1.0
        assert s.values["hull_volume_ratio"] == 0.0
        assert all(np.isfinite(list(s.values.values())))


def test_paper_numbers_match_straightforward_recomputation() -> None:
    rng = np.random.default_rng(3)
    z, x = _particle(7.0, quat=[0.1, 0.2, 0.3, math.sqrt(1 - 0.14)])
    keep = rng.random(len(z)) > 0.1
    zp = z[keep]
    xp = x[keep] + rng.normal(scale=0.15, size=(int(keep.sum()), 3))
    v = _score(zp, xp, z, x, radius=7.0).values
    haus = max(directed_hausdorff(xp, x)[0], directed_hausdorff(x, xp)[0])
    assert v["paper_hausdorff"] == pytest.approx(haus, rel=1e-12)
    hp = np.histogram(pdist(xp), bins=128, range=(0, 10), density=True)[0]
    hg = np.histogram(pdist(x), bins=128, range=(0, 10), density=True)[0]
    assert v["paper_rdf_energy"] == pytest.approx(float(np.sum((hp - hg) ** 2)), rel=1e-9)
    dv = abs(ConvexHull(xp).volume - ConvexHull(x).volume)
    assert v["paper_abs_delta_hull_volume"] == pytest.approx(dv, rel=1e-9)
    # RMSD: dense assignment within each element, normalised by 3N as the paper
    total, n = 0.0, 0
    for e in np.unique(zp):
        c = cdist(xp[zp == e], x[z == e], "sqeuclidean")
        ri, ci = linear_sum_assignment(c)
        total += c[ri, ci].sum()
        n += len(ri)
    assert v["paper_rmsd"] == pytest.approx(math.sqrt(total / (3 * n)), rel=1e-9)
    assert v["matched_rmsd"] == pytest.approx(math.sqrt(total / n), rel=1e-9)


def test_sparse_assignment_equals_dense() -> None:
    rng = np.random.default_rng(4)
    g = rng.uniform(-10, 10, size=(700, 3))
    pick = rng.permutation(700)[:650]
    for noise, must_certify in ((0.3, True), (0.6, False)):
        p = g[pick] + rng.normal(scale=noise, size=(650, 3))
        res = matched_sq_distances(p, g)  # 650 x 700 > dense limit: sparse path
        c = cdist(p, g, "sqeuclidean")
        ri, ci = linear_sum_assignment(c)
        opt = c[ri, ci].sum()
        assert res.n_pairs == 650 and res.method == "auction"
        assert res.exact or not must_certify
        # exact or not, it is a valid assignment and a valid bound around the optimum
        assert res.sum_sq_angstrom2 >= opt * (1 - 1e-12)
        assert res.lower_bound_angstrom2 <= opt * (1 + 1e-12)
        assert res.sum_sq_angstrom2 == pytest.approx(opt, rel=1e-10)


def test_collapsed_prediction_falls_back_to_a_valid_upper_bound() -> None:
    rng = np.random.default_rng(5)
    g = rng.uniform(-10, 10, size=(700, 3))
    p = np.zeros((650, 3))  # every atom on one point: no full matching among near neighbours
    res = matched_sq_distances(p, g)
    c = cdist(p, g, "sqeuclidean")
    ri, ci = linear_sum_assignment(c)
    opt = c[ri, ci].sum()
    assert res.n_pairs == 650 and np.isfinite(res.sum_sq_angstrom2)
    assert res.sum_sq_angstrom2 >= opt * (1 - 1e-12)
    assert res.lower_bound_angstrom2 <= opt * (1 + 1e-12)
    if res.exact:  # a certified value must be the optimum
        assert res.sum_sq_angstrom2 == pytest.approx(opt, rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 120), st.floats(0.3, 6.0), st.integers(0, 2 ** 31))
def test_pair_counts_equal_pdist_histogram(n: int, scale: float, seed: int) -> None:
    x = np.random.default_rng(seed).normal(size=(n, 3)) * scale
    ref = np.histogram(pdist(x), bins=128, range=(0, 10))[0]
    assert np.array_equal(pair_distance_counts(x), ref)


def test_pair_counts_collapsed_spread_and_rotation_stable() -> None:
    assert pair_distance_counts(np.zeros((60, 3)))[0] == 60 * 59 // 2
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.normal(size=(80, 3)) * 3, rng.normal(size=(80, 3)) * 3 + 3e4])
    ref = np.histogram(pdist(x), bins=128, range=(0, 10))[0]
    assert np.array_equal(pair_distance_counts(x), ref)  # far apart: sparse column lookup
    # a lattice has pairs at exactly 10 Å (a bin edge): every orientation bins them alike
    z, x = _particle(10.0)
    _, xr = _particle(10.0, quat=[0.2, -0.4, 0.1, math.sqrt(1 - 0.21)])
    assert np.array_equal(pair_distance_counts(x), pair_distance_counts(xr))


def _target() -> InverseTarget:
    return InverseTarget(LatticeParameters(4.0, 5.0, 6.0, 90.0, 100.0, 90.0), 14)


def test_inverse_perfect_and_hand_computed() -> None:
    t = _target()
    v = inverse_metrics(t.params, 14, t).values
    assert all(v[k] == 1.0 for k in v if k.endswith("accuracy") or "accuracy_" in k)
    assert v["lattice_rmse_paper"] == 0.0 and v["angle_rmse"] == 0.0
    p = t.params + np.array([0.3, 0.0, 0.0, 0.0, 0.4, 0.0])
    v = inverse_metrics(p, 14, t).values
    assert v["abs_error_a"] == pytest.approx(0.3) and v["abs_error_beta"] == pytest.approx(0.4)
    assert v["length_rmse"] == pytest.approx(math.sqrt(0.09 / 3))
    assert v["angle_rmse"] == pytest.approx(math.sqrt(0.16 / 3))
    assert v["lattice_rmse_paper"] == pytest.approx(math.sqrt(0.25 / 6))
    assert v["joint_accuracy_paper"] == 1.0 and v["joint_accuracy_strict"] == 0.0  # 0.3 > 1 % of 4
    v = inverse_metrics(t.params, 13, t).values  # P2/c predicted, P2_1/c (14) is the target
    assert v["spacegroup_accuracy"] == 0.0 and v["joint_accuracy_paper"] == 0.0
    assert v["crystal_system_accuracy"] == 1.0 and v["bravais_accuracy"] == 1.0
    v = inverse_metrics(t.params, 225, t).values
    assert v["crystal_system_accuracy"] == 0.0 and v["bravais_accuracy"] == 0.0


def test_permutation_invariant_lattice_error() -> None:
    t = _target().params
    swapped = np.array([5.0, 4.0, 6.0, 100.0, 90.0, 90.0])  # a<->b with alpha<->beta
    assert permutation_invariant_lattice_rmse(swapped, t) == 0.0
    assert inverse_metrics(swapped, 14, _target()).values["lattice_rmse_paper"] > 1.0


def test_inverse_failures() -> None:
    t = _target()
    pen = inverse_penalties(t)
    for params, sg in [([np.nan, 5, 6, 90, 100, 90], 14), ([4, -5, 6, 90, 100, 90], 14),
                       ([4, 5, 6, 90, 180, 90], 14), (t.params, 231), (t.params, 0),
                       (None, None), (t.params, float("nan"))]:
        s = inverse_metrics(params, sg, t)
        assert not s.ok and s.values == pen
    assert pen["spacegroup_accuracy"] == 0.0 and pen["abs_error_a"] == 4.0
    assert pen["abs_error_beta"] == 100.0 and pen["abs_error_alpha"] == 90.0


def test_metric_enumeration_names_every_score_once() -> None:
    """The Metric enumeration is the one list of names: the score dicts of both tasks and
    their failure values use exactly its members; the headline lists are members too."""
    from c2np.metrics import (
        HEADLINE,
        PRIMARY,
        Metric,
        forward_metric_info,
        forward_penalties,
        inverse_metric_info,
        inverse_penalties,
    )

    pos = np.array([[0.0, 0.0, 0.0], [1.5, 0.0, 0.0], [0.0, 1.5, 0.0], [0.0, 0.0, 1.5]])
    nums = np.array([1, 1, 8, 8])
    ref = ReferenceSummary.from_particle(nums, pos, radius_angstrom=2.0)
    fwd = {m.value for m in Metric if m.task == "forward"}
    inv = {m.value for m in Metric if m.task == "inverse"}
    assert set(forward_metrics(nums, pos, nums, pos, reference=ref).values) == fwd
    assert set(forward_penalties(ref)) == fwd == set(forward_metric_info())
    assert set(inverse_metrics(_target().params, 14, _target()).values) == inv
    assert set(inverse_penalties(_target())) == inv == set(inverse_metric_info())
    assert Metric("f1@0.1") is Metric.F1_0_1 and Metric.F1_0_1 == "f1@0.1"
    assert {"f1@0.1": 1}[Metric.F1_0_1] == 1  # a member and its name are one dict key
    assert Metric.CHAMFER.unit == "Å" and Metric.CHAMFER.higher_is_better is False
    assert Metric.JOINT_ACCURACY_PAPER.higher_is_better and Metric.VOLUME_RATIO_SPHERE_PAPER.higher_is_better is None
    assert Metric.VOLUME_RATIO_SPHERE_PAPER.paper and Metric.VOLUME_RATIO_SPHERE_PAPER.perfect is None
    assert Metric.HULL_VOLUME_RATIO.perfect == 1.0 and Metric.HULL_VOLUME_RATIO.higher_is_better is None
    assert "volume_ratio" not in {m.value for m in Metric}  # the ambiguous name is gone
    assert Metric.F1_0_1.perfect == 1.0 and Metric.CHAMFER.perfect == 0.0
    assert all(m.task == task for task, ms in HEADLINE.items() for m in ms)
    assert PRIMARY["forward"] in HEADLINE["forward"] and PRIMARY["inverse"] in HEADLINE["inverse"]
    custom = forward_metric_info((0.3,))
    assert "f1@0.3" in custom and custom["f1@0.3"].better == "higher"


def test_a_cloud_denser_than_matter_fails_in_bounded_time() -> None:
    """A prediction whose atoms have more than ``prediction_neighbours`` neighbours within
    the histogram range on average (here 2,400 atoms within 1 Å) is one failed sample
    naming the limit; raised, the same prediction is scored."""
    from c2np import limits

    cell = perovskite()
    ref = carve(cell, 21.0).particle
    rng = np.random.default_rng(3)
    z = ref.numbers[:2400]
    x = rng.uniform(-1.0, 1.0, size=(len(z), 3))
    summary = ReferenceSummary.from_particle(ref.numbers, ref.positions_angstrom, radius_angstrom=21.0)
    res = forward_metrics(z, x, ref.numbers, ref.positions_angstrom, reference=summary)
    assert not res.ok and "prediction_neighbours" in res.failure_reason
    assert res.values == forward_failure("x", summary).values
    with limits.override(prediction_neighbours=1e6):
        raised = forward_metrics(z, x, ref.numbers, ref.positions_angstrom, reference=summary)
    assert raised.ok and raised.values["pair_distance_error"] > 0.9
    # a particle of ordinary density is far below the limit
    good = forward_metrics(ref.numbers, ref.positions_angstrom, ref.numbers, ref.positions_angstrom,
                           reference=summary)
    assert good.ok and good.values["f1@0.5"] == 1.0


def test_the_metric_tables_of_the_docs_state_direction_and_perfect_value() -> None:
    """docs/explanation/metrics.md lists every metric with its direction and perfect value, as
    :class:`Metric` has them; a perfect prediction scores that value."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "explanation" / "metrics.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(" | ")]
        if line.startswith("| `") and len(cells) == 6:
            for key in cells[0].lstrip("| ").split(", "):
                rows[key.strip("`").split("`")[0]] = cells
    z, x = _particle()
    perfect = _score(z, x, z, x).values
    for m in Metric:
        name = m.value if "@" not in m.value else m.value.split("@")[0] + "@τ"
        if m.value.startswith("abs_error"):
            name = "abs_error_a"
        assert name in rows, m.value
        better, value = rows[name][3], rows[name][4]
        if m.perfect is None:
            assert better.startswith("closer to the reference") and "below 1" in value
            assert 0 < perfect[m.value] < 1
        else:
            assert better == m.better and float(value) == m.perfect, (m.value, better, value)
            if m.task == "forward":
                assert perfect[m.value] == pytest.approx(m.perfect), m.value
