"""Noise draws, time schedules and sampler steps shared by the task-1 families."""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["randn", "rand", "uniform_ball", "alpha_bar", "ddpm_posterior_step", "sample_times", "langevin_correct"]


def randn(shape: tuple[int, ...], g: torch.Generator) -> Tensor:
    """Standard normal draws from generator ``g`` (on its device)."""
    return torch.randn(shape, generator=g, device=g.device)


def rand(shape: tuple[int, ...], g: torch.Generator) -> Tensor:
    """Uniform [0, 1) draws from generator ``g`` (on its device)."""
    return torch.rand(shape, generator=g, device=g.device)


def uniform_ball(n: int, g: torch.Generator) -> Tensor:
    """(n, 3) points uniform in the unit ball."""
    d = randn((n, 3), g)
    d = d / d.norm(dim=-1, keepdim=True).clamp(min=1e-8)
    return d * rand((n, 1), g) ** (1.0 / 3.0)


def alpha_bar(t: Tensor, s: float = 0.008) -> Tensor:
    """Cosine schedule alpha_bar(t), t in [0, 1] (1 = pure noise), clipped to [1e-4, 1]
    (exactly 1 at t = 0, the end of a sampler)."""
    f = torch.cos((t + s) / (1 + s) * math.pi / 2) ** 2 / math.cos(s / (1 + s) * math.pi / 2) ** 2
    return torch.where(t > 0, f.clamp(1e-4, 1.0), torch.ones_like(f))


def ddpm_posterior_step(x_t: Tensor, eps_hat: Tensor, ab_t: Tensor, ab_s: Tensor,
                        g: torch.Generator, *, clip: float | None = None) -> tuple[Tensor, Tensor]:
    """One ancestral step x_t -> x_s (s < t) of q(x_s | x_t, x0_hat); returns (x_s, x0_hat).
    ``ab_t``/``ab_s`` broadcast against ``x_t``."""
    x0 = (x_t - torch.sqrt(1 - ab_t) * eps_hat) / torch.sqrt(ab_t)
    if clip is not None:
        x0 = x0.clamp(-clip, clip)
    a_ts = ab_t / ab_s
    beta = 1 - a_ts
    mean = torch.sqrt(ab_s) * beta / (1 - ab_t) * x0 + torch.sqrt(a_ts) * (1 - ab_s) / (1 - ab_t) * x_t
    var = (beta * (1 - ab_s) / (1 - ab_t)).clamp(min=0)
    return mean + torch.sqrt(var) * randn(tuple(x_t.shape), g), x0


def sample_times(n: int, g: torch.Generator, *, power: float = 1.0, eps_t: float = 0.0) -> Tensor:
    """(n + 1,) decreasing times of an n-step sampler, on ``g``'s device: t_i = eps_t + (1 -
    eps_t) (1 - i / n)^power for i < n, and t_n = 0 (the last step returns the clean-position
    estimate at t_{n-1} = eps_t). ``power`` 1 with ``eps_t`` 0 is the uniform grid linspace(1, 0);
    ``power`` > 1 puts more steps near t = 0 (spacing (1 - eps_t) power k^(power - 1) / n^power at
    the k-th step from the end); ``eps_t`` is MatterGen's last denoising time (1e-3 there)."""
    if int(n) < 1 or power <= 0 or not 0.0 <= eps_t < 1.0:
        raise ValueError(f"sample_times: need n >= 1, power > 0, 0 <= eps_t < 1 (got {n}, {power}, {eps_t})")
    ts = eps_t + (1.0 - eps_t) * torch.linspace(1.0, 0.0, int(n) + 1, device=g.device) ** power
    ts[-1] = 0.0
    return ts


def langevin_correct(x: Tensor, eps_hat: Tensor, var: Tensor, g: torch.Generator, *, step: float) -> Tensor:
    """One Langevin corrector step on p_t for an epsilon-predicting model of a Gaussian
    perturbation x = a x0 + sqrt(var) eps: score = -eps_hat / sqrt(var), step size ``step * var``
    (VP: var = 1 - alpha_bar(t), DiffCSP's step_lr (sigma_t / sigma_1)^2 rule in VP units; ADiT's
    linear interpolant z_t = t z1 + (1 - t) z0: var = (1 - t)^2)."""
    delta = step * var
    return x - delta * eps_hat / torch.sqrt(var) + torch.sqrt(2 * delta) * randn(tuple(x.shape), g)

