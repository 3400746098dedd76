"""ADiT's latent diffusion for the task-2 crystal generator (:mod:`c2np.models.crystal_gen`,
``process="adit"``): a variational autoencoder of cells into per-atom latents, and a
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
carry an arbitrary shift; docs/inverse_results.md, session 21). The posterior's log-variance
starts at :data:`LOGVAR_INIT`: from 0 the decoder learned to ignore the latent.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from c2np.models.backbone import periodic_features

__all__ = ["LATENT_DIM", "KL_WEIGHT", "FRAC_WEIGHT", "AE_FRACTION", "LOGVAR_INIT", "LatentAutoencoder", "LatentDiT",
           "interpolate", "latent_loss", "euler_step", "wrapped_sq_error"]

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
    x0 = torch.randn(x1.shape, generator=g)
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
