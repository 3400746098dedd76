"""ADiT's latent diffusion for the task-2 crystal generator (c2np.models.inverse.adit, issue 13)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from c2np.models.inverse import adit as adp


def test_wrapped_error_is_periodic() -> None:
    a = torch.tensor([0.02, 0.5, 0.9])
    b = torch.tensor([0.98, 0.5, 0.1])
    torch.testing.assert_close(adp.wrapped_sq_error(a, b), torch.tensor([0.04 ** 2, 0.0, 0.2 ** 2]))
    torch.testing.assert_close(adp.wrapped_sq_error(a + 3.0, b), adp.wrapped_sq_error(a, b), atol=1e-5, rtol=0)


def test_frac_features_are_periodic() -> None:
    from c2np.models.backbone import periodic_features

    f = torch.rand(2, 5, 3)
    torch.testing.assert_close(periodic_features(f + 1.0, 3), periodic_features(f, 3), atol=1e-5, rtol=0)
    assert periodic_features(f, 3).shape == (2, 5, 18)


def test_interpolant_ends_and_loss_weighting() -> None:
    g = torch.Generator().manual_seed(0)
    x1 = torch.randn(4, 3, adp.LATENT_DIM)
    torch.testing.assert_close(adp.interpolate(x1, torch.ones(4), g), x1)
    x0 = adp.interpolate(x1, torch.zeros(4), torch.Generator().manual_seed(1))
    assert abs(x0.mean().item()) < 0.5 and not torch.allclose(x0, x1)
    mask = torch.ones(4, 3, dtype=torch.bool)
    pred = x1 + 0.1
    # the error is divided by 1 - min(t, 0.9): t = 0 -> 0.01, t = 0.5 -> 0.04, t = 0.95 -> 1.0
    for t, want in ((0.0, 0.01), (0.5, 0.04), (0.95, 1.0)):
        assert adp.latent_loss(pred, x1, torch.full((4,), t), mask).item() == pytest.approx(want, rel=1e-4)
    half = mask.clone()
    half[:, 2] = False                       # padded atoms do not count
    pred2 = pred.clone()
    pred2[:, 2] += 100.0
    assert adp.latent_loss(pred2, x1, torch.zeros(4), half).item() == pytest.approx(0.01, rel=1e-4)


def test_euler_steps_with_the_true_clean_latent_reach_it() -> None:
    g = torch.Generator().manual_seed(2)
    x1 = torch.randn(2, 4, adp.LATENT_DIM, generator=g)
    x = torch.randn(2, 4, adp.LATENT_DIM, generator=g)
    K = 10
    for k in range(K):
        x = adp.euler_step(x, x1, k / K, 1.0 / K)
    torch.testing.assert_close(x, x1, atol=1e-5, rtol=1e-5)


def test_autoencoder_is_permutation_equivariant() -> None:
    torch.manual_seed(0)
    ae = adp.LatentAutoencoder(16, 1, 2, 3).eval()
    f, lp = torch.rand(1, 5, 3), torch.randn(1, 6)
    slot = torch.tensor([[0, 0, 0, 1, 2]])
    mask = torch.ones(1, 5, dtype=torch.bool)
    mu, lv = ae.encode(f, lp, slot, mask)
    perm = torch.tensor([2, 0, 1, 4, 3])
    mu2, _ = ae.encode(f[:, perm], lp, slot[:, perm], mask)
    torch.testing.assert_close(mu2, mu[:, perm], atol=1e-5, rtol=1e-5)
    frac, lat = ae.decode(mu, slot, mask)
    frac2, lat2 = ae.decode(mu[:, perm], slot[:, perm], mask)
    torch.testing.assert_close(frac2, frac[:, perm], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lat2, lat, atol=1e-5, rtol=1e-5)


def test_adit_generator_trains_in_two_stages() -> None:
    """The first AE_FRACTION of the run trains the autoencoder (the DiT untouched), the rest the
    latent DiT (the autoencoder frozen)."""
    from c2np.models.inverse.config import GenConfig
    from c2np.models.inverse.generator import CrystalGenerator

    n_desc = 6
    cfg = GenConfig(process="adit", hidden=16, layers=2, n_freq=2, steps=4, lr=1e-2)
    model = CrystalGenerator(cfg, n_desc, [(3, 1, 1)], np.zeros(n_desc), np.ones(n_desc), np.zeros((3, 3)), 1.0,
                             lattice_stats=(np.array([1.5, 1.5, 1.5, 90, 90, 90.0]), np.array([0.1] * 3 + [3.0] * 3)))
    g = torch.Generator().manual_seed(0)
    feats, lat = torch.randn(4, n_desc), torch.eye(3).expand(4, 3, 3) * 2.0
    frac, slot = torch.rand(4, 5, 3), torch.tensor([[0, 0, 0, 1, 2]] * 4)
    mask, comp = torch.ones(4, 5, dtype=torch.bool), torch.zeros(4, dtype=torch.long)
    for progress, trained, frozen in ((0.1, model.ae, model.dit), (0.9, model.dit, model.ae)):
        model.train_progress = progress
        model.zero_grad(set_to_none=True)
        loss, parts = model.loss(feats, lat, frac, slot, mask, comp, g)
        loss.backward()
        assert all(p.grad is None for p in frozen.parameters())
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in trained.parameters())
        assert ("latent" in parts) == (progress > adp.AE_FRACTION)
    assert model.stage_progress() == pytest.approx((0.9 - adp.AE_FRACTION) / (1 - adp.AE_FRACTION))
