"""CDVAE for task 1: cell-encoder latent, count and composition heads, a score network trained by
denoising score matching, annealed Langevin decoding confined to the ball.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from c2np.models.backbone import MLP, ConditionBatch, collate_conditions
from c2np.models.config import ModelConfig
from c2np.models.data import MAX_SPECIES_SLOTS
from c2np.models.forward.base import GeneratorBase, batch_index, collate, masked_logits, to_particles
from c2np.models.forward.denoiser import Denoiser, DenoiserFeatures, mix_target
from c2np.models.forward.noise import rand, randn, uniform_ball
from c2np.models.forward.species import composition_fractions

__all__ = ["CDVAE", "confine_to_ball"]

S = MAX_SPECIES_SLOTS


class CDVAE(GeneratorBase):
    """Conditional CDVAE: latent from the cell encoder, count / composition heads, score
    network trained by denoising score matching, annealed Langevin decoding confined to the
    sphere (the finite-particle analogue of CDVAE wrapping coordinates into the cell)."""

    kl_weight = 1e-3
    sigmas: Tensor  # buffer registered in __init__ (declared for the type checker)

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        H, L = cfg.hidden, cfg.latent_dim
        self.to_latent = nn.Linear(H, 2 * L)
        self.from_latent = MLP(L, H, H)
        self.comp_head = MLP(H, H, S)
        self.decoder = Denoiser(cfg, cfg.hidden)
        self.register_buffer("sigmas", torch.exp(torch.linspace(0.0, math.log(0.005), cfg.langevin_levels)))

    def latent(self, c: ConditionBatch, g: torch.Generator) -> tuple[Tensor, Tensor]:
        """Sampled latent vector (B, H) (decoded z) and the KL term."""
        mu, logvar = self.to_latent(self.conditioner(c)).chunk(2, -1)
        logvar = logvar.clamp(-8, 4)
        z = mu + torch.exp(0.5 * logvar) * randn(tuple(mu.shape), g)
        kl = -0.5 * torch.mean(torch.sum(1 + logvar - mu ** 2 - logvar.exp(), -1))
        return self.from_latent(z), kl

    def _features(self, u: Tensor, types: Tensor, sigma: Tensor, level_t: Tensor, batch: Tensor,
                  c: ConditionBatch) -> DenoiserFeatures:
        """The decoder's features of the noisy state (see :meth:`_predict`)."""
        R = c.radius[batch].unsqueeze(-1)
        return self.decoder.features(u * R, u * R, c.radius * sigma,
                                     self.slot_features(F.one_hot(types, S).float(), batch, c), None, level_t, batch, c)

    def _predict(self, u: Tensor, types: Tensor, sigma: Tensor, level_t: Tensor, batch: Tensor, zc: Tensor,
                 c: ConditionBatch, x0_prev: Tensor | None,
                 feats: DenoiserFeatures | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """(eps_hat (N,3), type logits (N,S), x0_hat (N,3) Å) at noisy unit-ball positions ``u``
        with per-sample noise levels ``sigma`` (B,) (units of R); ``feats`` the state's
        :meth:`_features` when already computed."""
        R = c.radius[batch].unsqueeze(-1)
        feats = self._features(u, types, sigma, level_t, batch, c) if feats is None else feats
        out = self.decoder.run(self.decoder.self_conditioned(feats, x0_prev), zc)
        inv = 1.0 / sigma[batch].unsqueeze(-1)
        eps_hat, x0 = mix_target(out, u, R, inv, -inv)  # eps = (u - x0) / sigma
        return eps_hat, out.logits, x0

    def loss(self, conds, particles, g):
        c, p = collate(conds, particles, self.device)
        zc, kl = self.latent(c, g)
        count_loss = self.count_head.loss(c, zc, p.counts)
        comp_true = composition_fractions(p, c)
        comp_logits = self.comp_head(zc).masked_fill(~c.slot_mask, -1e9)
        comp_loss = -(comp_true * F.log_softmax(comp_logits, -1)).sum(-1).mean()
        level = torch.randint(0, len(self.sigmas), (c.size,), generator=g, device=g.device)
        sigma = self.sigmas[level]
        u0 = p.pos / c.radius[p.batch].unsqueeze(-1)
        eps = randn(tuple(u0.shape), g)
        u_noisy = u0 + sigma[p.batch].unsqueeze(-1) * eps
        # type corruption proportional to the noise level, drawn from the true composition
        flip = rand((len(p.types),), g) < (sigma / self.sigmas[0])[p.batch]
        rand_types = torch.multinomial(comp_true[p.batch] + 1e-12, 1, generator=g).squeeze(-1)
        noisy_types = torch.where(flip, rand_types, p.types)
        t = level.float() / max(len(self.sigmas) - 1, 1)
        feats = self._features(u_noisy, noisy_types, sigma, t, p.batch, c)  # one state, both passes
        x0_prev = None
        if self.cfg.self_cond and float(rand((1,), g)) < 0.5:
            with torch.no_grad():
                x0_prev = self._predict(u_noisy, noisy_types, sigma, t, p.batch, zc, c, None, feats)[2]
        eps_hat, type_logits, _ = self._predict(u_noisy, noisy_types, sigma, t, p.batch, zc, c, x0_prev, feats)
        pos_loss = F.mse_loss(eps_hat, eps)
        type_loss = F.cross_entropy(masked_logits(type_logits, p.batch, c), p.types)
        loss = pos_loss + type_loss + comp_loss + count_loss + self.kl_weight * kl
        return loss, {"pos": pos_loss.item(), "type": type_loss.item(), "comp": comp_loss.item(),
                      "count": count_loss.item(), "kl": kl.item()}

    def _sample(self, conds, g, steps, ablation):
        c = collate_conditions(conds).to(self.device)
        zc, _ = self.latent(c, g)
        counts = self.count_head.sample(c, zc)
        batch = batch_index(counts)
        comp = F.softmax(self.comp_head(zc).masked_fill(~c.slot_mask, -1e9), -1)
        types = torch.multinomial(comp[batch], 1, generator=g).squeeze(-1)
        u = uniform_ball(len(batch), g)
        L = len(self.sigmas)
        per_level = max(1, (steps or self.cfg.sample_steps) // L)
        margin = self.cfg.confine_margin if ablation.ball_confinement else -1.0  # < 0: never reflected
        eps_hat = torch.zeros_like(u)
        x0 = None
        for i, sigma in enumerate(self.sigmas):
            alpha = self.cfg.langevin_step * sigma ** 2
            t = torch.full((c.size,), i / max(L - 1, 1), device=self.device)
            sig = sigma.expand(c.size)
            for _ in range(per_level):
                eps_hat, logits, x0p = self._predict(u, types, sig, t, batch, zc, c, x0)
                x0 = x0p if self.cfg.self_cond else None
                score = -eps_hat / sigma
                u = u + alpha * score + torch.sqrt(2 * alpha) * randn(tuple(u.shape), g)
                u = confine_to_ball(u, margin)
                types = masked_logits(logits, batch, c).argmax(-1)
        u = u - self.sigmas[-1] * eps_hat  # final Tweedie denoising at the smallest level
        return to_particles(confine_to_ball(u, margin), types, counts, c)


def confine_to_ball(u: Tensor, margin: float) -> Tensor:
    """Reflect unit-ball positions (N, 3) with |u| > 1 + margin back inside the sphere of radius
    1 + margin (a point at distance r beyond the surface lands r inside it; never past the centre)."""
    if margin < 0:
        return u
    lim = 1.0 + margin
    r = u.norm(dim=-1, keepdim=True)
    r_new = torch.where(r > lim, (2 * lim - r).clamp(min=0.0), r)
    return u * (r_new / r.clamp(min=1e-12))

