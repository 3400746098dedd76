"""DiffCSP for task 1: joint DDPM over unit-ball positions and continuous one-hot types,
predictor-corrector sampling.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from c2np.models.backbone import ConditionBatch
from c2np.models.config import ModelConfig
from c2np.models.data import MAX_SPECIES_SLOTS
from c2np.models.forward.base import GeneratorBase, collate, combined_loss, masked_logits, to_particles
from c2np.models.forward.denoiser import Denoiser, DenoiserFeatures, vp_features, vp_run
from c2np.models.forward.noise import (
    alpha_bar,
    ddpm_posterior_step,
    langevin_correct,
    rand,
    randn,
    sample_times,
)

__all__ = ["DiffCSP"]

S = MAX_SPECIES_SLOTS


class DiffCSP(GeneratorBase):
    """Joint DDPM over positions (unit ball) and continuous one-hot types; predictor-corrector
    sampling (Langevin corrector on positions, as DiffCSP's sampler); optional self-conditioning."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.denoiser = Denoiser(cfg, 2 * S + cfg.hidden)

    def _type_feat(self, a: Tensor, batch: Tensor, c: ConditionBatch) -> Tensor:
        """Noisy one-hot ``a`` (N, S) -> features: a, its masked softmax, and the softmax-weighted
        species embedding."""
        probs = F.softmax(masked_logits(2.0 * a, batch, c), -1)
        return torch.cat([a, probs, self.slot_features(probs, batch, c)], -1)

    def _features(self, u: Tensor, a: Tensor, t: Tensor, batch: Tensor, c: ConditionBatch) -> DenoiserFeatures:
        """The denoiser's features of the noisy state (u, a) at times t (B,)."""
        # no species likelihood term: the clean type is read from the chosen site (and the noisy
        # type features), so the continuous types follow the positions to the end
        return vp_features(self.denoiser, u, self._type_feat(a, batch, c), None, t, batch, c)

    def _predict(self, u: Tensor, a: Tensor, t: Tensor, batch: Tensor, cond: Tensor, c: ConditionBatch,
                 x0_prev: Tensor | None, feats: DenoiserFeatures | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """(eps_hat (N,3), eps_a_hat (N,S), x0_hat (N,3) Å) at noisy (u, a), times t (B,); the
        type noise follows from the predicted clean one-hot 2 p - 1. ``feats``: the state's
        :meth:`_features` when already computed."""
        abn = alpha_bar(t)[batch].unsqueeze(-1)
        feats = self._features(u, a, t, batch, c) if feats is None else feats
        eps_hat, logits, x0 = vp_run(self.denoiser, u, feats, t, batch, (cond,), c, x0_prev)[0]
        a0_hat = 2 * F.softmax(masked_logits(logits, batch, c), -1) - 1
        eps_a_hat = (a - torch.sqrt(abn) * a0_hat) / torch.sqrt(1 - abn)
        return eps_hat, eps_a_hat, x0

    def loss(self, conds, particles, g):
        c, p = collate(conds, particles, self.device)
        cond = self.conditioner(c)
        count_loss = self.count_head.loss(c, cond, p.counts)
        t = rand((c.size,), g) * (1 - 1e-3) + 1e-3
        ab = alpha_bar(t)[p.batch].unsqueeze(-1)
        u0 = p.pos / c.radius[p.batch].unsqueeze(-1)
        eps = randn(tuple(u0.shape), g)
        ut = torch.sqrt(ab) * u0 + torch.sqrt(1 - ab) * eps
        a0 = 2 * F.one_hot(p.types, S).float() - 1
        eps_a = randn(tuple(a0.shape), g)
        at = torch.sqrt(ab) * a0 + torch.sqrt(1 - ab) * eps_a
        feats = self._features(ut, at, t, p.batch, c)  # one state, both passes
        x0_prev = None
        if self.cfg.self_cond and float(rand((1,), g)) < 0.5:
            with torch.no_grad():
                x0_prev = self._predict(ut, at, t, p.batch, cond, c, None, feats)[2]
        eps_hat, eps_a_hat, _ = self._predict(ut, at, t, p.batch, cond, c, x0_prev, feats)
        pos_loss = F.mse_loss(eps_hat, eps)
        type_loss = F.mse_loss(eps_a_hat, eps_a)
        return combined_loss(pos_loss, type_loss, count_loss)

    def _sample(self, conds, g, steps, ablation):
        c, cond, counts, batch = self._sample_setup(conds)
        u = randn((len(batch), 3), g)
        a = randn((len(batch), S), g)
        ts = sample_times(steps or self.cfg.sample_steps, g)
        a0 = a
        x0 = None
        for i in range(len(ts) - 1):
            t, s = ts[i], ts[i + 1]
            ab_t, ab_s = alpha_bar(t), alpha_bar(s)
            tt = t.expand(c.size)
            for _ in range(self.cfg.corrector_steps):
                eps_hat, _, x0c = self._predict(u, a, tt, batch, cond, c, x0)
                u = langevin_correct(u, eps_hat, 1 - ab_t, g, step=self.cfg.corrector_step)
                x0 = x0c if self.cfg.self_cond else None
            eps_hat, eps_a_hat, x0p = self._predict(u, a, tt, batch, cond, c, x0)
            x0 = x0p if self.cfg.self_cond else None
            u, _ = ddpm_posterior_step(u, eps_hat, ab_t, ab_s, g, clip=1.5)
            a, a0 = ddpm_posterior_step(a, eps_a_hat, ab_t, ab_s, g, clip=1.0)
        types = masked_logits(a0, batch, c).argmax(-1)
        return to_particles(u, types, counts, c)

