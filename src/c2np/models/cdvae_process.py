"""CDVAE's generative process for the task-2 crystal generator
(:mod:`c2np.models.crystal_gen`, ``process="cdvae"``), as pure tensor functions.

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

import torch
from torch import Tensor

__all__ = ["SIGMA_BEGIN", "SIGMA_END", "KL_WEIGHT", "STEP_LR_REL", "noise_levels", "level_time",
           "lattice_parameters", "lattice_from_parameters", "scaled_lattice_parameters",
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
    cand = (d[:, :, None, :] + _IMAGES.to(d.dtype)) @ lattice[:, None, :, :]        # (B,N,27,3)
    best = cand.pow(2).sum(-1).argmin(-1)                                          # (B,N)
    return torch.gather(cand, 2, best[..., None, None].expand(-1, -1, 1, 3)).squeeze(2)


def perturb(frac: Tensor, lattice: Tensor, sigma: Tensor, g: torch.Generator) -> Tensor:
    """Fractional coordinates (B, N, 3) moved by isotropic Cartesian noise of std ``sigma``
    (B,) and wrapped into [0, 1)."""
    noise = torch.randn(frac.shape, generator=g) * sigma[:, None, None]
    return (frac + noise @ torch.linalg.inv(lattice)) % 1.0


def reparameterize(mu: Tensor, logvar: Tensor, g: torch.Generator) -> Tensor:
    """A draw of N(mu, exp(logvar)), differentiable in both (the VAE's reparameterisation)."""
    return mu + (0.5 * logvar).exp() * torch.randn(mu.shape, generator=g)


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
    cart = frac @ lattice + step * pred / sigma + math.sqrt(2.0 * step) * torch.randn(frac.shape, generator=g)
    return (cart @ torch.linalg.inv(lattice)) % 1.0
