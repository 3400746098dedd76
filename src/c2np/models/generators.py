"""Task-1 generators: (unit cell, R, rotation) -> particle, from noise.

Every generator implements

* ``loss(conds, particles, g) -> (loss, logs)``: the training objective. ``particles`` are
  the targets (used only as the data being noised / reconstructed).
* ``sample(conds, g, steps=None) -> list[Particle]``: generation. It receives only
  :class:`~c2np.models.data.Condition` objects (cell, R, rotation); the atom count comes from
  the :class:`~c2np.models.backbone.CountHead`, the species from the cell.

Positions are generated in units of R (``u = x / R``, the sphere is the unit ball); the
networks see Å (``u * R``) to build neighbour lists and lattice-phase features. Atom types
are indices into the cell's sorted species ("slots").

Families:

* :class:`CDVAE` — latent z from the cell encoder (reparameterised, KL to N(0, I)), count and
  composition heads, noise-conditional score network trained by denoising score matching over
  geometric noise levels, annealed Langevin dynamics at sampling; types re-predicted at each
  step.
* :class:`DiffCSP` — DDPM (cosine schedule, epsilon prediction) jointly over positions and
  continuous one-hot atom types, equivariant EGNN denoiser conditioned on cell, R, rotation.
* :class:`FlowMM` — conditional flow matching from a uniform-ball prior (radius R) to the
  particle along straight paths (velocity regression), masked discrete flow for types, Euler
  ODE integration at sampling.
* :class:`MatterGen` — DDPM over positions plus absorbing-state (D3PM) diffusion over types,
  R dropped to a null token with probability ``cfg_drop`` in training, classifier-free
  guidance on R at sampling.
* :class:`ADiT` — per-atom VAE (transformer encoder/decoder) to latents of size
  ``latent_dim`` and a diffusion transformer (adaLN) over the set of latents; trained jointly
  with the diffusion loss on stop-gradient latent means.
* :class:`SiteScorer` — beyond the paper: candidate lattice sites from carving the rotated
  crystal at R + margin (cell, R and rotation only), each scored inside/outside by a network
  on invariant features (|x| / R, |x| - R, species, local environment).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from scipy.spatial import cKDTree
from torch import Tensor, nn

from c2np.carving import carve
from c2np.particle import Particle
from c2np.models.backbone import (EGNN, MLP, N_FRAME_FEATURES, N_Z, AdaLNBlock, ConditionBatch,
                                  Conditioner, CountHead, collate_conditions, collate_particles,
                                  frame_features, from_padded, sinusoidal_embedding, to_padded)
from c2np.models.config import ModelConfig
from c2np.models.data import MAX_SPECIES_SLOTS, Condition

__all__ = ["GeneratorBase", "CDVAE", "DiffCSP", "FlowMM", "MatterGen", "ADiT", "SiteScorer",
           "GENERATORS", "alpha_bar", "ddpm_posterior_step"]

S = MAX_SPECIES_SLOTS


# ---------------------------------------------------------------------------------------
# noise utilities
def randn(shape: tuple[int, ...], g: torch.Generator) -> Tensor:
    """Standard normal draws from generator ``g``."""
    return torch.randn(shape, generator=g)


def rand(shape: tuple[int, ...], g: torch.Generator) -> Tensor:
    """Uniform [0, 1) draws from generator ``g``."""
    return torch.rand(shape, generator=g)


def uniform_ball(n: int, g: torch.Generator) -> Tensor:
    """(n, 3) points uniform in the unit ball."""
    d = randn((n, 3), g)
    d = d / d.norm(dim=-1, keepdim=True).clamp(min=1e-8)
    return d * rand((n, 1), g) ** (1.0 / 3.0)


def alpha_bar(t: Tensor, s: float = 0.008) -> Tensor:
    """Cosine schedule alpha_bar(t), t in [0, 1] (1 = pure noise), clipped to [1e-4, 1]."""
    f = torch.cos((t + s) / (1 + s) * math.pi / 2) ** 2 / math.cos(s / (1 + s) * math.pi / 2) ** 2
    return f.clamp(1e-4, 1.0)


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


def _masked_logits(logits: Tensor, batch: Tensor, c: ConditionBatch) -> Tensor:
    return logits.masked_fill(~c.slot_mask[batch], -1e9)


def _to_particles(u: Tensor, types: Tensor, counts: Tensor, c: ConditionBatch) -> list[Particle]:
    """Unit-ball positions and slot types -> particles in Å."""
    out = []
    start = 0
    for b, n in enumerate(counts.tolist()):
        pos = (u[start:start + n] * c.radius[b]).double().numpy()
        z = c.slots_z[b, types[start:start + n]].numpy()
        out.append(Particle(z, pos))
        start += n
    return out


def _batch_index(counts: Tensor) -> Tensor:
    return torch.repeat_interleave(torch.arange(len(counts)), counts)


def _combined_loss(pos_loss: Tensor, type_loss: Tensor, count_loss: Tensor) -> tuple[Tensor, dict[str, float]]:
    """Sum of the position, type and count losses, with the parts for the training log."""
    return pos_loss + type_loss + count_loss, {"pos": pos_loss.item(), "type": type_loss.item(),
                                               "count": count_loss.item()}


# ---------------------------------------------------------------------------------------
class GeneratorBase(nn.Module):
    """Shared parts: conditioner (cell encoder + R + rotation), count head, slot embeddings."""

    task = "forward"

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        H = cfg.hidden
        self.conditioner = Conditioner(H)
        self.count_head = CountHead(H)
        self.z_emb = nn.Embedding(N_Z, H)

    def slot_features(self, probs: Tensor, batch: Tensor, c: ConditionBatch) -> Tensor:
        """(N, H) species features of soft slot assignments ``probs`` (N, S)."""
        return torch.einsum("ns,nsh->nh", probs, self.z_emb(c.slots_z)[batch])

    def _sample_setup(self, conds: Sequence[Condition]) -> tuple[ConditionBatch, Tensor, Tensor, Tensor]:
        """Collated conditions, their embedding, and the sampled atom counts with the atom ->
        sample index (the start of every sampler; the target count is never an input)."""
        c = collate_conditions(conds)
        cond = self.conditioner(c)
        counts = self.count_head.sample(c, cond)
        return c, cond, counts, _batch_index(counts)

    def loss(self, conds: Sequence[Condition], particles: Sequence[Particle],
             g: torch.Generator) -> tuple[Tensor, dict[str, float]]:
        raise NotImplementedError

    def sample(self, conds: Sequence[Condition], g: torch.Generator,
               steps: int | None = None) -> list[Particle]:
        raise NotImplementedError


class Denoiser(nn.Module):
    """EGNN denoiser: (positions Å, type features, time, condition) -> (vector (N,3), type logits (N,S))."""

    def __init__(self, cfg: ModelConfig, type_dim: int) -> None:
        super().__init__()
        H = cfg.hidden
        self.H = H
        self.t_mlp = MLP(H, H, H)
        self.type_in = nn.Linear(type_dim, H)
        self.egnn = EGNN(2 * H + N_FRAME_FEATURES, H, cfg.layers, knn=cfg.knn)
        self.type_out = MLP(H, H, S)

    def forward(self, pos: Tensor, type_feat: Tensor, t: Tensor, batch: Tensor, cond: Tensor,
                c: ConditionBatch) -> tuple[Tensor, Tensor]:
        temb = self.t_mlp(sinusoidal_embedding(t, self.H))[batch]
        h_in = torch.cat([self.type_in(type_feat), frame_features(pos, batch, c), temb], -1)
        h, v = self.egnn(h_in, pos, batch, cond[batch], c.lattice_rot, c.radius)
        return v, self.type_out(h)


# ---------------------------------------------------------------------------------------
class CDVAE(GeneratorBase):
    """Conditional CDVAE: latent from the cell encoder, count / composition heads, score
    network trained by denoising score matching, annealed Langevin decoding."""

    kl_weight = 1e-3
    step_lr = 0.1

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

    def loss(self, conds, particles, g):
        c = collate_conditions(conds)
        p = collate_particles(particles, conds)
        zc, kl = self.latent(c, g)
        count_loss = self.count_head.loss(c, zc, p.counts)
        onehot = F.one_hot(p.types, S).float()
        comp_true = torch.zeros(c.size, S).index_add_(0, p.batch, onehot) / p.counts.unsqueeze(-1).float()
        comp_logits = self.comp_head(zc).masked_fill(~c.slot_mask, -1e9)
        comp_loss = -(comp_true * F.log_softmax(comp_logits, -1)).sum(-1).mean()
        level = torch.randint(0, len(self.sigmas), (c.size,), generator=g)
        sigma = self.sigmas[level]
        u0 = p.pos / c.radius[p.batch].unsqueeze(-1)
        eps = randn(tuple(u0.shape), g)
        u_noisy = u0 + sigma[p.batch].unsqueeze(-1) * eps
        # type corruption proportional to the noise level, drawn from the true composition
        flip = rand((len(p.types),), g) < (sigma / self.sigmas[0])[p.batch]
        rand_types = torch.multinomial(comp_true[p.batch] + 1e-12, 1, generator=g).squeeze(-1)
        noisy_types = torch.where(flip, rand_types, p.types)
        t = level.float() / max(len(self.sigmas) - 1, 1)
        eps_hat, type_logits = self.decoder(u_noisy * c.radius[p.batch].unsqueeze(-1),
                                            self.slot_features(F.one_hot(noisy_types, S).float(), p.batch, c),
                                            t, p.batch, zc, c)
        pos_loss = F.mse_loss(eps_hat, eps)
        type_loss = F.cross_entropy(_masked_logits(type_logits, p.batch, c), p.types)
        loss = pos_loss + type_loss + comp_loss + count_loss + self.kl_weight * kl
        return loss, {"pos": pos_loss.item(), "type": type_loss.item(), "comp": comp_loss.item(),
                      "count": count_loss.item(), "kl": kl.item()}

    @torch.no_grad()
    def sample(self, conds, g, steps=None):
        c = collate_conditions(conds)
        zc, _ = self.latent(c, g)
        counts = self.count_head.sample(c, zc)
        batch = _batch_index(counts)
        comp = F.softmax(self.comp_head(zc).masked_fill(~c.slot_mask, -1e9), -1)
        types = torch.multinomial(comp[batch], 1, generator=g).squeeze(-1)
        u = uniform_ball(len(batch), g)
        R = c.radius[batch].unsqueeze(-1)
        per_level = max(1, (steps or self.cfg.sample_steps) // len(self.sigmas))
        L = len(self.sigmas)
        eps_hat = torch.zeros_like(u)
        for i, sigma in enumerate(self.sigmas):
            alpha = self.step_lr * sigma ** 2
            t = torch.full((c.size,), i / max(L - 1, 1))
            for _ in range(per_level):
                eps_hat, logits = self.decoder(u * R, self.slot_features(F.one_hot(types, S).float(), batch, c),
                                               t, batch, zc, c)
                score = -eps_hat / sigma
                u = u + alpha * score + torch.sqrt(2 * alpha) * randn(tuple(u.shape), g)
                types = _masked_logits(logits, batch, c).argmax(-1)
        u = u - self.sigmas[-1] * eps_hat  # final Tweedie denoising at the smallest level
        return _to_particles(u, types, counts, c)


# ---------------------------------------------------------------------------------------
class DiffCSP(GeneratorBase):
    """Joint DDPM over positions (unit ball) and continuous one-hot types."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.denoiser = Denoiser(cfg, 2 * S + cfg.hidden)

    def _type_feat(self, a: Tensor, batch: Tensor, c: ConditionBatch) -> Tensor:
        """Noisy one-hot ``a`` (N, S) -> features: a, its masked softmax, and the softmax-weighted
        species embedding."""
        probs = F.softmax(_masked_logits(2.0 * a, batch, c), -1)
        return torch.cat([a, probs, self.slot_features(probs, batch, c)], -1)

    def loss(self, conds, particles, g):
        c = collate_conditions(conds)
        p = collate_particles(particles, conds)
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
        eps_hat, eps_a_hat = self.denoiser(ut * c.radius[p.batch].unsqueeze(-1),
                                           self._type_feat(at, p.batch, c), t, p.batch, cond, c)
        pos_loss = F.mse_loss(eps_hat, eps)
        type_loss = F.mse_loss(eps_a_hat, eps_a)
        return _combined_loss(pos_loss, type_loss, count_loss)

    @torch.no_grad()
    def sample(self, conds, g, steps=None):
        c, cond, counts, batch = self._sample_setup(conds)
        R = c.radius[batch].unsqueeze(-1)
        u = randn((len(batch), 3), g)
        a = randn((len(batch), S), g)
        n = steps or self.cfg.sample_steps
        ts = torch.linspace(1.0, 0.0, n + 1)
        a0 = a
        for i in range(n):
            t, s = ts[i], ts[i + 1]
            ab_t, ab_s = alpha_bar(t), alpha_bar(s) if s > 0 else torch.tensor(1.0)
            eps_hat, eps_a_hat = self.denoiser(u * R, self._type_feat(a, batch, c), torch.full((c.size,), float(t)), batch, cond, c)
            u, _ = ddpm_posterior_step(u, eps_hat, ab_t, ab_s, g, clip=1.5)
            a, a0 = ddpm_posterior_step(a, eps_a_hat, ab_t, ab_s, g, clip=1.0)
        types = _masked_logits(a0, batch, c).argmax(-1)
        return _to_particles(u, types, counts, c)


