"""c2np.evaluation.misses: the per-atom classification of a prediction's misses."""

from __future__ import annotations

import numpy as np

from c2np.evaluation import misses as diag
from c2np.metrics import forward_metrics


def _lattice(a: float, reach: float) -> tuple[np.ndarray, np.ndarray]:
    """Simple cubic lattice of spacing a (Å) within ``reach`` of the origin, two species
    alternating (rock salt): numbers and positions."""
    n = int(reach / a) + 1
    g = np.arange(-n, n + 1)
    ijk = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    x = ijk * a
    keep = np.linalg.norm(x, axis=1) <= reach
    z = np.where(ijk.sum(1) % 2 == 0, 11, 17)
    return z[keep], x[keep]


def test_diagnose_classifies_each_kind_and_matches_harness_f1() -> None:
    R = 6.0
    sz, sx = _lattice(2.0, R + 3.0)
    inside = np.linalg.norm(sx, axis=1) <= R
    rz, rx = sz[inside], sx[inside]
    # the prediction: the reference minus 3 atoms (holes), plus one double, one atom on a
    # site outside R, one atom of the wrong species on an inside site, one off-site atom
    pz, px = rz[3:].copy(), rx[3:].copy() + 0.05
    out_site = np.flatnonzero(~inside)[0]
    wrong = 5  # an inside reference atom still predicted; put the other species on it
    pz = np.concatenate([pz, [pz[0], sz[out_site], 28 - rz[wrong]]])  # 11 <-> 17
    px = np.concatenate([px, [px[0] + 0.1], [sx[out_site]], [rx[wrong]]])
    pz, px = np.append(pz, 11), np.vstack([px, [1.0, 1.0, 1.0]])  # between sites
    m = diag.diagnose(pz, px, rz, rx, sz, sx, R)
    assert sorted(m.extra_kind) == ["double", "off-site", "outside-site", "wrong-species"]
    assert len(m.hole_z) == 3
    assert np.allclose(np.sort(m.hole_depth_angstrom), np.sort(R - np.linalg.norm(rx[:3], axis=1)))
    site_out = m.extra_site_out_angstrom[list(m.extra_kind).index("outside-site")]
    assert np.isclose(site_out, np.linalg.norm(sx[out_site]) - R)
    harness = forward_metrics(pz, px, rz, rx, radius_angstrom=R)
    assert np.isclose(m.f1, harness.values["f1@0.5"])
    assert m.f1_count_bound == 2 * len(rz) / (len(rz) + len(pz))


def test_summarise_splits_loss_into_count_and_site_choice() -> None:
    R = 5.0
    sz, sx = _lattice(2.0, R + 3.0)
    inside = np.linalg.norm(sx, axis=1) <= R
    rz, rx = sz[inside], sx[inside]
    exact = diag.diagnose(rz, rx, rz, rx, sz, sx, R)
    short = diag.diagnose(rz[4:], rx[4:], rz, rx, sz, sx, R)  # 4 holes, count 4 low
    out = diag.summarise([("a", R, exact), ("b", R, short)])
    assert exact.f1 == 1.0
    assert np.isclose(out["f1"], (1.0 + short.f1) / 2)
    # the short particle's loss is all count (its atoms are all on correct sites)
    assert np.isclose(out["loss_from_site_choice"], 0.0)
    assert np.isclose(out["loss_from_count"], out["loss"])
    assert out["atoms"]["holes"] == 4 and out["count_sign"]["under"]["n"] == 1
