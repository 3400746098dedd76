"""CDVAE's process for the task-2 crystal generator (c2np.models.inverse.cdvae, issue 13)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from c2np.models.inverse import cdvae as cdp


def _random_lattices(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.eye(3) * 3.0 + 0.8 * torch.randn(n, 3, 3, generator=g, dtype=torch.float64)


def test_noise_levels_are_geometric_from_begin_to_end() -> None:
    s = cdp.noise_levels(50).double()
    assert s[0].item() == pytest.approx(cdp.SIGMA_BEGIN, rel=1e-6)
    assert s[-1].item() == pytest.approx(cdp.SIGMA_END, rel=1e-6)
    ratios = s[1:] / s[:-1]
    torch.testing.assert_close(ratios, torch.full_like(ratios, ratios[0].item()), rtol=1e-5, atol=0)
    torch.testing.assert_close(cdp.level_time(s.float()), torch.linspace(1, 0, 50), atol=1e-5, rtol=0)
    with pytest.raises(ValueError):
        cdp.noise_levels(1)


def test_lattice_parameters_round_trip_keeps_the_metric() -> None:
    lat = _random_lattices(64, 0)
    back = cdp.lattice_from_parameters(cdp.lattice_parameters(lat))
    gram = lat @ lat.transpose(1, 2)
    torch.testing.assert_close(back @ back.transpose(1, 2), gram, atol=1e-8, rtol=1e-8)
    assert torch.allclose(back[:, 0, 1:], torch.zeros(64, 2, dtype=back.dtype))       # a along x
    assert torch.all(torch.linalg.det(back) > 0)


def test_impossible_angles_still_give_a_cell_of_the_right_lengths() -> None:
    p = torch.tensor([[2.0, 3.0, 4.0, 170.0, 20.0, 25.0], [1.0, 1.0, -1.0, 90.0, 90.0, 90.0]])
    lat = cdp.lattice_from_parameters(p)
    assert torch.isfinite(lat).all()
    torch.testing.assert_close(lat[0].norm(dim=-1), torch.tensor([2.0, 3.0, 4.0]))
    assert lat[1].norm(dim=-1)[2].item() == pytest.approx(1e-3)       # a length is clamped, never < 0


def test_min_image_displacement_is_the_shortest_over_periodic_images() -> None:
    lat = _random_lattices(8, 1)
    g = torch.Generator().manual_seed(2)
    a = torch.rand(8, 6, 3, generator=g, dtype=torch.float64)
    b = torch.rand(8, 6, 3, generator=g, dtype=torch.float64)
    d = cdp.min_image_displacement(a, b, lat)
    shifts = torch.tensor(list(itertools.product(range(-3, 4), repeat=3)), dtype=torch.float64)
    brute = ((b - a)[:, :, None, :] + shifts) @ lat[:, None]                 # (8,6,343,3)
    torch.testing.assert_close(d.norm(dim=-1), brute.norm(dim=-1).min(-1).values, atol=1e-9, rtol=0)
    frac = d @ torch.linalg.inv(lat)                                           # lands on an image of b
    torch.testing.assert_close(torch.remainder(a + frac - b + 0.5, 1.0) - 0.5, torch.zeros_like(a), atol=1e-9, rtol=0)


def test_perturb_moves_atoms_by_isotropic_cartesian_noise() -> None:
    lat = torch.tensor([[[4.0, 0.0, 0.0], [1.0, 3.0, 0.0], [0.5, 0.5, 5.0]]], dtype=torch.float64).expand(200, 3, 3)
    f0 = torch.full((200, 50, 3), 0.5, dtype=torch.float64)
    sig = torch.full((200,), 0.05, dtype=torch.float64)
    ft = cdp.perturb(f0, lat, sig, torch.Generator().manual_seed(3))
    cart = (ft - f0) @ lat
    assert cart.std().item() == pytest.approx(0.05, rel=0.03)
    cov = torch.cov(cart.reshape(-1, 3).T) / 0.05 ** 2
    torch.testing.assert_close(cov, torch.eye(3, dtype=cov.dtype), atol=0.05, rtol=0)


def test_langevin_step_with_the_exact_score_lands_near_the_clean_atoms() -> None:
    lat = torch.eye(3, dtype=torch.float64).expand(400, 3, 3) * 3.0
    g = torch.Generator().manual_seed(4)
    clean = torch.rand(400, 4, 3, generator=g, dtype=torch.float64)
    sigma = 0.02
    noisy = cdp.perturb(clean, lat, torch.full((400,), sigma, dtype=torch.float64), g)
    pred = cdp.min_image_displacement(noisy, clean, lat) / sigma
    out = cdp.langevin_step(noisy, pred, lat, sigma, g)
    err = cdp.min_image_displacement(clean, out, lat)
    # the step moves the whole displacement (STEP_LR_REL = 1) and adds noise of std sqrt(2) sigma
    assert err.std().item() == pytest.approx(math.sqrt(2.0 * cdp.STEP_LR_REL) * sigma, rel=0.05)
    assert abs(err.mean().item()) < 1e-3


def test_kl_divergence_is_zero_at_the_prior_and_positive_elsewhere() -> None:
    mu, lv = torch.zeros(4, 8), torch.zeros(4, 8)
    assert cdp.kl_divergence(mu, lv).item() == 0.0
    assert cdp.kl_divergence(mu + 1.0, lv).item() == pytest.approx(4.0)
    assert cdp.kl_divergence(mu, lv + np.log(2.0)).item() > 0


def test_cdvae_generator_never_sees_a_cell_at_sampling() -> None:
    """The encoder is used in training only: sampling draws z from the prior, so two seeds give
    different cells, and one seed the same cells."""
    from c2np.models.inverse.config import GenConfig
    from c2np.models.inverse.generator import CrystalGenerator
    from c2np.particle_descriptor import N_SLOTS

    cfg = GenConfig(process="cdvae", hidden=16, layers=1, n_freq=2, steps=4, ld_steps_per_level=2)
    n_desc = 10
    model = CrystalGenerator(cfg, n_desc, [(3, 1, 1)], np.zeros(n_desc), np.ones(n_desc), np.zeros((3, 3)), 1.0,
                             lattice_stats=(np.array([1.5, 1.5, 1.5, 90, 90, 90.0]), np.array([0.1] * 3 + [3.0] * 3)))
    feats = torch.randn(3, n_desc)
    a = model.sample(feats, [(3, 1, 1)] * 3, torch.Generator().manual_seed(0))
    b = model.sample(feats, [(3, 1, 1)] * 3, torch.Generator().manual_seed(0))
    c = model.sample(feats, [(3, 1, 1)] * 3, torch.Generator().manual_seed(1))
    for (la, fa, sa), (lb, fb, _), (lc, fc, _) in zip(a, b, c):
        np.testing.assert_array_equal(fa, fb)
        np.testing.assert_array_equal(la, lb)
        assert not np.allclose(fa, fc)
        assert not np.allclose(la, lc)           # a new z: a new regressed lattice
        assert sa.tolist() == [0, 0, 0, 1, 2] and max(sa) < N_SLOTS
        # the regressed lattice: lengths near 1.5 n^(1/3) (the stats' mean, untrained head)
        assert np.all(np.linalg.norm(la, axis=1) > 0.5)
