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
from c2np.models.generators import confine_to_ball  # noqa: E402
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
