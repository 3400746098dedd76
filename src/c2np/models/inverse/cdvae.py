"""CDVAE's generative process for the task-2 crystal generator
(``process="cdvae"``): pure tensor functions and :class:`CDVAEProcess`.

Read from txie-93/cdvae (``cdvae/pl_modules/model.py``: ``CDVAE.forward``, ``coord_loss``,
``langevin_dynamics``; the default ``sigma_begin`` 10 Å, ``sigma_end`` 0.01 Å, 50 noise levels,
``step_lr`` 1e-4 Å^2, KL weight 0.01), re-written for the crystal generator's padded cells:

* **Latent**: a variational encoder of the training cell gives ``z`` (reparameterised; KL to
  N(0, I) weighted :data:`KL_WEIGHT`); at sampling ``z ~ N(0, I)``.
* **Lattice**: regressed, not diffused: six parameters (three lengths divided by ``n^(1/3)``,
  three angles in degrees, :func:`lattice_parameters`), standardised, from ``z`` (and here the
  particle and the cell's composition); :func:`lattice_from_parameters` builds the lattice.
* **Coordinates**: a noise-conditional score on *Cartesian* noise (isotropic, sigma from
  :data:`SIGMA_BEGIN` to :data:`SIGMA_END`, geometric, :func:`noise_levels`): the network
  predicts the minimum-image displacement from the noisy to the clean atom divided by sigma
  (:func:`perturb`, :func:`min_image_displacement`); sampling is annealed Langevin dynamics,
  step ``STEP_LR_REL sigma_i^2`` at level ``i`` (:func:`langevin_step`).

Lengths are in units of the particle scale ``s`` (about the nearest-neighbour distance, 2-3 Å
here), so CDVAE's Å values become: sigma 10 Å -> :data:`SIGMA_BEGIN` 5 s, 0.01 Å ->
:data:`SIGMA_END` 0.005 s, and ``step_lr / sigma_end^2`` = 1e-4 / 0.01^2 = :data:`STEP_LR_REL`.
Lattices are (B, 3, 3) with rows a, b, c (Cartesian = frac @ lattice).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from c2np.models.backbone import MLP
from c2np.models.inverse.network import Denoiser
from c2np.models.inverse.process import Process
from c2np.models.inverse.templates import TemplateBlocks

if TYPE_CHECKING:
    from c2np.models.inverse.sampler import CellSampler

__all__ = ["CDVAEProcess", "standard_lattice_parameters", "lattice_from_standard", "register_lattice_stats",
           "parameter_stats", "SIGMA_BEGIN", "SIGMA_END", "KL_WEIGHT", "STEP_LR_REL", "noise_levels",
           "level_time", "lattice_parameters", "lattice_from_parameters", "scaled_lattice_parameters",
           "lattice_from_scaled_parameters", "perturb", "min_image_displacement", "reparameterize",
           "kl_divergence", "langevin_step"]

#: the largest coordinate noise (units of s)
SIGMA_BEGIN = 5.0
#: the smallest coordinate noise (units of s)
SIGMA_END = 0.005
#: weight of the latent's KL divergence in the loss (CDVAE's beta)
KL_WEIGHT = 0.01
#: Langevin step at noise sigma, divided by sigma^2 (CDVAE: step_lr 1e-4 Å^2 / sigma_end 0.01 Å squared)
STEP_LR_REL = 1.0

_IMAGES = torch.tensor([[i, j, k] for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)],
                       dtype=torch.float32)


def noise_levels(n_levels: int) -> Tensor:
    """(n_levels,) float32 coordinate noise, geometric from :data:`SIGMA_BEGIN` down to
    :data:`SIGMA_END` (units of s); level 0 is the largest."""
    if n_levels < 2:
        raise ValueError(f"n_levels must be >= 2, got {n_levels}")
    return torch.exp(torch.linspace(math.log(SIGMA_BEGIN), math.log(SIGMA_END), n_levels, dtype=torch.float64)
                     ).to(torch.float32)


def level_time(sigma: Tensor) -> Tensor:
    """The noise level as a time in [0, 1] (0 at :data:`SIGMA_END`, 1 at :data:`SIGMA_BEGIN`,
    linear in log sigma), for the network's time embedding."""
    return (torch.log(sigma) - math.log(SIGMA_END)) / (math.log(SIGMA_BEGIN) - math.log(SIGMA_END))


