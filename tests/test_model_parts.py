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
from c2np.models.forward.cdvae import confine_to_ball  # noqa: E402
from c2np.models.forward.species import composition_budget, reveal_confident  # noqa: E402
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


def test_adit_latent_corrector_runs_only_in_its_window():
    """ADiT's latent Langevin corrector
    evaluates the DiT once more (twice with guidance) after every Euler step that lands at a
    time in ``ADiT.corrector_window``, and changes the sample; without corrector steps the
    sampler is the plain ODE."""
    from collections import Counter
    from dataclasses import replace

    from c2np.models.config import get_config
    from c2np.models.forward import ADiT

    cond, _ = gate_condition(get_cell("KMgH3"), 4.5)
    cfg = replace(get_config("tiny"), corrector_steps=1, corrector_step=0.4, cfg_weight=1.0, self_cond=True)
    torch.manual_seed(0)
    model = ADiT(cfg).eval()
    calls = []
    clean = model.clean

    def counted(*args, **kwargs):
        calls.append(float(args[2][0]))
        return clean(*args, **kwargs)

    model.clean = counted  # type: ignore[method-assign]
    out = model.sample([cond], torch.Generator().manual_seed(0), steps=10)
    lo, hi = ADiT.corrector_window
    in_window = [s / 10 for s in range(1, 11) if lo <= s / 10 <= hi]
    # every predictor time 0, 0.1, ..., 0.9 and every corrector time in the window, each twice
    # (conditional and unconditional evaluation of the guided DiT)
    expected = Counter({round(i / 10, 4): 2 for i in range(10)}) + Counter({round(s, 4): 2 for s in in_window})
    assert Counter(round(t, 4) for t in calls) == expected and len(in_window) == 8
    assert np.all(np.isfinite(out[0].positions_angstrom))
    plain = replace(cfg, corrector_steps=0)
    model.cfg = plain
    calls.clear()
    out0 = model.sample([cond], torch.Generator().manual_seed(0), steps=10)
    assert len(calls) == 2 * 10
    assert out0[0].n_atoms != out[0].n_atoms or not np.allclose(out0[0].positions_angstrom, out[0].positions_angstrom)


def test_split_edge_messages_equal_the_concatenated_edge_mlp() -> None:
    """Sampling (no gradients) projects the node blocks of the edge MLP's first layer once per
    atom; the messages, and the layer's outputs, equal the concatenated form's up to float
    rounding (the training step keeps the concatenated form)."""
    from c2np.models.backbone import EGNNLayer, gaussian_rbf, knn_graph

    torch.manual_seed(0)
    layer = EGNNLayer(16, 8, 8.0, True, edge_dim=3)
    for p in layer.parameters():  # a layer far from its init, so every block matters
        torch.nn.init.normal_(p, std=0.3)
    pos = torch.randn(60, 3) * 4.0
    batch = torch.repeat_interleave(torch.arange(3), torch.tensor([25, 20, 15]))
    edges = knn_graph(pos, batch, 6, 5.0)
    h, attr = torch.randn(60, 16), torch.rand(edges.shape[1], 3)
    src, dst = edges
    d2 = ((pos[dst] - pos[src]) ** 2).sum(-1)
    rest = torch.cat([gaussian_rbf(torch.sqrt(d2 + 1e-8), 0.0, 8.0, 8), (d2 / 64.0).clamp(max=10).unsqueeze(-1),
                      attr], -1)
    with torch.no_grad():
        want = layer.edge(torch.cat([h[dst], h[src], rest], -1))
        got = layer.edge_message(h, edges, rest)
        h_fast, x_fast = layer(h, pos, edges, attr)
    assert want.abs().max() > 0.1
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    h_slow, x_slow = layer(h, pos, edges, attr)  # gradients on: the concatenated form
    torch.testing.assert_close(h_fast, h_slow.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x_fast, x_slow.detach(), rtol=1e-5, atol=1e-5)
