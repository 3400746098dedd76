"""Optimisation pieces shared by every learned model: an exponential moving average (EMA) of
the weights, a cosine learning-rate schedule with linear warmup, gradient clipping, and one
optimiser step that applies all three.

Used by :func:`c2np.models.training.train` and :func:`c2np.models.overfit.overfit`. The
references (DiffCSP, FlowMM, MatterGen, ADiT) all train with AdamW / Adam, clip gradients and
sample from EMA weights (decay 0.999-0.9999); the schedule follows their cosine / plateau decay.

Config fields (``c2np.models.config.ModelConfig``): ``lr``, ``weight_decay``, ``grad_clip``
(<= 0: off), ``lr_schedule`` ('constant' or 'cosine'), ``warmup_steps``, ``min_lr_ratio``,
``ema_decay`` (0: no EMA).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn

from c2np.errors import C2NPInputError
from c2np.models.config import ModelConfig

__all__ = ["EMA", "build_optimizer", "clip_gradients", "lr_factor", "optimizer_step", "total_steps"]


def total_steps(cfg: ModelConfig) -> int:
    """Optimiser steps of a full run of ``cfg`` (epochs x steps per epoch)."""
    return int(cfg.epochs) * int(cfg.steps_per_epoch)


def lr_factor(step: int, *, schedule: str, warmup_steps: int, total_steps: int,
              min_ratio: float = 0.0) -> float:
    """Multiplier of the base learning rate at optimiser ``step`` (0-based).

    Linear warmup from 1/(warmup+1) to 1 over ``warmup_steps``, then 'constant' (1) or
    'cosine' (half cosine from 1 down to ``min_ratio`` at ``total_steps``; ``min_ratio`` after).
    """
    if schedule not in ("constant", "cosine"):
        raise C2NPInputError(f"unknown lr_schedule {schedule!r}; choose 'constant' or 'cosine'")
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / (warmup_steps + 1)
    if schedule == "constant":
        return 1.0
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, max(0.0, (step - warmup_steps) / span))
    return float(min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress)))


class EMA:
    """Exponential moving average of a model's floating-point parameters and buffers.

    ``decay`` is the long-run decay; early updates use ``min(decay, (1 + n) / (10 + n))``
    (n = updates so far) so the average is not dominated by the random initialisation.
    The shadow lives on the parameters' device. :meth:`state_dict` has exactly the keys of
    ``model.state_dict()`` (integer buffers copied), so EMA weights load into a fresh model.
    """

    def __init__(self, model: nn.Module, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise C2NPInputError(f"ema_decay must be in (0, 1), got {decay}")
        self.decay = float(decay)
        self.num_updates = 0
        self.shadow: dict[str, Tensor] = {k: v.detach().clone() for k, v in model.state_dict().items()}

    def current_decay(self) -> float:
        """Decay used by the next update."""
        return min(self.decay, (1.0 + self.num_updates) / (10.0 + self.num_updates))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Move the shadow towards the model's current weights."""
        d = self.current_decay()
        for k, v in model.state_dict().items():
            s = self.shadow[k]
            if torch.is_floating_point(v):
                s.mul_(d).add_(v.detach(), alpha=1.0 - d)
            else:
                s.copy_(v)
        self.num_updates += 1

    def state_dict(self) -> dict[str, Tensor]:
        """The averaged weights, keyed like ``model.state_dict()`` (safetensors-ready)."""
        return {k: v.detach().contiguous().clone() for k, v in self.shadow.items()}

    def load_state_dict(self, state: dict[str, Tensor], num_updates: int) -> None:
        """Restore a saved shadow (from :meth:`state_dict`) and its update count."""
        missing = set(self.shadow) - set(state)
        if missing:
            raise C2NPInputError(f"EMA state lacks {sorted(missing)[:3]}")
        for k in self.shadow:
            self.shadow[k].copy_(state[k])
        self.num_updates = int(num_updates)

    @contextmanager
    def applied(self, model: nn.Module) -> Iterator[nn.Module]:
        """Context in which ``model`` holds the EMA weights; the live weights come back after."""
        live = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(self.shadow, strict=True)
        try:
            yield model
        finally:
            model.load_state_dict(live, strict=True)


def clip_gradients(model: nn.Module, max_norm: float) -> float:
    """Clip the global gradient norm to ``max_norm`` (<= 0: no clipping); returns the norm
    before clipping (inf/nan when a gradient is not finite)."""
    params = [p for p in model.parameters() if p.grad is not None]
    if not params:
        return 0.0
    if max_norm > 0:
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params])))


def build_optimizer(model: nn.Module, cfg: ModelConfig, *, total: int | None = None
                    ) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR, EMA | None]:
    """AdamW at ``cfg.lr``, its warmup + cosine/constant schedule over ``total`` steps (default
    the config's epochs x steps per epoch), and the EMA (None when ``cfg.ema_decay`` is 0)."""
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, foreach=True)
    n = total_steps(cfg) if total is None else int(total)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_factor(s, schedule=cfg.lr_schedule, warmup_steps=cfg.warmup_steps,
                                 total_steps=n, min_ratio=cfg.min_lr_ratio))
    ema = EMA(model, cfg.ema_decay) if cfg.ema_decay > 0 else None
    return opt, sched, ema


def optimizer_step(model: nn.Module, loss: Tensor, opt: torch.optim.Optimizer,
                   sched: Any, ema: EMA | None, *, grad_clip: float) -> dict[str, float]:
    """Backward pass, gradient clipping, optimiser and schedule step, EMA update.

    A non-finite loss raises ``FloatingPointError`` before any weight changes; a step whose
    gradient norm is not finite is skipped (weights unchanged) and reported as such.
    Returns ``{"lr": ..., "grad_norm": ..., "skipped": 0 or 1}``.
    """
    if not bool(torch.isfinite(loss)):
        raise FloatingPointError(f"non-finite loss {float(loss.detach())}")
    opt.zero_grad(set_to_none=True)
    loss.backward()
    norm = clip_gradients(model, grad_clip)
    lr = float(opt.param_groups[0]["lr"])
    if not math.isfinite(norm):
        opt.zero_grad(set_to_none=True)
        sched.step()
        return {"lr": lr, "grad_norm": norm, "skipped": 1.0}
    opt.step()
    sched.step()
    if ema is not None:
        ema.update(model)
    return {"lr": lr, "grad_norm": norm, "skipped": 0.0}