def lattice_parameters(lattice: Tensor) -> Tensor:
    """(B, 3, 3) lattices -> (B, 6): lengths a, b, c (the lattice's unit) and angles alpha,
    beta, gamma (degrees)."""
    lengths = lattice.norm(dim=-1)
    a, b, c = lattice[:, 0], lattice[:, 1], lattice[:, 2]

    def angle(u: Tensor, v: Tensor) -> Tensor:
        cos = (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp(min=1e-12)
        return torch.rad2deg(torch.arccos(cos.clamp(-1.0, 1.0)))

    return torch.cat([lengths, torch.stack([angle(b, c), angle(a, c), angle(a, b)], dim=-1)], dim=-1)


def lattice_from_parameters(params: Tensor, *, min_angle_deg: float = 20.0) -> Tensor:
    """(B, 6) lengths and angles (degrees) -> (B, 3, 3) lattices, a along x, b in the xy plane.
    Lengths are clamped to >= 1e-3 and angles to [``min_angle_deg``, 180 - ``min_angle_deg``];
    a set of angles that makes no cell gets a c vector of the right length along z."""
    length = params[:, :3].clamp(min=1e-3)
    ang = torch.deg2rad(params[:, 3:].clamp(min_angle_deg, 180.0 - min_angle_deg))
    ca, cb, cg = torch.cos(ang[:, 0]), torch.cos(ang[:, 1]), torch.cos(ang[:, 2])
    sg = torch.sin(ang[:, 2])
    zero = torch.zeros_like(ca)
    cx = cb
    cy = (ca - cb * cg) / sg
    cz = (1.0 - cx ** 2 - cy ** 2).clamp(min=1e-6).sqrt()
    bad = (1.0 - cx ** 2 - cy ** 2) <= 1e-6
    cx, cy, cz = torch.where(bad, zero, cx), torch.where(bad, zero, cy), torch.where(bad, torch.ones_like(cz), cz)
    rows = torch.stack([torch.stack([torch.ones_like(ca), zero, zero], -1),
                        torch.stack([cg, sg, zero], -1),
                        torch.stack([cx, cy, cz], -1)], dim=1)
    return rows * length[:, :, None]


def scaled_lattice_parameters(lattice: Tensor, n_atoms: Tensor) -> Tensor:
    """(B, 6) :func:`lattice_parameters` of lattices (B, 3, 3) with the lengths divided by
    ``n^(1/3)`` of their cells' ``n_atoms`` (B,) (CDVAE's ``scale_length``)."""
    lp = lattice_parameters(lattice)
    return torch.cat([lp[:, :3] / n_atoms[:, None].to(lp.dtype) ** (1.0 / 3.0), lp[:, 3:]], dim=-1)


def lattice_from_scaled_parameters(params: Tensor, n_atoms: Tensor) -> Tensor:
    """Inverse of :func:`scaled_lattice_parameters`: (B, 3, 3) lattices of cells of ``n_atoms``
    (B,) atoms (:func:`lattice_from_parameters`)."""
    p = torch.cat([params[:, :3] * n_atoms[:, None].to(params.dtype) ** (1.0 / 3.0), params[:, 3:]], dim=-1)
    return lattice_from_parameters(p)


def min_image_displacement(frac_from: Tensor, frac_to: Tensor, lattice: Tensor) -> Tensor:
    """(B, N, 3) Cartesian displacement from each atom at ``frac_from`` to the nearest periodic
    image of ``frac_to`` (over the 27 images of the wrapped fractional difference)."""
    d = (frac_to - frac_from + 0.5) % 1.0 - 0.5                                    # (B,N,3)
    cand = (d[:, :, None, :] + _IMAGES.to(device=d.device, dtype=d.dtype)) @ lattice[:, None, :, :]        # (B,N,27,3)
    best = cand.pow(2).sum(-1).argmin(-1)                                          # (B,N)
    return torch.gather(cand, 2, best[..., None, None].expand(-1, -1, 1, 3)).squeeze(2)


def perturb(frac: Tensor, lattice: Tensor, sigma: Tensor, g: torch.Generator) -> Tensor:
    """Fractional coordinates (B, N, 3) moved by isotropic Cartesian noise of std ``sigma``
    (B,) and wrapped into [0, 1)."""
    noise = torch.randn(frac.shape, generator=g, device=g.device) * sigma[:, None, None]
    return (frac + noise @ torch.linalg.inv(lattice)) % 1.0


def reparameterize(mu: Tensor, logvar: Tensor, g: torch.Generator) -> Tensor:
    """A draw of N(mu, exp(logvar)), differentiable in both (the VAE's reparameterisation)."""
    return mu + (0.5 * logvar).exp() * torch.randn(mu.shape, generator=g, device=g.device)


def kl_divergence(mu: Tensor, logvar: Tensor, mask: Tensor | None = None) -> Tensor:
    """KL(N(mu, exp(logvar)) || N(0, I)) summed over the last (latent) axis, averaged over the
    rest; with ``mask`` (the leading axes, e.g. (B, N) atoms) over the True entries only."""
    kl = -0.5 * (1.0 + logvar - mu ** 2 - logvar.exp()).sum(-1)
    if mask is None:
        return kl.mean()
    return (kl * mask).sum() / mask.sum()


def langevin_step(frac: Tensor, pred: Tensor, lattice: Tensor, sigma: float, g: torch.Generator) -> Tensor:
    """One annealed-Langevin step at noise ``sigma`` (units of s) on fractional coordinates
    (B, N, 3): the Cartesian positions move by ``step * pred / sigma`` (``pred``: the network's
    displacement / sigma, Cartesian, (B, N, 3)) plus Gaussian noise of std ``sqrt(2 step)``,
    ``step = STEP_LR_REL sigma^2``; the result is wrapped into [0, 1)."""
    step = STEP_LR_REL * sigma ** 2
    noise = torch.randn(frac.shape, generator=g, device=g.device)
    cart = frac @ lattice + step * pred / sigma + math.sqrt(2.0 * step) * noise
    return (cart @ torch.linalg.inv(lattice)) % 1.0


def standard_lattice_parameters(model: CellSampler, lattice: Tensor, n_atoms: Tensor) -> Tensor:
    """(B, 6) standardised lattice parameters (lengths / ``n^(1/3)``, angles; the generator's
    ``lp_mean``, ``lp_std``) of lattices (B,3,3) in units of s with ``n_atoms`` (B,) atoms;
    :func:`lattice_from_standard` inverts."""
    return (scaled_lattice_parameters(lattice, n_atoms) - model.lp_mean) / model.lp_std


def lattice_from_standard(model: CellSampler, pred: Tensor, n_atoms: Tensor) -> Tensor:
    """Lattices (B,3,3) in units of s from standardised parameters (B,6) of cells of
    ``n_atoms`` (B,) atoms (lengths scaled by ``n^(1/3)``, CDVAE's ``scale_length``)."""
    return lattice_from_scaled_parameters(pred * model.lp_std + model.lp_mean, n_atoms)


def register_lattice_stats(model: CellSampler, lattice_stats: tuple[np.ndarray, np.ndarray] | None) -> None:
    """The buffers ``lp_mean``, ``lp_std`` (6,) that standardise the six lattice parameters."""
    mean, std = lattice_stats if lattice_stats is not None else (np.zeros(6), np.ones(6))
    model.register_buffer("lp_mean", torch.as_tensor(mean, dtype=torch.float32).reshape(6))
    model.register_buffer("lp_std", torch.as_tensor(std, dtype=torch.float32).reshape(6))


def parameter_stats(lattices: np.ndarray, n_atoms: np.ndarray) -> dict[str, Any]:
    """``{"lattice_stats": (mean (6,), std (6,) + 1e-3)}`` of the training lattices' scaled
    parameters (:func:`scaled_lattice_parameters`)."""
    lp = scaled_lattice_parameters(torch.as_tensor(lattices), torch.as_tensor(n_atoms)).numpy()
    return {"lattice_stats": (lp.mean(0), lp.std(0) + 1e-3)}


class CDVAEProcess(Process):
    """CDVAE's VAE + score decoder (see the module): a second, shallower copy of the denoiser
    encodes the training cell into ``z`` (KL-regularised; ``z ~ N(0, I)`` at sampling); the
    lattice's six parameters are regressed from ``z``, the particle and the cell's composition;
    the coordinates come from annealed Langevin dynamics on a noise-conditional score
    (``steps`` levels, ``ld_steps_per_level`` steps each), the lattice held at the regressed one.
    The species are given by the composition, as in DiffCSP."""

    name = "cdvae"
    standardised_lattice = False
    projects_own_start = True

    def build(self, model: CellSampler, *, limit_density: float,
              lattice_stats: tuple[np.ndarray, np.ndarray] | None) -> None:
        h = self.cfg.hidden
        model.encoder = Denoiser(replace(self.cfg, layers=min(self.cfg.layers, 2), pair_readout=False),
                                 model.n_desc)
        model.fc_mu, model.fc_logvar, model.z_proj = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        model.lattice_head = MLP(2 * h + len(model.compositions), h, 6, 2)
        model.register_buffer("cd_sigmas", noise_levels(self.cfg.steps))
        register_lattice_stats(model, lattice_stats)

    def training_lattices(self, lattices: np.ndarray, n_atoms: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        return lattices, parameter_stats(lattices, n_atoms)

    def latent(self, model: CellSampler, cond: Tensor, z: Tensor, comp: Tensor) -> tuple[Tensor, Tensor]:
        """The decoder's condition (particle + latent, (B,H)) and the standardised lattice
        parameters (B, 6) regressed from it and the composition index ``comp`` (B,; -1: none)."""
        zc = cond + model.z_proj(z)
        onehot = nn.functional.one_hot(comp.clamp(min=0), len(model.compositions)).to(zc.dtype)
        onehot = onehot * (comp >= 0)[:, None].to(zc.dtype)
        return zc, model.lattice_head(torch.cat([zc, z, onehot], dim=-1))

    def loss(self, model: CellSampler, x_l0: Tensor, f0: Tensor, slot: Tensor, mask: Tensor, comp: Tensor,
             cond: Tensor, g: torch.Generator) -> tuple[Tensor, dict[str, float]]:
        """CDVAE's losses of one batch (the lattice in units of s): the latent's KL divergence
        (weight :data:`~c2np.models.inverse.cdvae.KL_WEIGHT`), the lattice parameters' squared
        error (standardised; weight ``lattice_weight``) and the coordinate score's (the minimum
        image displacement noisy -> clean over sigma, Cartesian); the decoder sees the true
        lattice (CDVAE's teacher forcing, kept for the whole run)."""
        B = x_l0.shape[0]
        n = mask.sum(1).float()
        _, _, _, _, pooled, _ = model.encoder.trunk(x_l0, f0, slot, mask, model.time_embedding(torch.zeros(B)), cond)
        mu, logvar = model.fc_mu(pooled), model.fc_logvar(pooled).clamp(-10.0, 10.0)
        z = reparameterize(mu, logvar, g)
        zc, pred_lp = self.latent(model, cond, z, comp)
        ll = ((pred_lp - standard_lattice_parameters(model, x_l0, n)) ** 2).mean()
        sig = model.cd_sigmas[torch.randint(0, len(model.cd_sigmas), (B,), generator=g, device=g.device)]
        ft = perturb(f0, x_l0, sig, g)
        target = min_image_displacement(ft, f0, x_l0) / sig[:, None, None]
        _, out_f, _ = model.net(x_l0, ft, slot, mask, model.time_embedding(level_time(sig)), zc)
        m = mask[..., None].float()
        lf = ((((out_f @ x_l0) - target) ** 2) * m).sum() / (3 * m.sum())
        kl = kl_divergence(mu, logvar)
        total = self.cfg.lattice_weight * ll + lf + KL_WEIGHT * kl
        return total, {"lattice": ll.item(), "frac": lf.item(), "kl": kl.item()}

    def sample(self, model: CellSampler, cond: Tensor, comps: Sequence[tuple[int, ...]], x_l: Tensor, f: Tensor,
               slot: Tensor, mask: Tensor, g: torch.Generator, template: TemplateBlocks | None
               ) -> tuple[Tensor, Tensor, Tensor]:
        """CDVAE's generation: ``z ~ N(0, I)``, the lattice from the head (projected onto the
        template's metric symmetry), uniform coordinates, then annealed Langevin dynamics over
        the ``steps`` noise levels (``ld_steps_per_level`` steps each; projected onto the
        template after every step); with ``sample_steps`` that many levels, geometric between
        the same largest and smallest noise."""
        B, N = slot.shape
        z = torch.randn(B, self.cfg.hidden, generator=g, device=g.device)
        idx = torch.as_tensor([model.compositions.index(tuple(c)) if tuple(c) in model.compositions else -1
                               for c in comps], dtype=torch.long,
                           device=cond.device)
        zc, pred_lp = self.latent(model, cond, z, idx)
        x_l = lattice_from_standard(model, pred_lp, mask.sum(1))
        f = torch.rand(B, N, 3, generator=g, device=g.device)
        if template is not None:
            for _ in range(3):
                x_l, f = model.project(x_l, f, template)
        K = self.cfg.sample_steps
        levels = model.cd_sigmas if K in (0, len(model.cd_sigmas)) else noise_levels(max(K, 2)).to(f.device)
        for sigma in levels:
            temb = model.time_embedding(level_time(sigma.expand(B)))
            for _ in range(self.cfg.ld_steps_per_level):
                _, out_f, _ = model.net(x_l, f, slot, mask, temb, zc)
                f = langevin_step(f, out_f @ x_l, x_l, float(sigma), g)
                if template is not None:
                    x_l, f = model.project(x_l, f, template)
        return x_l, f, slot
