import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from c2np.errors import SamplingError
from c2np.orientations import (
    draw_paper_quaternion,
    geodesic_angle_deg,
    min_separation_deg,
    n_rotations,
    sample_orientations,
    site_rotation_group,
)
from c2np.splits import PAPER, STRICT, build_recipes


def test_counts() -> None:
    assert (n_rotations(15), n_rotations(12), n_rotations(9)) == (59, 92, 163)


def test_draw_matches_scipy_rotation_random() -> None:
    a = np.random.default_rng(5)
    b = np.random.default_rng(5)
    for _ in range(5):
        try:
            ref = Rotation.random(rng=b).as_quat()
        except TypeError:  # older scipy
            ref = Rotation.random(random_state=b).as_quat()
        assert np.allclose(draw_paper_quaternion(a), ref, atol=1e-15)


def test_paper_train_grid_first_rotation() -> None:
    s = sample_orientations(59, 15.0, 1337)
    assert np.allclose(s.quaternions[0], (-0.02594647, -0.32133652, 0.09339395, 0.94199108), atol=1e-8)
    assert len(s.quaternions) == 59 and np.all(s.quaternions[:, 3] >= 0)
    assert min_separation_deg(s.quaternions) >= 15.0


def test_paper_recipes_sizes_and_margins(kmgh3) -> None:
    t = build_recipes([kmgh3], PAPER)
    assert len(t) == 2114
    train_q = np.unique(t.quaternion[np.isin(t.split, [0, 1]) & (t.rotation_index > 0)], axis=0)
    assert len(train_q) == 59
    for r in PAPER.id_radii_angstrom + PAPER.ood_radii_angstrom:
        q = t.quaternion[(t.radius_angstrom == r) & (t.rotation_index > 0)]
        ood = r in PAPER.ood_radii_angstrom
        assert len(q) == (163 if ood else 92)
        assert min_separation_deg(q) >= (9.0 if ood else 12.0)
        assert min_separation_deg(q, train_q) >= (4.5 if ood else 6.0)
    # rot_0 is the identity everywhere in the paper protocol
    assert np.allclose(t.quaternion[t.rotation_index == 0], [0, 0, 0, 1])
    counts = t.counts()
    assert counts["val"] == round(0.2 * (counts["train"] + counts["val"]))


def test_sampler_runs_out() -> None:
    with pytest.raises(SamplingError, match="accepted only"):
        sample_orientations(500, 30.0, 1, max_trials=1000)


def test_geodesic_angle() -> None:
    q = Rotation.from_euler("z", 30, degrees=True).as_quat()
    assert geodesic_angle_deg(np.array([0, 0, 0, 1.0]), q) == pytest.approx(30.0)
    assert geodesic_angle_deg(q, -q) == pytest.approx(0.0, abs=1e-6)


def test_site_group_of_cubic_perovskite(kmgh3) -> None:
    g = site_rotation_group(kmgh3)
    assert len(g) == 24  # proper rotations of m-3m at the B site
    g_general = site_rotation_group(kmgh3, (0.1, 0.23, 0.37))
    assert len(g_general) == 1


def test_strict_protocol(kmgh3) -> None:
    t = build_recipes([kmgh3, kmgh3.with_id("other")], STRICT)
    g = site_rotation_group(kmgh3)
    assert not np.any((t.rotation_index == 0) & np.isin(t.split, [2, 3]))  # no identity outside train
    val_radii = set(t.radius_angstrom[t.split == 1].tolist())
    assert val_radii == set(STRICT.val_radii_angstrom)
    m0 = t.material_index == 0
    train_q = np.unique(t.quaternion[m0 & np.isin(t.split, [0, 1]) & (t.rotation_index > 0)], axis=0)
    assert min_separation_deg(train_q, group=g) >= 15.0
    q = t.quaternion[m0 & (t.radius_angstrom == 30)]
    assert min_separation_deg(q, group=g) >= 9.0
    assert min_separation_deg(q, train_q, group=g) >= 4.5
    assert "min_separation_deg" in t.summary


def test_recipes_radius_subset_keeps_orientations(kmgh3) -> None:
    full = build_recipes([kmgh3], PAPER)
    sub = build_recipes([kmgh3], PAPER, radii_angstrom=[6, 10, 30])
    for r in (6, 10, 30):
        assert np.array_equal(full.quaternion[full.radius_angstrom == r], sub.quaternion[sub.radius_angstrom == r])
