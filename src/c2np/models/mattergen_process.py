"""MatterGen's generative process for the task-2 crystal generator
(:mod:`c2np.models.crystal_gen`, ``process="mattergen"``), as pure tensor functions.

Read from microsoft/mattergen (``mattergen/common/diffusion/corruption.py`` and the default
corruption config), re-written for the crystal generator's normalised lattice and padded cells:

* **Lattice**: the symmetric factor of the polar decomposition (``P = (L L^T)^(1/2)``, the same
  metric as ``L``, rotation removed) diffused by a variance-preserving SDE with linear
  ``beta(t)`` from :data:`BETA_MIN` to :data:`BETA_MAX` on ``t`` in (0, 1] towards a limit
  that depends on the atom count ``n``: mean ``(n / rho)^(1/3) I`` (``rho`` the training
  cells' mean number density) and element-wise standard deviation
  :data:`LIMIT_STD_REL` ``(n / rho)^(1/3)`` (MatterGen's 0.25 Å^2 n^(2/3) variance at its
  density 0.05 Å^-3, as a share of the limit lattice length). The noise is symmetric with
  the variance kept (:func:`symmetric_noise`).
* **Fractional coordinates**: a wrapped variance-exploding SDE whose sigma
  ``sigma_min^(1 - t) sigma_max^t`` (:data:`COORD_SIGMA_MIN`, :data:`COORD_SIGMA_MAX`) is
  divided by ``n^(1/3)`` (MatterGen's NumAtomsVarianceAdjustedWrappedVESDE).
* **Atom types**: absorbing-state (masked) discrete diffusion, each atom's species slot
  masked with probability ``t`` (:func:`mask_types`); the reverse process unmasks a masked atom
  with probability ``dt / t`` per step (:func:`unmask_types`), the slot chosen within the
  cell's composition.

Lengths are in units of the particle scale ``s`` before the generator's normalisation
``(x - mu) / sd``; the functions take ``mu`` (3, 3) and ``sd`` to work in normalised units.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["BETA_MIN", "BETA_MAX", "LIMIT_STD_REL", "COORD_SIGMA_MIN", "COORD_SIGMA_MAX", "T_EPS", "LANGEVIN_SNR",
           "symmetric_noise", "symmetrize", "symmetric_polar_factor", "mean_coeff", "beta",
           "limit_mean_std", "coord_sigma", "mask_types", "unmask_types"]

BETA_MIN = 0.1
BETA_MAX = 20.0
#: limit std per lattice element / limit lattice length: sqrt(0.25 n^(2/3)) / (n / 0.05)^(1/3)
LIMIT_STD_REL = 0.5 * 0.05 ** (1.0 / 3.0)
COORD_SIGMA_MIN = 0.01
COORD_SIGMA_MAX = 5.0
#: the smallest diffusion time trained and sampled (t in [T_EPS, 1])
T_EPS = 1e-3
#: signal-to-noise ratio of the Langevin corrector on the coordinates (MatterGen's 0.4)
LANGEVIN_SNR = 0.4


def symmetric_noise(shape: tuple[int, ...], g: torch.Generator) -> Tensor:
    """Standard normal (B, 3, 3) noise made symmetric with every element's variance kept:
    off-diagonal ``(z_ij + z_ji) / sqrt(2)``, diagonal ``z_ii``."""
    z = torch.randn(shape, generator=g)
    eye = torch.eye(3, dtype=z.dtype)
    return (1.0 - eye) * (z + z.transpose(-1, -2)) / math.sqrt(2.0) + eye * z


def symmetrize(a: Tensor) -> Tensor:
    """``(a + a^T) / 2`` of (B, 3, 3) matrices."""
    return 0.5 * (a + a.transpose(-1, -2))


def symmetric_polar_factor(lattice: Tensor) -> Tensor:
    """``(L L^T)^(1/2)`` of lattices (..., 3, 3) (rows a, b, c): the lattice with the same metric
    and no rotation (its rows are the lattice vectors in a fixed orientation)."""
    gram = lattice @ lattice.transpose(-1, -2)
    ev, v = torch.linalg.eigh(gram)
    return (v * ev.clamp(min=0.0).sqrt()[..., None, :]) @ v.transpose(-1, -2)


def beta(t: Tensor) -> Tensor:
    """The VP SDE's ``beta(t)`` (linear from BETA_MIN to BETA_MAX)."""
    return BETA_MIN + t * (BETA_MAX - BETA_MIN)


def mean_coeff(t: Tensor) -> Tensor:
    """``exp(-1/4 t^2 (b1 - b0) - 1/2 t b0)``: the weight of the clean lattice at time ``t``."""
    return torch.exp(-0.25 * t ** 2 * (BETA_MAX - BETA_MIN) - 0.5 * t * BETA_MIN)


def limit_mean_std(n_atoms: Tensor, density: float, mu: Tensor, sd: float) -> tuple[Tensor, Tensor]:
    """Normalised limit mean (B, 3, 3) and element-wise std (B,) of the lattice process for
    cells of ``n_atoms`` (B,) atoms at number ``density`` (atoms per s^3)."""
    length = (n_atoms.to(torch.float32) / float(density)) ** (1.0 / 3.0)
    eye = torch.eye(3, dtype=torch.float32)
    mean = (length[:, None, None] * eye - mu) / float(sd)
    return mean, LIMIT_STD_REL * length / float(sd)


def coord_sigma(t: Tensor, n_atoms: Tensor) -> Tensor:
    """The fractional-coordinate sigma (B,) at times ``t`` (B,) for ``n_atoms`` (B,) per cell."""
    base = COORD_SIGMA_MIN ** (1.0 - t) * COORD_SIGMA_MAX ** t
    return base * n_atoms.to(base.dtype) ** (-1.0 / 3.0)


def mask_types(slot: Tensor, mask: Tensor, t: Tensor, mask_token: int, known: Tensor,
               g: torch.Generator) -> tuple[Tensor, Tensor]:
    """The forward type corruption: each real atom's slot replaced by ``mask_token`` with
    probability ``t`` (B,), except in the rows where ``known`` (B,) bool (types given, the
    crystal-structure-prediction mode). Returns (corrupted slots (B, N), masked (B, N) bool)."""
    u = torch.rand(slot.shape, generator=g)
    masked = (u < t[:, None]) & mask & ~known[:, None]
    return torch.where(masked, torch.full_like(slot, mask_token), slot), masked


def unmask_types(slot: Tensor, logits: Tensor, budget: Tensor, p_unmask: float, mask_token: int,
                 g: torch.Generator) -> Tensor:
    """One reverse step of the type process: each masked atom (``slot == mask_token``) is
    revealed with probability ``p_unmask`` (1: all), most probable revealed first, each given
    its most probable slot among those with budget left. ``budget`` (B, S): atoms per slot not
    yet revealed (updated in place). Returns the new slots (B, N)."""
    out = slot.clone()
    probs = torch.softmax(logits, dim=-1)
    reveal = (slot == mask_token) & (torch.rand(slot.shape, generator=g) < p_unmask)
    for b in range(slot.shape[0]):
        idx = torch.nonzero(reveal[b]).flatten()
        if len(idx) == 0:
            continue
        order = idx[torch.argsort(probs[b, idx].max(-1).values, descending=True)]
        for i in order.tolist():
            p = torch.where(budget[b] > 0, probs[b, i], torch.full_like(probs[b, i], -1.0))
            k = int(p.argmax())
            if budget[b, k] <= 0:
                continue        # no budget left at all (more masked atoms than the composition)
            out[b, i] = k
            budget[b, k] -= 1
    return out
