"""MatterGen's generative process for the task-2 crystal generator
(c2np.models.inverse.mattergen, process "mattergen"): the lattice noise is
symmetric with the variance kept, the limit follows the atom count, the coordinate sigma is
divided by n^(1/3), the type process masks and reveals within the composition, and a trained
generator samples cells of the asked composition, with and without a template."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from c2np.models.inverse import mattergen as mgp


def test_symmetric_noise_keeps_every_elements_variance() -> None:
    z = mgp.symmetric_noise((40_000, 3, 3), torch.Generator().manual_seed(0))
    assert torch.equal(z, z.transpose(-1, -2))
    var = z.var(dim=0)
    assert torch.allclose(var, torch.ones(3, 3), atol=0.03), var
    assert abs(float(torch.corrcoef(torch.stack([z[:, 0, 0], z[:, 1, 1]]))[0, 1])) < 0.03


def test_symmetric_polar_factor_keeps_the_metric_and_drops_the_rotation() -> None:
    rng = np.random.default_rng(1)
    lat = torch.as_tensor(rng.normal(size=(5, 3, 3)) + 3 * np.eye(3))
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    p = mgp.symmetric_polar_factor(lat)
    assert torch.allclose(p, p.transpose(-1, -2), atol=1e-10)
    assert torch.allclose(p @ p.transpose(-1, -2), lat @ lat.transpose(-1, -2), atol=1e-9)
    rotated = mgp.symmetric_polar_factor(lat @ torch.as_tensor(q).T)    # vectors rotated: same P
    assert torch.allclose(rotated, p, atol=1e-9)


def test_limit_and_sigma_follow_the_atom_count() -> None:
    n = torch.tensor([5.0, 40.0])
    mean, std = mgp.limit_mean_std(n, 0.5, torch.zeros(3, 3), 1.0)
    length = (n / 0.5) ** (1 / 3)
    assert torch.allclose(mean, length[:, None, None] * torch.eye(3))
    assert torch.allclose(std, mgp.LIMIT_STD_REL * length)
    assert torch.allclose(std[1] / std[0], torch.tensor(2.0))                       # 8x the atoms
    mean_n, std_n = mgp.limit_mean_std(n, 0.5, torch.full((3, 3), 1.0), 2.0)        # normalised units
    assert torch.allclose(mean_n, (mean - 1.0) / 2.0) and torch.allclose(std_n, std / 2.0)
    t = torch.tensor([0.0, 1.0])
    sig = mgp.coord_sigma(t, torch.tensor([8.0, 8.0]))
    assert torch.allclose(sig, torch.tensor([mgp.COORD_SIGMA_MIN, mgp.COORD_SIGMA_MAX]) / 2.0)
    assert float(mgp.mean_coeff(torch.tensor(0.0))) == 1.0 and float(mgp.mean_coeff(torch.tensor(1.0))) < 0.01


def test_types_are_masked_at_rate_t_and_revealed_within_the_composition() -> None:
    g = torch.Generator().manual_seed(2)
    slot = torch.tensor([[0, 0, 0, 1, 2, 0]] * 4000)
    mask = torch.tensor([[True] * 5 + [False]] * 4000)
    t = torch.full((4000,), 0.3)
    known = torch.arange(4000) % 2 == 0
    out, masked = mgp.mask_types(slot, mask, t, 9, known, g)
    assert not masked[known].any() and not masked[:, 5].any()                      # given rows, padding
    assert abs(float(masked[~known][:, :5].float().mean()) - 0.3) < 0.02
    assert torch.equal(out[masked], torch.full_like(out[masked], 9)) and torch.equal(out[~masked], slot[~masked])
    # reveal everything of a fully masked cell: exactly the composition, however the logits lean
    logits = torch.zeros(3, 5, 3)
    logits[..., 0] = 5.0                       # the network wants slot 0 everywhere
    budget = torch.tensor([[3, 1, 1], [2, 2, 1], [0, 0, 5]])
    got = mgp.unmask_types(torch.full((3, 5), 9), logits, budget.clone(), 1.0, 9, g)
    for b in range(3):
        assert torch.bincount(got[b], minlength=3).tolist() == [[3, 1, 1], [2, 2, 1], [0, 0, 5]][b]
    half = mgp.unmask_types(torch.full((1, 200), 9), torch.zeros(1, 200, 3), torch.tensor([[100, 50, 50]]),
                            0.25, 9, g)
    assert 30 <= int((half != 9).sum()) <= 70                                       # about a quarter revealed


@pytest.mark.parametrize("known_fraction", [0.5, 1.0])
def test_a_trained_generator_samples_the_asked_composition(known_fraction: float) -> None:
    from c2np.carving import carve
    from c2np.models.inverse.config import GenConfig
    from c2np.models.inverse.examples import cell_example
    from c2np.models.inverse.templates import template_of
    from c2np.models.inverse.training import fit_generator
    from c2np.particle_descriptor import describe
    from helpers import perovskite

    cell = perovskite()
    ex = cell_example(describe(carve(cell, 7.0).particle), cell)
    cfg = GenConfig(process="mattergen", hidden=16, layers=1, n_freq=2, steps=5, train_steps=4, batch=4,
                    sampler="pc", lattice_param="x0", type_known_fraction=known_fraction)
    rows: list[dict] = []
    model = fit_generator([ex], cfg, log=rows.append)
    assert {"lattice", "frac", "types", "comp"} <= set(rows[-1]) and np.isfinite(rows[-1]["loss"])
    assert float(model.limit_density) > 0
    feats = torch.as_tensor(model.features([ex.descriptor] * 3))
    comp = model.compositions[0]
    for template in (None, template_of(ex.lattice_angstrom, ex.frac, ex.slots, "KMgH3")):
        cells = model.sample(feats, [comp] * 3, torch.Generator().manual_seed(3), template)
        for x_l, frac, slots in cells:
            assert np.all(np.isfinite(x_l)) and np.all((frac >= 0) & (frac < 1))
            assert np.bincount(slots, minlength=len(comp))[: len(comp)].tolist() == list(comp)
            assert np.allclose(x_l, x_l.T, atol=1e-5) or template is not None
