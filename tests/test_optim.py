"""Tests of c2np.models.optim: warmup + cosine schedule, EMA, gradient clipping, one step."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from c2np.errors import C2NPInputError  # noqa: E402
from c2np.models.config import get_config  # noqa: E402
from c2np.models.optim import EMA, build_optimizer, clip_gradients, lr_factor, optimizer_step  # noqa: E402


def test_lr_factor_warmup_then_cosine_to_floor():
    kw = dict(schedule="cosine", warmup_steps=10, total_steps=110, min_ratio=0.1)
    f = [lr_factor(s, **kw) for s in range(130)]
    assert all(a < b for a, b in zip(f[:10], f[1:11]))  # warmup rises
    assert f[10] == pytest.approx(1.0)
    assert f[60] == pytest.approx(0.1 + 0.9 * 0.5)  # half way down the cosine
    assert f[110] == pytest.approx(0.1) and f[129] == pytest.approx(0.1)
    assert all(a >= b - 1e-12 for a, b in zip(f[10:], f[11:]))  # monotone after warmup
    assert lr_factor(500, schedule="constant", warmup_steps=0, total_steps=10) == 1.0
    with pytest.raises(C2NPInputError):
        lr_factor(0, schedule="linear", warmup_steps=0, total_steps=10)


def test_ema_tracks_weights_and_applied_restores_live_weights():
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    ema = EMA(m, 0.9)
    w0 = m.weight.detach().clone()
    with torch.no_grad():
        m.weight.add_(1.0)
    for _ in range(200):
        ema.update(m)
    # the average converged to the new weights
    assert torch.allclose(ema.state_dict()["weight"], m.weight, atol=1e-6)
    with torch.no_grad():
        m.weight.copy_(w0)
    live = m.weight.detach().clone()
    with ema.applied(m):
        assert torch.allclose(m.weight, w0 + 1.0, atol=1e-6)
    assert torch.equal(m.weight, live)
    # a fresh model loads the EMA weights (same keys)
    m2 = torch.nn.Linear(3, 2)
    m2.load_state_dict(ema.state_dict())
    assert torch.allclose(m2.weight, w0 + 1.0, atol=1e-6)
    # the early decay is small so the average is not stuck at the initialisation
    assert EMA(m, 0.9999).current_decay() == pytest.approx(0.1)
    with pytest.raises(C2NPInputError):
        EMA(m, 1.0)


def test_clip_gradients_and_step_skips_non_finite():
    m = torch.nn.Linear(4, 1)
    (m(torch.ones(1, 4)) * 1e4).sum().backward()
    norm = clip_gradients(m, 1.0)
    assert norm > 1.0
    total = math.sqrt(sum(float((p.grad ** 2).sum()) for p in m.parameters()))
    assert total == pytest.approx(1.0, rel=1e-4)
    cfg = get_config("tiny", ema_decay=0.5, lr_schedule="cosine", warmup_steps=2)
    opt, sched, ema = build_optimizer(m, cfg, total=10)
    assert ema is not None
    before = m.weight.detach().clone()
    info = optimizer_step(m, m(torch.ones(1, 4)).sum(), opt, sched, ema, grad_clip=1.0)
    assert info["skipped"] == 0.0 and not torch.equal(before, m.weight)
    with pytest.raises(FloatingPointError):
        optimizer_step(m, torch.tensor(float("nan"), requires_grad=True), opt, sched, ema, grad_clip=1.0)
    # a finite loss whose gradient overflows: the step is skipped, the weights stay
    with torch.no_grad():
        m.weight.fill_(1e-3)
    before = m.weight.detach().clone()
    loss = m(torch.full((1, 4), 3e38)).sum()
    assert torch.isfinite(loss)
    info = optimizer_step(m, loss, opt, sched, ema, grad_clip=1.0)
    assert info["skipped"] == 1.0 and torch.equal(before, m.weight)