# ---------------------------------------------------------------------------------------
class _MaskedTypeGenerator(GeneratorBase):
    """Shared parts of the generators with a masked (absorbing-state) flow over types."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.mask_emb = nn.Parameter(torch.zeros(cfg.hidden))
        self.denoiser = Denoiser(cfg, cfg.hidden)

    def _type_feat(self, types: Tensor, masked: Tensor, batch: Tensor, c: ConditionBatch) -> Tensor:
        feat = self.slot_features(F.one_hot(types.clamp(min=0), S).float(), batch, c)
        return torch.where(masked.unsqueeze(-1), self.mask_emb.expand_as(feat), feat)


class FlowMM(_MaskedTypeGenerator):
    """Conditional flow matching, uniform-ball prior -> particle, masked discrete flow on types."""

    def loss(self, conds, particles, g):
        c = collate_conditions(conds)
        p = collate_particles(particles, conds)
        cond = self.conditioner(c)
        count_loss = self.count_head.loss(c, cond, p.counts)
        t = rand((c.size,), g)
        tb = t[p.batch].unsqueeze(-1)
        u1 = p.pos / c.radius[p.batch].unsqueeze(-1)
        u0 = uniform_ball(len(u1), g)
        ut = (1 - tb) * u0 + tb * u1
        masked = rand((len(p.types),), g) >= t[p.batch]  # token revealed with probability t
        v_hat, logits = self.denoiser(ut * c.radius[p.batch].unsqueeze(-1),
                                      self._type_feat(p.types, masked, p.batch, c), t, p.batch, cond, c)
        pos_loss = F.mse_loss(v_hat, u1 - u0)
        ce = F.cross_entropy(_masked_logits(logits, p.batch, c), p.types, reduction="none")
        type_loss = (ce * masked).sum() / masked.sum().clamp(min=1)
        return _combined_loss(pos_loss, type_loss, count_loss)

    @torch.no_grad()
    def sample(self, conds, g, steps=None):
        c, cond, counts, batch = self._sample_setup(conds)
        R = c.radius[batch].unsqueeze(-1)
        u = uniform_ball(len(batch), g)
        types = torch.zeros(len(batch), dtype=torch.long)
        masked = torch.ones(len(batch), dtype=torch.bool)
        n = steps or self.cfg.sample_steps
        dt = 1.0 / n
        for i in range(n):
            t = i * dt
            v_hat, logits = self.denoiser(u * R, self._type_feat(types, masked, batch, c),
                                          torch.full((c.size,), t), batch, cond, c)
            u = u + dt * v_hat  # Euler step of the ODE du/dt = v(u, t)
            probs = F.softmax(_masked_logits(logits, batch, c), -1)
            draw = torch.multinomial(probs, 1, generator=g).squeeze(-1)
            reveal = masked & (rand((len(batch),), g) < dt / (1 - t))
            types = torch.where(reveal, draw, types)
            masked = masked & ~reveal
        return _to_particles(u, types, counts, c)


# ---------------------------------------------------------------------------------------
class MatterGen(_MaskedTypeGenerator):
    """DDPM over positions + absorbing-state discrete diffusion over types, CFG on R."""

    def loss(self, conds, particles, g):
        c = collate_conditions(conds)
        p = collate_particles(particles, conds)
        drop = rand((c.size,), g) < self.cfg.cfg_drop
        cond = self.conditioner(c, drop_r=drop)
        count_loss = self.count_head.loss(c, self.conditioner(c), p.counts)
        t = rand((c.size,), g) * (1 - 1e-3) + 1e-3
        ab = alpha_bar(t)[p.batch].unsqueeze(-1)
        u0 = p.pos / c.radius[p.batch].unsqueeze(-1)
        eps = randn(tuple(u0.shape), g)
        ut = torch.sqrt(ab) * u0 + torch.sqrt(1 - ab) * eps
        masked = rand((len(p.types),), g) < t[p.batch]  # absorbing: masked with probability t
        eps_hat, logits = self.denoiser(ut * c.radius[p.batch].unsqueeze(-1),
                                        self._type_feat(p.types, masked, p.batch, c), t, p.batch, cond, c)
        pos_loss = F.mse_loss(eps_hat, eps)
        ce = F.cross_entropy(_masked_logits(logits, p.batch, c), p.types, reduction="none")
        type_loss = (ce * masked).sum() / masked.sum().clamp(min=1)
        return _combined_loss(pos_loss, type_loss, count_loss)

    @torch.no_grad()
    def sample(self, conds, g, steps=None, guidance: float | None = None):
        w = self.cfg.cfg_weight if guidance is None else guidance
        c, cond, counts, batch = self._sample_setup(conds)
        uncond = self.conditioner(c, drop_r=torch.ones(c.size, dtype=torch.bool))
        R = c.radius[batch].unsqueeze(-1)
        u = randn((len(batch), 3), g)
        types = torch.zeros(len(batch), dtype=torch.long)
        masked = torch.ones(len(batch), dtype=torch.bool)
        n = steps or self.cfg.sample_steps
        ts = torch.linspace(1.0, 0.0, n + 1)
        for i in range(n):
            t, s = float(ts[i]), float(ts[i + 1])
            tt = torch.full((c.size,), t)
            feat = self._type_feat(types, masked, batch, c)
            e_c, l_c = self.denoiser(u * R, feat, tt, batch, cond, c)
            if w != 0:
                e_u, l_u = self.denoiser(u * R, feat, tt, batch, uncond, c)
                e_c = (1 + w) * e_c - w * e_u
                l_c = (1 + w) * l_c - w * l_u
            u, _ = ddpm_posterior_step(u, e_c, alpha_bar(torch.tensor(t)),
                                       alpha_bar(torch.tensor(s)) if s > 0 else torch.tensor(1.0), g, clip=1.5)
            probs = F.softmax(_masked_logits(l_c, batch, c), -1)
            draw = torch.multinomial(probs, 1, generator=g).squeeze(-1)
            reveal = masked & (rand((len(batch),), g) < (t - s) / t)
            types = torch.where(reveal, draw, types)
            masked = masked & ~reveal
        return _to_particles(u, types, counts, c)


# ---------------------------------------------------------------------------------------
class ADiT(GeneratorBase):
    """Per-atom latent autoencoder + diffusion transformer over the latent set."""

    kl_weight = 1e-3

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        H, L, nh = cfg.hidden, cfg.latent_dim, cfg.heads
        self.enc_in = nn.Linear(H + 3 + N_FRAME_FEATURES, H)
        self.enc = nn.ModuleList([AdaLNBlock(H, nh) for _ in range(cfg.layers)])
        self.enc_out = nn.Linear(H, 2 * L)
        self.dec_in = nn.Linear(L, H)
        self.dec = nn.ModuleList([AdaLNBlock(H, nh) for _ in range(cfg.layers)])
        self.dec_out = nn.Linear(H, 3 + S)
        self.t_mlp = MLP(H, H, H)
        self.dit_in = nn.Linear(L, H)
        self.dit = nn.ModuleList([AdaLNBlock(H, nh) for _ in range(cfg.layers)])
        self.dit_out = nn.Linear(H, L)

    @staticmethod
    def _run(blocks: nn.ModuleList, x: Tensor, cond: Tensor, mask: Tensor) -> Tensor:
        for blk in blocks:
            x = blk(x, cond, mask)
        return x

    def encode(self, p, c: ConditionBatch, cond: Tensor) -> tuple[Tensor, Tensor]:
        """Per-atom latent mean and log-variance (N, L)."""
        u = p.pos / c.radius[p.batch].unsqueeze(-1)
        x = self.enc_in(torch.cat([self.slot_features(F.one_hot(p.types, S).float(), p.batch, c), u,
                                   frame_features(p.pos, p.batch, c)], -1))
        xp, mask = to_padded(x, p.batch, p.counts)
        out = self.enc_out(from_padded(self._run(self.enc, xp, cond, mask), mask))
        mu, logvar = out.chunk(2, -1)
        return mu, logvar.clamp(-8, 4)

    def decode(self, z: Tensor, batch: Tensor, counts: Tensor, cond: Tensor) -> tuple[Tensor, Tensor]:
        """Latents (N, L) -> unit-ball positions (N, 3) and type logits (N, S)."""
        xp, mask = to_padded(self.dec_in(z), batch, counts)
        out = self.dec_out(from_padded(self._run(self.dec, xp, cond, mask), mask))
        return out[:, :3], out[:, 3:]

    def dit_eps(self, z_t: Tensor, t: Tensor, batch: Tensor, counts: Tensor, cond: Tensor) -> Tensor:
        """Noise prediction of the diffusion transformer."""
        xp, mask = to_padded(self.dit_in(z_t), batch, counts)
        cc = cond + self.t_mlp(sinusoidal_embedding(t, self.cfg.hidden))
        return self.dit_out(from_padded(self._run(self.dit, xp, cc, mask), mask))

    def loss(self, conds, particles, g):
        c = collate_conditions(conds)
        p = collate_particles(particles, conds)
        cond = self.conditioner(c)
        count_loss = self.count_head.loss(c, cond, p.counts)
        mu, logvar = self.encode(p, c, cond)
        z = mu + torch.exp(0.5 * logvar) * randn(tuple(mu.shape), g)
        u_hat, logits = self.decode(z, p.batch, p.counts, cond)
        R = c.radius[p.batch].unsqueeze(-1)
        rec_loss = F.mse_loss(u_hat * R, p.pos)  # Å^2
        type_loss = F.cross_entropy(_masked_logits(logits, p.batch, c), p.types)
        kl = -0.5 * torch.mean(torch.sum(1 + logvar - mu ** 2 - logvar.exp(), -1))
        z0 = mu.detach()
        t = rand((c.size,), g) * (1 - 1e-3) + 1e-3
        ab = alpha_bar(t)[p.batch].unsqueeze(-1)
        eps = randn(tuple(z0.shape), g)
        z_t = torch.sqrt(ab) * z0 + torch.sqrt(1 - ab) * eps
        diff_loss = F.mse_loss(self.dit_eps(z_t, t, p.batch, p.counts, cond.detach()), eps)
        loss = rec_loss + type_loss + self.kl_weight * kl + diff_loss + count_loss
        return loss, {"rec": rec_loss.item(), "type": type_loss.item(), "kl": kl.item(),
                      "diff": diff_loss.item(), "count": count_loss.item()}

    @torch.no_grad()
    def sample(self, conds, g, steps=None):
        c, cond, counts, batch = self._sample_setup(conds)
        z = randn((len(batch), self.cfg.latent_dim), g)
        n = steps or self.cfg.sample_steps
        ts = torch.linspace(1.0, 0.0, n + 1)
        for i in range(n):
            t, s = float(ts[i]), float(ts[i + 1])
            eps_hat = self.dit_eps(z, torch.full((c.size,), t), batch, counts, cond)
            z, _ = ddpm_posterior_step(z, eps_hat, alpha_bar(torch.tensor(t)),
                                       alpha_bar(torch.tensor(s)) if s > 0 else torch.tensor(1.0), g, clip=6.0)
        u_hat, logits = self.decode(z, batch, counts, cond)
        return _to_particles(u_hat, _masked_logits(logits, batch, c).argmax(-1), counts, c)


# ---------------------------------------------------------------------------------------
class SiteScorer(GeneratorBase):
    """Scores candidate lattice sites of the rotated crystal as inside / outside the particle."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        H = cfg.hidden
        self.encoder = EGNN(H + N_FRAME_FEATURES, H, max(1, cfg.layers - 1), knn=cfg.knn,
                            cutoff_angstrom=cfg.cutoff_angstrom, update_coords=False)
        self.head = MLP(H + N_FRAME_FEATURES, H, 1)

    def candidates(self, cond: Condition) -> Particle:
        """Sites of the rotated crystal within R + margin of the centre (uses cell, R, rotation and
        centre only)."""
        return carve(cond.cell, cond.radius_angstrom + self.cfg.site_margin_angstrom,
                     centre_frac=cond.centre_frac, quaternion=cond.quaternion).particle

    def logits(self, conds: Sequence[Condition]) -> tuple[Tensor, list[Particle]]:
        """(N,) inside-logits of all candidates and the candidate sets."""
        c = collate_conditions(conds)
        cands = [self.candidates(k) for k in conds]
        p = collate_particles(cands, conds)
        # R enters only through the per-site features |x|/R and |x| - R, never as an embedding
        # of its value, so the decision rule carries over to radii outside the training range.
        cond = self.conditioner(c, drop_r=torch.ones(c.size, dtype=torch.bool))
        ff = frame_features(p.pos, p.batch, c)
        h, _ = self.encoder(torch.cat([self.z_emb(p.z), ff], -1), p.pos, p.batch, cond[p.batch],
                            c.lattice_rot, c.radius)
        return self.head(torch.cat([h, ff], -1)).squeeze(-1), cands

    def loss(self, conds, particles, g):
        logits, cands = self.logits(conds)
        labels = []
        for cand, target in zip(cands, particles):
            lab = np.zeros(cand.n_atoms)
            if target.n_atoms:
                d, idx = cKDTree(target.positions_angstrom).query(cand.positions_angstrom)
                lab = (d < 1e-3) & (target.numbers[np.minimum(idx, target.n_atoms - 1)] == cand.numbers)
            labels.append(lab)
        y = torch.as_tensor(np.concatenate(labels), dtype=torch.float32)
        loss = F.binary_cross_entropy_with_logits(logits, y)
        acc = ((logits > 0).float() == y).float().mean()
        return loss, {"bce": loss.item(), "site_acc": acc.item()}

    @torch.no_grad()
    def sample(self, conds, g, steps=None):
        logits, cands = self.logits(conds)
        out, start = [], 0
        for cand in cands:
            keep = (logits[start:start + cand.n_atoms] > 0).numpy()
            out.append(Particle(cand.numbers[keep], cand.positions_angstrom[keep]))
            start += cand.n_atoms
        return out


GENERATORS: dict[str, type[GeneratorBase]] = {
    "cdvae": CDVAE, "diffcsp": DiffCSP, "flowmm": FlowMM, "mattergen": MatterGen, "adit": ADiT,
    "sitescore": SiteScorer,
}
