"""ADiT for task 1: a per-atom VAE, then a latent flow-matching diffusion transformer."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from c2np.models.backbone import (
    MLP,
    N_FRAME_FEATURES,
    AdaLNBlock,
    ConditionBatch,
    Conditioner,
    ParticleBatch,
    frame_features,
    from_padded,
    lattice_site_vectors,
    sinusoidal_embedding,
    to_padded,
)
from c2np.models.config import ModelConfig
from c2np.models.data import MAX_SPECIES_SLOTS
from c2np.models.forward.base import GeneratorBase, collate, masked_logits, to_particles
from c2np.models.forward.noise import langevin_correct, rand, randn
from c2np.models.forward.sites import SiteAssignment

__all__ = ["ADiT"]

S = MAX_SPECIES_SLOTS


class ADiT(GeneratorBase):
    """All-atom latent diffusion in two stages (as ADiT): a per-atom VAE (transformer encoder /
    decoder) trained first, then frozen; a latent flow-matching diffusion transformer (DiT,
    adaLN-Zero) over the set of normalised latents, with self-conditioning and classifier-free
    guidance on R. The stage follows the number of training steps taken (a buffer, so a
    resumed run continues in the right stage): the first ``ae_fraction`` of the config's
    epochs x steps_per_epoch train the autoencoder."""

    kl_weight = 1e-3
    # times t of the flow at which the latent Langevin corrector runs (cfg.corrector_steps per
    # Euler step, step cfg.corrector_step): where tokens choose their clean latents
    corrector_window = (0.2, 0.9)
    # buffers registered in __init__ (declared for the type checker; nn.Module.__getattr__ is untyped)
    steps_done: Tensor
    lat_mean: Tensor
    lat_var: Tensor

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        H, L, nh = cfg.hidden, cfg.latent_dim, cfg.heads
        self.enc_in = nn.Linear(H + 3 + N_FRAME_FEATURES, H)
        self.enc = nn.ModuleList([AdaLNBlock(H, nh) for _ in range(cfg.layers)])
        self.enc_out = nn.Linear(H, 2 * L)
        self.dec_in = nn.Linear(L, H)
        self.dec = nn.ModuleList([AdaLNBlock(H, nh) for _ in range(cfg.layers)])
        self.dec_out = nn.Linear(H, 3 + S)
        # lattice-aware decoder head: the decoded position snaps to a soft, exclusive choice
        # among the nearest sites of the condition's lattice (see SiteAssignment)
        self.snap = SiteAssignment(H, cfg.exclusion_iters) if cfg.site_features and cfg.exclusion_iters > 0 else None
        if self.snap is not None:
            self.snap_in = nn.Linear(H + 3 * S * max(1, cfg.site_k), H)
            # spread (Å) of the decoded positions about their sites, learned (init 0.5 Å)
            self.snap_sigma = nn.Parameter(torch.tensor(math.log(math.expm1(0.5))))
        # second stage: its own conditioner (the autoencoder's stays frozen with it)
        self.dit_cond = Conditioner(H)
        self.t_mlp = MLP(H, H, H)
        self.dit_in = nn.Linear(2 * L, H)
        self.dit = nn.ModuleList([AdaLNBlock(H, nh) for _ in range(cfg.dit_layers or cfg.layers)])
        self.dit_out = nn.Linear(H, L)
        self.register_buffer("steps_done", torch.zeros((), dtype=torch.long))
        self.register_buffer("lat_mean", torch.zeros(L))
        self.register_buffer("lat_var", torch.ones(L))

    @property
    def stage(self) -> int:
        """1 while the autoencoder trains, 2 once it is frozen and the latent DiT trains."""
        total = int(self.cfg.epochs) * int(self.cfg.steps_per_epoch)
        return 1 if int(self.steps_done) < round(self.cfg.ae_fraction * total) else 2

    @staticmethod
    def _run(blocks: nn.ModuleList, x: Tensor, cond: Tensor, mask: Tensor) -> Tensor:
        for blk in blocks:
            x = blk(x, cond, mask)
        return x

    def encode(self, p: ParticleBatch, c: ConditionBatch, cond: Tensor) -> tuple[Tensor, Tensor]:
        """Per-atom latent mean and log-variance (N, L)."""
        u = p.pos / c.radius[p.batch].unsqueeze(-1)
        x = self.enc_in(torch.cat([self.slot_features(F.one_hot(p.types, S).float(), p.batch, c), u,
                                   frame_features(p.pos, p.batch, c)], -1))
        xp, mask = to_padded(x, p.batch, p.counts)
        out = self.enc_out(from_padded(self._run(self.enc, xp, cond, mask), mask))
        mu, logvar = out.chunk(2, -1)
        return mu, logvar.clamp(-8, 4)

    def decode(self, z: Tensor, batch: Tensor, counts: Tensor, cond: Tensor,
               c: ConditionBatch, *, snap: bool = True) -> tuple[Tensor, Tensor]:
        """Latents (N, L) -> unit-ball positions (N, 3) and type logits (N, S); ``snap`` False
        returns the positions before the site head moves them."""
        xp, mask = to_padded(self.dec_in(z), batch, counts)
        h = from_padded(self._run(self.dec, xp, cond, mask), mask)
        out = self.dec_out(h)
        u, logits = out[:, :3], out[:, 3:]
        if self.snap is None or not snap:
            return u, logits
        R = c.radius[batch].unsqueeze(-1)
        vec, dist, keys = lattice_site_vectors(u * R, batch, c, max(1, self.cfg.site_k), with_keys=True)
        site_r = ((u * R).unsqueeze(1).unsqueeze(1) + vec).norm(dim=-1) - c.radius[batch].view(-1, 1, 1)
        site_r = site_r / 2.0
        hs = self.snap_in(torch.cat([h, torch.exp(-0.5 * (dist.flatten(1) / 0.5) ** 2),
                                     (dist.flatten(1) / 2.0).clamp(max=3.0), site_r.flatten(1).clamp(-3, 3)], -1))
        sigma = F.softplus(self.snap_sigma).expand(len(u))
        type_ll = F.log_softmax(masked_logits(logits, batch, c), -1)
        prob, p_none = self.snap(F.silu(hs), dist, site_r, keys, sigma, type_ll)
        u = u + torch.einsum("nsk,nskd->nd", prob, vec) / R
        return u, logits + torch.log(prob.sum(-1) + 1e-4)

    def clean(self, z_t: Tensor, z_prev: Tensor, t: Tensor, batch: Tensor, counts: Tensor,
              cond: Tensor) -> Tensor:
        """The DiT's clean-latent estimate z1_hat (N, L) at normalised latents ``z_t``, times ``t``
        (B,), with the self-conditioning estimate ``z_prev`` (zeros when none). As ADiT, the DiT
        predicts the clean latent; the flow's velocity is (z1_hat - z_t) / (1 - t)."""
        xp, mask = to_padded(self.dit_in(torch.cat([z_t, z_prev], -1)), batch, counts)
        cc = cond + self.t_mlp(sinusoidal_embedding(t, self.cfg.hidden))
        return self.dit_out(from_padded(self._run(self.dit, xp, cc, mask), mask))

    def loss(self, conds, particles, g):
        c, p = collate(conds, particles, self.device)
        stage = self.stage
        if self.training:
            self.steps_done += 1
        if stage == 1:
            cond = self.conditioner(c)
            count_loss = self.count_head.loss(c, cond, p.counts)
            mu, logvar = self.encode(p, c, cond)
            z = mu + torch.exp(0.5 * logvar) * randn(tuple(mu.shape), g)
            u_hat, logits = self.decode(z, p.batch, p.counts, cond, c)
            R = c.radius[p.batch].unsqueeze(-1)
            rec_loss = F.mse_loss(u_hat * R, p.pos)  # Å^2
            type_loss = F.cross_entropy(masked_logits(logits, p.batch, c), p.types)
            kl = -0.5 * torch.mean(torch.sum(1 + logvar - mu ** 2 - logvar.exp(), -1))
            if self.training:  # running latent statistics, frozen with the autoencoder
                with torch.no_grad():
                    m = 0.99 if int(self.steps_done) > 1 else 0.0
                    self.lat_mean.mul_(m).add_((1 - m) * mu.mean(0))
                    self.lat_var.mul_(m).add_((1 - m) * mu.var(0, unbiased=False).clamp(min=1e-6))
            loss = rec_loss + type_loss + self.kl_weight * kl + count_loss
            return loss, {"rec": rec_loss.item(), "type": type_loss.item(), "kl": kl.item(),
                          "count": count_loss.item()}
        with torch.no_grad():  # frozen first stage
            mu, _ = self.encode(p, c, self.conditioner(c))
            z1 = (mu - self.lat_mean) * torch.rsqrt(self.lat_var)
        drop = rand((c.size,), g) < self.cfg.cfg_drop
        cond = self.dit_cond(c, drop_r=drop)
        t = rand((c.size,), g)
        tb = t[p.batch].unsqueeze(-1)
        z0 = randn(tuple(z1.shape), g)
        zt = (1 - tb) * z0 + tb * z1
        z_prev = torch.zeros_like(zt)
        if self.cfg.self_cond and float(rand((1,), g)) < 0.5:
            with torch.no_grad():
                z_prev = self.clean(zt, z_prev, t, p.batch, p.counts, cond)
        # ADiT's loss: |z1_hat - z1|^2 / (1 - min(t, 0.9))^2, the velocity error with its weight capped
        w = 1.0 / (1.0 - tb.clamp(max=0.9))
        diff_loss = F.mse_loss(w * self.clean(zt, z_prev, t, p.batch, p.counts, cond), w * z1)
        return diff_loss, {"diff": diff_loss.item()}

    def _sample(self, conds, g, steps, ablation):
        c, ae_cond, counts, batch = self._sample_setup(conds)
        cond = self.dit_cond(c)
        uncond = self.dit_cond(c, drop_r=torch.ones(c.size, dtype=torch.bool, device=self.device))
        w = self.cfg.cfg_weight
        z = randn((len(batch), self.cfg.latent_dim), g)
        z_prev = torch.zeros_like(z)

        def guided_clean(z: Tensor, t: float) -> Tensor:
            nonlocal z_prev
            tt = torch.full((c.size,), t, device=self.device)
            z1 = self.clean(z, z_prev, tt, batch, counts, cond)
            if w != 0:
                z1 = (1 + w) * z1 - w * self.clean(z, z_prev, tt, batch, counts, uncond)
            if self.cfg.self_cond:
                z_prev = z1
            return z1

        n = steps or self.cfg.sample_steps
        lo, hi = self.corrector_window
        for i in range(n):
            z1 = guided_clean(z, i / n)
            z = z + (z1 - z) / (n - i)  # Euler step dt = 1/n of v = (z1 - z) / (1 - t)
            s = (i + 1) / n
            if lo <= s <= hi:
                # latent predictor-corrector: Langevin on p_s with the score implied by z1_hat,
                # eps_hat = (z - s z1_hat) / (1 - s), var = (1 - s)^2
                var = torch.tensor((1.0 - s) ** 2, device=self.device)
                for _ in range(self.cfg.corrector_steps):
                    z1 = guided_clean(z, s)
                    z = langevin_correct(z, (z - s * z1) / (1.0 - s), var, g, step=self.cfg.corrector_step)
        mu = z * torch.sqrt(self.lat_var) + self.lat_mean
        u_hat, logits = self.decode(mu, batch, counts, ae_cond, c, snap=ablation.site_snapping)
        return to_particles(u_hat, masked_logits(logits, batch, c).argmax(-1), counts, c)

