"""Tests of the generator building blocks added for the overfit gate: lattice-site vectors,
sphere confinement, and device-clean batches."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from scipy.spatial import cKDTree  # noqa: E402

from c2np.carving import carve  # noqa: E402
from c2np.catalog import get_cell  # noqa: E402
from c2np.models.backbone import collate_conditions, collate_particles, lattice_site_vectors  # noqa: E402
from c2np.models.data import species_slots  # noqa: E402
from c2np.models.generators import (  # noqa: E402
    composition_budget,
    confine_to_ball,
    reveal_confident,
)
from c2np.models.overfit import gate_condition  # noqa: E402


@pytest.mark.parametrize("material", ["KMgH3", "RbSrH3", "LiBeH3"])
def test_lattice_site_vectors_match_brute_force(material):
    """The nearest site of each species equals the nearest atom of that species in a large
    carved sphere (cubic, hexagonal-angle and 20-atom cells)."""
    cell = get_cell(material)
    cond, target = gate_condition(cell, 5.0, seed=3)
    c = collate_conditions([cond])
    rng = np.random.default_rng(0)
    pos = rng.uniform(-4, 4, size=(60, 3))
    vec, dist = lattice_site_vectors(torch.as_tensor(pos, dtype=torch.float32),
                                     torch.zeros(60, dtype=torch.long), c, k=3)
    big = carve(cell, 14.0, centre_frac=cond.centre_frac, quaternion=cond.quaternion).particle
    for s, z in enumerate(species_slots(cell)):
        tree = cKDTree(big.positions_angstrom[big.numbers == z])
        d_ref, j = tree.query(pos, k=3)
        np.testing.assert_allclose(dist[:, s].numpy(), d_ref, atol=1e-4)
        np.testing.assert_allclose(pos + vec[:, s, 0].numpy(), tree.data[j[:, 0]], atol=1e-4)
    assert np.all(dist[:, len(species_slots(cell)):].numpy() >= 999)  # absent slots


def test_confine_to_ball_reflects_only_outside_points():
    u = torch.tensor([[0.5, 0.0, 0.0], [1.2, 0.0, 0.0], [0.0, 3.5, 0.0]])
    out = confine_to_ball(u, 0.0)
    np.testing.assert_allclose(out.norm(dim=-1).numpy(), [0.5, 0.8, 0.0], atol=1e-6)
    assert torch.equal(confine_to_ball(u, -1.0), u)  # disabled


def test_batches_move_to_a_device():
    cond, target = gate_condition(get_cell("KMgH3"), 5.0)
    c = collate_conditions([cond]).to("meta")
    p = collate_particles([target], [cond]).to("meta")
    assert all(v.device.type == "meta" for v in c.tensors().values())
    assert p.pos.device.type == "meta" and p.batch.device.type == "meta"


def test_composition_budget_sums_to_the_count_by_largest_remainder():
    S = 8
    probs = torch.zeros(2, S)
    probs[0, :3] = torch.tensor([0.29, 0.33, 0.38])  # x 21 = 6.09, 6.93, 7.98
    probs[1, :2] = torch.tensor([0.5, 0.5])
    b = composition_budget(probs, torch.tensor([21, 5]))
    assert b[0, :3].tolist() == [6, 7, 8] and int(b[0, 3:].sum()) == 0
    assert b.sum(-1).tolist() == [21, 5] and sorted(b[1, :2].tolist()) == [2, 3]


def test_reveal_confident_respects_budget_count_and_confidence():
    g = torch.Generator().manual_seed(0)
    S = 8
    batch = torch.tensor([0] * 6 + [1] * 3)
    probs = torch.full((9, S), 1e-9)
    probs[:, 0] = 1.0  # every atom prefers slot 0 ...
    probs[2] = torch.zeros(S)
    probs[2, 1] = 1.0  # ... but atom 2, certain of slot 1
    masked = torch.ones(9, dtype=torch.bool)
    masked[0] = False  # already revealed: never drawn again
    budget = torch.zeros(2, S, dtype=torch.long)
    budget[0, :2] = torch.tensor([2, 3])
    budget[1, :2] = torch.tensor([0, 3])
    reveal, types = reveal_confident(probs, masked, torch.tensor([4, 2]), batch, budget, g)
    assert not reveal[0] and int(reveal[:6].sum()) == 4 and int(reveal[6:].sum()) == 2
    assert reveal[2] and types[2] == 1  # the confident atom is revealed with its slot
    assert torch.bincount(types[:6][reveal[:6]], minlength=S)[:2].tolist() == [2, 2]  # slot 0 budget 2
    assert types[6:][reveal[6:]].tolist() == [1, 1]  # slot 0 has no budget in sample 1
    assert budget[0].tolist()[:2] == [0, 1] and budget[1].tolist()[:2] == [0, 1]
    assert torch.all(types[~reveal] == -1)
