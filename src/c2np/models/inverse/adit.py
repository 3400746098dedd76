"""ADiT's latent diffusion for the task-2 crystal generator (``process="adit"``,
:class:`ADiTProcess`): a variational autoencoder of cells into per-atom latents, and a
diffusion transformer that generates those latents, conditioned on the particle.

Read from facebookresearch/all-atom-diffusion-transformer (``src/models/vae_module.py``,
``src/models/decoders/transformer.py``, ``src/models/ldm_module.py``), re-written for the crystal
generator's cells (species given, as in DiffCSP's crystal-structure prediction):

* **Autoencoder** (:class:`LatentAutoencoder`, first stage): a transformer encoder over the
  cell's atoms (species slot, the fractional coordinates and their Fourier features, the lattice's six
  parameters; not the particle, as ADiT's autoencoder is unconditional) gives a diagonal Gaussian posterior of
  :data:`LATENT_DIM` numbers per atom; a transformer decoder maps latents back to fractional
  coordinates (per atom) and the lattice's parameters (mean over atoms). Losses: the wrapped
  squared error of the coordinates (periodic, where ADiT's is plain; weight :data:`FRAC_WEIGHT`),
  the standardised lattice parameters' squared error, and the KL to N(0, I) weighted
  :data:`KL_WEIGHT`.
* **Latent diffusion** (:class:`LatentDiT`, second stage, autoencoder frozen): the linear
  interpolant ``x_t = (1 - t) x_0 + t x_1`` from ``x_0 ~ N(0, I)`` to the encoded latent
  ``x_1``; the network predicts ``x_1``; the loss is ADiT's, the error divided by
  ``1 - min(t, 0.9)``; sampling integrates the velocity ``(x1_pred - x_t) / (1 - t)`` with
  Euler steps (:func:`euler_step`), then decodes.

Not used: ADiT's self-conditioning, its Cartesian-position head and its joint training on
molecules. Training cells keep spglib's standard origin: ADiT translates them at random, which
here left the one-particle gate at 0 of 16 cells after 2,000 steps (the latent then has to
carry an arbitrary shift; docs/inverse_results.md). The posterior's log-variance
starts at :data:`LOGVAR_INIT`: from 0 the decoder learned to ignore the latent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from c2np.models.backbone import periodic_features
from c2np.models.inverse.cdvae import (
    kl_divergence,
    lattice_from_standard,
    parameter_stats,
    register_lattice_stats,
    reparameterize,
    standard_lattice_parameters,
)
from c2np.models.inverse.config import GenConfig
from c2np.models.inverse.process import Process
from c2np.models.inverse.templates import TemplateBlocks
from c2np.particle_descriptor import N_SLOTS

if TYPE_CHECKING:
    from c2np.models.inverse.sampler import CellSampler

__all__ = ["ADiTProcess", "LATENT_DIM", "KL_WEIGHT", "FRAC_WEIGHT", "AE_FRACTION", "LOGVAR_INIT",
           "LatentAutoencoder", "LatentDiT", "interpolate", "latent_loss", "euler_step", "wrapped_sq_error"]

#: latent numbers per atom (ADiT's latent_dim)
LATENT_DIM = 8
#: weight of the per-atom KL divergence in the autoencoder's loss (ADiT's 1e-5)
KL_WEIGHT = 1e-5
#: weight of the coordinates' reconstruction error in the autoencoder's loss (ADiT's 10)
FRAC_WEIGHT = 10.0
#: initial log-variance of the posterior (its std about 0.05)
LOGVAR_INIT = -6.0
#: share of the training steps spent on the autoencoder (the rest on the latent diffusion)
AE_FRACTION = 0.4


def wrapped_sq_error(pred: Tensor, target: Tensor) -> Tensor:
    """Element-wise squared difference of fractional coordinates on the torus (period 1)."""
    return ((pred - target + 0.5) % 1.0 - 0.5) ** 2


def _transformer(h: int, layers: int) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(d_model=h, nhead=4, dim_feedforward=2 * h, dropout=0.0,
                                       activation="gelu", batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, num_layers=layers, norm=nn.LayerNorm(h), enable_nested_tensor=False)


class LatentAutoencoder(nn.Module):
    """ADiT's first stage: cells (B, N atoms) <-> per-atom latents (B, N, :data:`LATENT_DIM`)."""

    def __init__(self, hidden: int, layers: int, n_freq: int, n_slots: int) -> None:
        super().__init__()
        self.n_freq = n_freq
        self.slot = nn.Embedding(n_slots, hidden)
        self.frac_in = nn.Linear(3 + 6 * n_freq, hidden)
        self.lattice_in = nn.Linear(6, hidden)
        self.encoder = _transformer(hidden, layers)
        self.quant = nn.Linear(hidden, 2 * LATENT_DIM)
        with torch.no_grad():               # a narrow posterior at the start, or the decoder learns to ignore z
            self.quant.bias[LATENT_DIM:] = LOGVAR_INIT
        self.post_quant = nn.Linear(LATENT_DIM, hidden)
        self.decoder = _transformer(hidden, layers)
        self.frac_head = nn.Linear(hidden, 3)
        self.lattice_head = nn.Linear(hidden, 6)

    def encode(self, frac: Tensor, lattice_params: Tensor, slot: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Posterior mean and log-variance (B, N, LATENT_DIM) of cells given as fractional
        coordinates (B,N,3), standardised lattice parameters (B,6), slots (B,N) and mask (B,N)."""
        # the raw coordinates too (ADiT's input): the decoder's identity map is then linear
        x = (self.slot(slot) + self.frac_in(torch.cat([frac, periodic_features(frac, self.n_freq)], dim=-1))
             + self.lattice_in(lattice_params)[:, None, :])
        x = self.encoder(x, src_key_padding_mask=~mask)
        mu, logvar = self.quant(x).chunk(2, dim=-1)
        return mu, logvar.clamp(-30.0, 20.0)

    def decode(self, z: Tensor, slot: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Latents (B,N,LATENT_DIM) -> (fractional coordinates (B,N,3), not wrapped;
        standardised lattice parameters (B,6))."""
        x = self.post_quant(z) + self.slot(slot)
        x = self.decoder(x, src_key_padding_mask=~mask)
        m = mask[..., None].to(x.dtype)
        pooled = (x * m).sum(1) / m.sum(1).clamp(min=1.0)
        return self.frac_head(x), self.lattice_head(pooled)


class LatentDiT(nn.Module):
    """ADiT's second stage: a transformer over atom tokens that predicts the clean latent from
    the interpolated one, the time and the particle condition (added to every token)."""

    def __init__(self, hidden: int, layers: int, n_slots: int) -> None:
        super().__init__()
        self.inp = nn.Linear(LATENT_DIM, hidden)
        self.slot = nn.Embedding(n_slots, hidden)
        self.time = nn.Linear(hidden, hidden)
        self.body = _transformer(hidden, layers)
        self.out = nn.Linear(hidden, LATENT_DIM)

    def forward(self, x_t: Tensor, slot: Tensor, mask: Tensor, t_emb: Tensor, cond: Tensor) -> Tensor:
        """(B,N,LATENT_DIM) interpolated latents -> (B,N,LATENT_DIM) predicted clean latents."""
        x = self.inp(x_t) + self.slot(slot) + (self.time(t_emb) + cond)[:, None, :]
        return self.out(self.body(x, src_key_padding_mask=~mask))


def interpolate(x1: Tensor, t: Tensor, g: torch.Generator) -> Tensor:
    """``(1 - t) x_0 + t x_1`` with ``x_0 ~ N(0, I)``; ``t`` (B,) in [0, 1]."""
    x0 = torch.randn(x1.shape, generator=g, device=g.device)
    tt = t[:, None, None]
    return (1.0 - tt) * x0 + tt * x1


def latent_loss(pred: Tensor, x1: Tensor, t: Tensor, mask: Tensor) -> Tensor:
    """ADiT's loss: the squared error of the predicted clean latent divided by
    ``1 - min(t, 0.9)``, averaged over the cell's atoms and latent numbers, then the batch."""
    scale = 1.0 - t.clamp(max=0.9)
    err = ((x1 - pred) / scale[:, None, None]) ** 2
    m = mask[..., None].to(err.dtype)
    return ((err * m).sum((1, 2)) / (m.sum((1, 2)) * x1.shape[-1]).clamp(min=1.0)).mean()


def euler_step(x_t: Tensor, pred_x1: Tensor, t: float, dt: float) -> Tensor:
    """One Euler step of the interpolant's ODE from ``t`` to ``t + dt``: velocity
    ``(x1_pred - x_t) / (1 - t)``."""
    return x_t + dt * (pred_x1 - x_t) / max(1.0 - t, 1e-6)


class ADiTProcess(Process):
    """ADiT's latent diffusion (see the module): the autoencoder for the first
    :data:`AE_FRACTION` of the training steps, then the latent diffusion transformer, the
    autoencoder frozen; generated latents decoded into coordinates and a lattice. The shared
    denoiser only conditions (no message-passing layers)."""

    name = "adit"
    standardised_lattice = False
    projects_own_start = True

    def denoiser_config(self) -> GenConfig:
        return replace(self.cfg, layers=0, pair_readout=False)

    def build(self, model: CellSampler, *, limit_density: float,
              lattice_stats: tuple[np.ndarray, np.ndarray] | None) -> None:
        model.ae = LatentAutoencoder(self.cfg.hidden, max(self.cfg.layers // 2, 1), self.cfg.n_freq, N_SLOTS)
        model.dit = LatentDiT(self.cfg.hidden, self.cfg.layers, N_SLOTS)
        register_lattice_stats(model, lattice_stats)

    def training_lattices(self, lattices: np.ndarray, n_atoms: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        return lattices, parameter_stats(lattices, n_atoms)

    def stage_progress(self, progress: float) -> float:
        """Progress within the current stage: each of the two stages gets a whole schedule."""
        f = AE_FRACTION
        return progress / f if progress < f else (progress - f) / (1.0 - f)

    def loss(self, model: CellSampler, x_l0: Tensor, f0: Tensor, slot: Tensor, mask: Tensor, comp: Tensor,
             cond: Tensor, g: torch.Generator) -> tuple[Tensor, dict[str, float]]:
        """ADiT's losses of one batch, by stage (``train_progress`` below
        :data:`~c2np.models.inverse.adit.AE_FRACTION`: the autoencoder's reconstruction and KL;
        after: the latent diffusion's, the autoencoder frozen). Cells keep spglib's standard origin
        (ADiT translates them at random; see :mod:`c2np.models.inverse.adit`)."""
        B = x_l0.shape[0]
        n = mask.sum(1)
        lp = standard_lattice_parameters(model, x_l0, n)
        if model.train_progress < AE_FRACTION:
            mu, logvar = model.ae.encode(f0, lp, slot, mask)
            frac, lp_pred = model.ae.decode(reparameterize(mu, logvar, g), slot, mask)
            m = mask[..., None].float()
            lf = (wrapped_sq_error(frac, f0) * m).sum() / (3 * m.sum())
            ll = ((lp_pred - lp) ** 2).mean()
            kl = kl_divergence(mu, logvar, mask)
            total = FRAC_WEIGHT * lf + self.cfg.lattice_weight * ll + KL_WEIGHT * kl
            return total, {"lattice": ll.item(), "frac": lf.item(), "kl": kl.item()}
        with torch.no_grad():
            x1 = reparameterize(*model.ae.encode(f0, lp, slot, mask), g)
        t = torch.rand(B, generator=g, device=g.device)
        pred = model.dit(interpolate(x1, t, g), slot, mask, model.time_embedding(t), cond)
        lz = latent_loss(pred, x1, t, mask)
        return lz, {"latent": lz.item()}

    def sample(self, model: CellSampler, cond: Tensor, comps: Sequence[tuple[int, ...]], x_l: Tensor, f: Tensor,
               slot: Tensor, mask: Tensor, g: torch.Generator, template: TemplateBlocks | None
               ) -> tuple[Tensor, Tensor, Tensor]:
        """ADiT's generation: latents from N(0, I) by ``sample_steps`` (else ``steps``) Euler
        steps of the interpolant's ODE, decoded; with a template the decoded cell is projected
        onto its symmetry."""
        B, N = slot.shape
        x = torch.randn(B, N, LATENT_DIM, generator=g, device=g.device)
        K = self.cfg.sample_steps or self.cfg.steps
        for k in range(K):
            t = k / K
            pred = model.dit(x, slot, mask, model.time_embedding(torch.full((B,), t, device=x.device)), cond)
            x = euler_step(x, pred, t, 1.0 / K)
        frac, lp = model.ae.decode(x, slot, mask)
        x_l, f = lattice_from_standard(model, lp, mask.sum(1)), frac % 1.0
        if template is not None:
            for _ in range(3):
                x_l, f = model.project(x_l, f, template)
        return x_l, f, slot
