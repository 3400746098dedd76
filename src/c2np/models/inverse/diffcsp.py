"""DiffCSP's joint diffusion for the task-2 crystal generator (``process="diffcsp"``).

DDPM (cosine schedule) on the normalised lattice ``(L / s - mu) / sd`` and a
variance-exploding wrapped-normal score process on the fractional coordinates (sigma from
``sigma_min`` to ``sigma_max``, geometric); the network regresses the lattice noise (or, with
``lattice_param="x0"``, the clean lattice) and the wrapped-normal score times sigma. Samplers:
``sde`` (ancestral lattice step, reverse-SDE coordinates), ``ode`` (DDIM eta 0 and the
probability-flow ODE), ``pc`` (DiffCSP's predictor-corrector).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from c2np.models.inverse.config import GenConfig
from c2np.models.inverse.process import Process
from c2np.models.inverse.templates import TemplateBlocks

if TYPE_CHECKING:
    from c2np.models.inverse.sampler import CellSampler

__all__ = ["DiffCSPProcess", "cosine_schedule", "wrapped_score", "masked_mse"]


def cosine_schedule(cfg: GenConfig, n_steps: int) -> tuple[Tensor, Tensor]:
    """Cosine alpha_bar and geometric sigma (float32, (n_steps + 1,) each) on the times
    ``u = k / n_steps``, k = 0..n_steps, of the continuous schedule; sigma(0) = 0."""
    u = torch.arange(n_steps + 1, dtype=torch.float64) / n_steps
    ab = torch.cos((u + 0.008) / 1.008 * math.pi / 2) ** 2
    ab = (ab / ab[0]).clamp(min=1e-5)
    sig = cfg.sigma_min * (cfg.sigma_max / cfg.sigma_min) ** u
    sig[0] = 0.0
    return ab.float(), sig.float()


def wrapped_score(d: Tensor, sigma: Tensor, n_images: int = 3) -> Tensor:
    """sigma * d/dx log of the wrapped normal (period 1, std sigma) at displacement d."""
    k = torch.arange(-n_images, n_images + 1, dtype=d.dtype, device=d.device)
    x = d[..., None] + k
    s = sigma[..., None]
    w = torch.softmax(-(x ** 2) / (2 * s ** 2), dim=-1)
    return (-(x / s ** 2) * w).sum(-1) * sigma


def masked_mse(out_l: Tensor, target_l: Tensor, out_f: Tensor, target_f: Tensor, mask: Tensor
               ) -> tuple[Tensor, Tensor]:
    """(lattice squared error (mean), coordinate squared error over the real atoms of ``mask``)."""
    m = mask[..., None].float()
    lf = (((out_f - target_f) ** 2) * m).sum() / (3 * m.sum())
    ll = ((out_l - target_l) ** 2).mean()
    return ll, lf


class DiffCSPProcess(Process):
    """DiffCSP's joint diffusion (see the module)."""

    name = "diffcsp"

    def time_scale(self) -> float:
        return 1.0 / self.cfg.steps

    def loss(self, model: CellSampler, x_l0: Tensor, f0: Tensor, slot: Tensor, mask: Tensor, comp: Tensor,
             cond: Tensor, g: torch.Generator) -> tuple[Tensor, dict[str, float]]:
        """Noise a batch at integer times ``t`` in 1..steps (a share ``mid_t_fraction`` of the
        rows in (0.5 T, 0.9 T]) and regress the lattice noise (or clean lattice) and the
        coordinate score."""
        cfg = self.cfg
        B = x_l0.shape[0]
        eps_l = torch.randn(x_l0.shape, generator=g, device=g.device)
        t = torch.randint(1, cfg.steps + 1, (B,), generator=g, device=g.device)
        if cfg.mid_t_fraction > 0:     # emphasise the site-assignment regime (0.5 T, 0.9 T]
            lo, hi = cfg.steps // 2, (9 * cfg.steps) // 10
            mid = torch.randint(lo + 1, hi + 1, (B,), generator=g, device=g.device)
            pick = torch.rand(B, generator=g, device=g.device) < cfg.mid_t_fraction
            t = torch.where(pick, mid, t)
        ab = model.alpha_bar[t][:, None, None]
        x_lt = ab.sqrt() * x_l0 + (1 - ab).sqrt() * eps_l
        sig = model.sigma[t][:, None, None].expand_as(f0)
        noise = torch.randn(f0.shape, generator=g, device=g.device) * sig
        ft = (f0 + noise) % 1.0
        target_l = eps_l if cfg.lattice_param == "eps" else x_l0
        out_l, out_f, _ = model.net(x_lt, ft, slot, mask, model.time_embedding(t), cond)
        ll, lf = masked_mse(out_l, target_l, out_f, wrapped_score(noise, sig), mask)
        return cfg.lattice_weight * ll + lf, {"lattice": ll.item(), "frac": lf.item()}

    def sample(self, model: CellSampler, cond: Tensor, comps: Sequence[tuple[int, ...]], x_l: Tensor, f: Tensor,
               slot: Tensor, mask: Tensor, g: torch.Generator, template: TemplateBlocks | None
               ) -> tuple[Tensor, Tensor, Tensor]:
        """``sample_steps`` (else ``steps``) reverse steps of the joint process."""
        T = self.cfg.steps
        ab_k, sig_k = model.schedule(self.cfg.sample_steps or T)
        K = len(sig_k) - 1
        for k in range(K, 0, -1):
            x_l, f = self.step(model, k * T / K, (ab_k[k], ab_k[k - 1]), (sig_k[k], sig_k[k - 1]),
                               k == 1, x_l, f, slot, mask, cond, g)
            if template is not None:
                x_l, f = model.project(x_l, f, template)
        return x_l, f, slot

    def step(self, model: CellSampler, t_now: float, abs_: tuple[Tensor, Tensor], sigs: tuple[Tensor, Tensor],
             last: bool, x_l: Tensor, f: Tensor, slot: Tensor, mask: Tensor, cond: Tensor,
             g: torch.Generator) -> tuple[Tensor, Tensor]:
        """One reverse step from time ``t_now`` (in training steps, may be fractional) to the
        previous grid time of the joint process (lattice DDPM, frac VE score);
        ``abs_`` = (alpha_bar now, before), ``sigs`` = (sigma now, before).

        ``sde``: ancestral lattice step, reverse-SDE frac step. ``ode``: DDIM (eta 0) and the
        probability-flow ODE. ``pc``: DiffCSP's predictor-corrector — a Langevin corrector
        on frac (step ``step_lr * (sigma_i / sigma_min)^2``), then the predictor with the
        posterior noise ``sigma_{i-1} sqrt(1 - sigma_{i-1}^2 / sigma_i^2)``."""
        cfg = self.cfg
        B = x_l.shape[0]
        temb = model.time_embedding(torch.full((B,), float(t_now), device=x_l.device))
        sig, sig_p = sigs
        s2, s2p = sig ** 2, sig_p ** 2
        if cfg.sampler == "pc":
            _, out_f, _ = model.net(x_l, f, slot, mask, temb, cond)
            eps_c = cfg.step_lr * (sig / cfg.sigma_min) ** 2
            f = f + eps_c * out_f / sig
            if not last:
                f = f + (2 * eps_c).sqrt() * torch.randn(f.shape, generator=g, device=g.device)
            f = f % 1.0
        out_l, out_f, _ = model.net(x_l, f, slot, mask, temb, cond)
        ab, ab_prev = abs_
        a = ab / ab_prev
        if cfg.lattice_param == "x0":
            x0 = out_l.clamp(-6, 6)
        else:
            x0 = ((x_l - (1 - ab).sqrt() * out_l) / ab.sqrt()).clamp(-6, 6)
        score = out_f / sig
        if cfg.sampler == "ode":       # DDIM (eta 0) + probability-flow ODE
            eps = (x_l - ab.sqrt() * x0) / (1 - ab).sqrt()
            return ab_prev.sqrt() * x0 + (1 - ab_prev).sqrt() * eps, (f + 0.5 * (s2 - s2p) * score) % 1.0
        mean = (ab_prev.sqrt() * (1 - a) / (1 - ab)) * x0 + (a.sqrt() * (1 - ab_prev) / (1 - ab)) * x_l
        var = (1 - ab_prev) / (1 - ab) * (1 - a)
        x_l = mean + (var.sqrt() * torch.randn(x_l.shape, generator=g, device=g.device) if not last else 0.0)
        f = f + (s2 - s2p) * score
        if not last:
            std = (s2 - s2p).sqrt() if cfg.sampler == "sde" else (s2p * (s2 - s2p) / s2).sqrt()
            f = f + std * torch.randn(f.shape, generator=g, device=g.device)
        return x_l, f % 1.0
