"""MatterGen's faster sampler (issue 12) samples exactly what the straightforward one did:
the guided denoiser evaluation that computes the state's features, graph and lattice sites
once for the conditional and unconditional passes gives, for a fixed seed, bit-identical
positions and types to two independent denoiser calls (the sampler before the change), and
the site assignment split into a condition-independent ``prepare`` and ``assign`` is the
formula it replaced."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

from c2np.catalog import get_cell  # noqa: E402
from c2np.models.config import get_config  # noqa: E402
from c2np.models.forward.denoiser import vp_denoise  # noqa: E402
from c2np.models.forward.mattergen import MatterGen  # noqa: E402
from c2np.models.forward.sites import SiteAssignment  # noqa: E402
from c2np.models.overfit import gate_condition  # noqa: E402


def _model(**over) -> MatterGen:
    cfg = dataclasses.replace(get_config("small"), hidden=16, layers=2, sample_steps=6,
                              sample_exclusion_iters=5, **over)
    torch.manual_seed(0)
    model = MatterGen(cfg)
    # the sampler's learned heads start at zero; random weights make every term matter
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape))
    return model.eval()


def _two_call_guided(self, u, types, masked, t, batch, cond, uncond, c, x0_prev, w):
    """The guided evaluation before the change: one full denoiser call per condition."""
    e_c, l_c, x_c = self._predict(u, types, masked, t, batch, cond, c, x0_prev)
    if w == 0:
        return e_c, l_c, x_c
    e_u, l_u, x_u = self._predict(u, types, masked, t, batch, uncond, c, x0_prev)
    return (1 + w) * e_c - w * e_u, (1 + w) * l_c - w * l_u, (1 + w) * x_c - w * x_u


def _conditions():
    return [gate_condition(get_cell(m), r, seed=k)[0]
            for k, (m, r) in enumerate([("KMgH3", 5.0), ("RbSrH3", 6.0), ("LiBeH3", 4.5)])]


@pytest.mark.parametrize("cfg_weight", [1.0, 0.0])
def test_sampler_is_bit_identical_to_two_denoiser_calls(cfg_weight, monkeypatch):
    model = _model(cfg_weight=cfg_weight)
    conds = _conditions()
    with torch.no_grad():
        fast = model.sample(conds, torch.Generator().manual_seed(7))
        monkeypatch.setattr(MatterGen, "_guided", _two_call_guided)
        slow = model.sample(conds, torch.Generator().manual_seed(7))
        other = model.sample(conds, torch.Generator().manual_seed(8))
    assert len(fast) == len(slow) == 3
    for a, b in zip(fast, slow, strict=True):
        assert len(a.numbers) > 0
        np.testing.assert_array_equal(a.numbers, b.numbers)
        np.testing.assert_array_equal(a.positions_angstrom, b.positions_angstrom)
    # the comparison can fail: another seed gives other positions
    assert not np.array_equal(fast[0].positions_angstrom, other[0].positions_angstrom)


def test_guided_pass_equals_its_own_denoiser_calls():
    model = _model(cfg_weight=1.0)
    conds = _conditions()
    from c2np.models.backbone import collate_conditions
    from c2np.models.forward.denoiser import vp_denoise_each
    from c2np.models.forward.species import revealed_type_ll

    g = torch.Generator().manual_seed(3)
    c = collate_conditions(conds)
    with torch.no_grad():
        cond = model.conditioner(c)
        uncond = model.conditioner(c, drop_r=torch.ones(c.size, dtype=torch.bool))
        counts = model.count_head.sample(c, cond)
        batch = torch.repeat_interleave(torch.arange(c.size), counts)
        u = torch.randn((len(batch), 3), generator=g)
        types = torch.randint(0, 2, (len(batch),), generator=g)
        masked = torch.rand((len(batch),), generator=g) < 0.5
        t = torch.full((c.size,), 0.3)
        feat, ll = model._type_feat(types, masked, batch, c), revealed_type_ll(types, masked)
        both = vp_denoise_each(model.denoiser, u, feat, ll, t, batch, (cond, uncond), c, None)
        for got, e in zip(both, (cond, uncond), strict=True):
            want = vp_denoise(model.denoiser, u, feat, ll, t, batch, e, c, None)
            for x, y in zip(got, want, strict=True):
                assert torch.equal(x, y)
        assert not torch.equal(both[0][0], both[1][0])  # the two conditions differ


def _reference_assignment(sa, h, dist, site_r, keys, sigma, type_ll):
    """The site assignment's formula as written before the prepare / assign split."""
    S_full = dist.shape[1]
    used = max(1, int((dist < 1e3).any(-1).any(0).sum()))
    if used < S_full:
        prob, p_none = _reference_assignment(sa, h, dist[:, :used], site_r[:, :used], keys[:, :used], sigma,
                                             None if type_ll is None else type_ll[:, :used])
        return F.pad(prob, (0, 0, 0, S_full - used)), p_none
    N, S_, K = dist.shape
    slot = torch.eye(8)[:S_].view(1, S_, 1, 8).expand(N, S_, K, 8)
    feat = torch.cat([torch.exp(-0.5 * (dist / 0.5) ** 2).unsqueeze(-1),
                      (dist / 2.0).clamp(max=3.0).unsqueeze(-1), site_r.clamp(-3, 3).unsqueeze(-1), slot], -1)
    logits = sa.out(F.silu(sa.h_lin(h).view(N, 1, 1, -1) + sa.c_lin(feat))).squeeze(-1)
    logits = logits - 0.5 * (dist / sigma.view(-1, 1, 1)) ** 2 - F.softplus(sa.outside) * F.relu(2.0 * site_r)
    if type_ll is not None:
        logits = logits + type_ll.unsqueeze(-1)
    logits = logits.masked_fill(dist >= 1e3, -1e9).reshape(N, S_ * K)
    null = sa.null(h)
    _, col = torch.unique(keys.reshape(-1), return_inverse=True)
    n_cols = int(col.max()) + 1
    for _ in range(sa.iters if sa.training else sa.sample_iters):
        prob = torch.softmax(torch.cat([null, logits], -1), -1)[:, 1:]
        mass = torch.zeros(n_cols).index_add_(0, col, prob.reshape(-1))
        logits = logits - torch.log(mass[col].clamp(min=1.0)).view(N, -1)
    prob = torch.softmax(torch.cat([null, logits], -1), -1)
    return prob[:, 1:].view(N, S_, K), prob[:, :1]


@pytest.mark.parametrize("with_ll", [True, False])
def test_site_assignment_prepare_assign_is_the_formula(with_ll):
    torch.manual_seed(1)
    H, N, K, S = 16, 30, 3, 8
    sa = SiteAssignment(H, 4, sample_iters=6).eval()
    with torch.no_grad():
        for p in sa.parameters():
            p.add_(0.1 * torch.randn(p.shape))
        h = torch.randn(N, H)
        dist = torch.rand(N, S, K) * 3.0
        dist[:, 3:] = 1e3  # three species slots in use
        site_r = torch.randn(N, S, K)
        keys = torch.randint(0, 40, (N, S, K))
        sigma = torch.rand(N) + 0.1
        type_ll = torch.where(torch.rand(N, S) < 0.5, 0.0, -30.0) if with_ll else None
        got = sa(h, dist, site_r, keys, sigma, type_ll)
        want = _reference_assignment(sa, h, dist, site_r, keys, sigma, type_ll)
        again = sa.assign(torch.randn(N, H), sa.prepare(dist, site_r, keys, sigma, type_ll))
    assert got[0].shape == (N, S, K)
    for x, y in zip(got, want, strict=True):
        assert torch.equal(x, y)
    assert not torch.equal(again[0], got[0])
