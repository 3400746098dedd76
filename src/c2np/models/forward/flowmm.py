"""FlowMM for task 1: conditional flow matching from a uniform ball, masked discrete flow on
types, Euler integration with inference anti-annealing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from c2np.models.backbone import ConditionBatch
from c2np.models.data import MAX_SPECIES_SLOTS
from c2np.models.forward.base import collate, combined_loss, masked_logits, to_particles
from c2np.models.forward.denoiser import DATA_STD_UNIT, DenoiserFeatures, mix_target
from c2np.models.forward.masked import MaskedTypeGenerator
from c2np.models.forward.noise import rand, uniform_ball
from c2np.models.forward.species import revealed_type_ll

__all__ = ["FlowMM"]

S = MAX_SPECIES_SLOTS


class FlowMM(MaskedTypeGenerator):
    """Conditional flow matching, uniform-ball prior -> particle, masked discrete flow on types;
    Euler integration with FlowMM's inference anti-annealing (velocity x (1 + slope t));
    optional self-conditioning."""

    def _features(self, u: Tensor, types: Tensor, masked: Tensor, t: Tensor, batch: Tensor,
                  c: ConditionBatch) -> DenoiserFeatures:
        """The denoiser's features of the state at u, times t (B,) (see :meth:`_predict`)."""
        R = c.radius[batch].unsqueeze(-1)
        tc = t.clamp(min=1e-3)
        rem = (1 - t).clamp(min=1e-3)
        return self.denoiser.features(u * R, u / tc[batch].unsqueeze(-1) * R, c.radius * rem / tc * DATA_STD_UNIT,
                                      self._type_feat(types, masked, batch, c), revealed_type_ll(types, masked),
                                      t, batch, c)

    def _predict(self, u: Tensor, types: Tensor, masked: Tensor, t: Tensor, batch: Tensor, cond: Tensor,
                 c: ConditionBatch, x1_prev: Tensor | None,
                 feats: DenoiserFeatures | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """(v_hat (N,3) unit-ball velocity, type logits (N,S), x1_hat (N,3) Å) at u, times t (B,);
        ``feats`` the state's :meth:`_features` when already computed.

        x_t = (1 - t) x0 + t x1 with x0 uniform in the ball, so x_t / t = x1 + ((1 - t) / t) x0
        is the state at the data's scale (noise std ((1 - t) / t) R / sqrt(5)) the lattice
        features see; the velocity follows from the predicted x1: (x1 - x_t) / (1 - t)."""
        R = c.radius[batch].unsqueeze(-1)
        rem = (1 - t).clamp(min=1e-3)
        feats = self._features(u, types, masked, t, batch, c) if feats is None else feats
        out = self.denoiser.run(self.denoiser.self_conditioned(feats, x1_prev), cond)
        inv = 1.0 / rem[batch].unsqueeze(-1)
        v_hat, x1 = mix_target(out, u, R, -inv, inv)  # v = (x1 - x_t) / (1 - t)
        return v_hat, out.logits, x1

    def loss(self, conds, particles, g):
        c, p = collate(conds, particles, self.device)
        cond = self.conditioner(c)
        count_loss = self.count_head.loss(c, cond, p.counts)
        t = rand((c.size,), g)
        tb = t[p.batch].unsqueeze(-1)
        u1 = p.pos / c.radius[p.batch].unsqueeze(-1)
        u0 = uniform_ball(len(u1), g)
        ut = (1 - tb) * u0 + tb * u1
        masked = rand((len(p.types),), g) >= t[p.batch]  # token revealed with probability t
        feats = self._features(ut, p.types, masked, t, p.batch, c)  # one state, both passes
        x1_prev = None
        if self.cfg.self_cond and float(rand((1,), g)) < 0.5:
            with torch.no_grad():
                x1_prev = self._predict(ut, p.types, masked, t, p.batch, cond, c, None, feats)[2]
        v_hat, logits, _ = self._predict(ut, p.types, masked, t, p.batch, cond, c, x1_prev, feats)
        pos_loss = F.mse_loss(v_hat, u1 - u0)
        ce = F.cross_entropy(masked_logits(logits, p.batch, c), p.types, reduction="none")
        type_loss = (ce * masked).sum() / masked.sum().clamp(min=1)
        return combined_loss(pos_loss, type_loss, count_loss)

    def _sample(self, conds, g, steps, ablation):
        c, cond, counts, batch = self._sample_setup(conds)
        dev = self.device
        u = uniform_ball(len(batch), g)
        types = torch.zeros(len(batch), dtype=torch.long, device=dev)
        masked = torch.ones(len(batch), dtype=torch.bool, device=dev)
        n = steps or self.cfg.sample_steps
        dt = 1.0 / n
        x1 = None
        for i in range(n):
            t = i * dt
            tt = torch.full((c.size,), t, device=dev)
            v_hat, logits, x1p = self._predict(u, types, masked, tt, batch, cond, c, x1)
            x1 = x1p if self.cfg.self_cond else None
            # Euler step with the anti-annealed velocity, never past the predicted end point
            # (v = (x1 - x_t) / (1 - t), so a step of (1 - t) v lands on x1)
            u = u + min(dt * (1.0 + self.cfg.anti_anneal * t), 1.0 - t) * v_hat
            probs = F.softmax(masked_logits(logits, batch, c), -1)
            draw = torch.multinomial(probs, 1, generator=g).squeeze(-1)
            reveal = masked & (rand((len(batch),), g) < dt / (1 - t))
            types = torch.where(reveal, draw, types)
            masked = masked & ~reveal
        return to_particles(u, types, counts, c)

