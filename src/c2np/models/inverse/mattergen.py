"""MatterGen's generative process for the task-2 crystal generator
(``process="mattergen"``): pure tensor functions and :class:`MatterGenProcess`.

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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from c2np.models.inverse.diffcsp import wrapped_score
from c2np.models.inverse.process import Process
from c2np.models.inverse.templates import TemplateBlocks
from c2np.particle_descriptor import N_SLOTS

if TYPE_CHECKING:
    from c2np.models.inverse.sampler import CellSampler

__all__ = ["MatterGenProcess", "BETA_MIN", "BETA_MAX", "LIMIT_STD_REL", "COORD_SIGMA_MIN", "COORD_SIGMA_MAX",
           "T_EPS", "LANGEVIN_SNR", "symmetric_noise", "symmetrize", "symmetric_polar_factor", "mean_coeff",
           "beta", "limit_mean_std", "coord_sigma", "mask_types", "unmask_types"]

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
    z = torch.randn(shape, generator=g, device=g.device)
    eye = torch.eye(3, dtype=z.dtype, device=z.device)
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
    eye = torch.eye(3, dtype=torch.float32, device=n_atoms.device)
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
    u = torch.rand(slot.shape, generator=g, device=g.device)
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
    reveal = (slot == mask_token) & (torch.rand(slot.shape, generator=g, device=g.device) < p_unmask)
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


class MatterGenProcess(Process):
    """MatterGen's diffusion (see the module): the symmetric lattice towards its atom-count
    limit, wrapped VE coordinates and absorbing-state types (in training the types are given,
    not corrupted, in a share ``type_known_fraction`` of the rows: MatterGen's
    crystal-structure-prediction mode, which is how cells are sampled under a template).
    Sampler ``pc`` is MatterGen's (ancestral steps, a Langevin corrector on the coordinates,
    noise removal at the last step), ``sde`` Euler-Maruyama."""

    name = "mattergen"
    typed = True
    standardised_lattice = False
    projects_own_start = True

    def build(self, model: CellSampler, *, limit_density: float,
              lattice_stats: tuple[np.ndarray, np.ndarray] | None) -> None:
        # atoms per s^3 of the training cells (the lattice limit)
        model.register_buffer("limit_density", torch.tensor(float(limit_density), dtype=torch.float32))

    def training_lattices(self, lattices: np.ndarray, n_atoms: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """The symmetric polar factors, and the training cells' mean number density."""
        lat = symmetric_polar_factor(torch.as_tensor(lattices)).numpy()
        return lat, {"limit_density": float(np.mean(n_atoms / np.abs(np.linalg.det(lat))))}

    def limit(self, model: CellSampler, n_atoms: Tensor) -> tuple[Tensor, Tensor]:
        """MatterGen's lattice limit (normalised mean (B,3,3), std (B,)) for cells of ``n_atoms``."""
        return limit_mean_std(n_atoms, float(model.limit_density), model.lat_mean, float(model.lat_std))

    def loss(self, model: CellSampler, x_l0: Tensor, f0: Tensor, slot: Tensor, mask: Tensor, comp: Tensor,
             cond: Tensor, g: torch.Generator) -> tuple[Tensor, dict[str, float]]:
        """MatterGen's denoising losses of one batch: the lattice noise (symmetric; or, with
        ``lattice_param="x0"``, the clean lattice), the wrapped-normal coordinate score (times
        sigma) and the cross-entropy of the masked atoms' slots."""
        B = x_l0.shape[0]
        n = mask.sum(1).float()
        t = T_EPS + (1.0 - T_EPS) * torch.rand(B, generator=g, device=g.device)
        a = mean_coeff(t)[:, None, None]
        mean_n, std_n = self.limit(model, n)
        z = symmetric_noise((B, 3, 3), g)
        x_lt = a * x_l0 + (1 - a) * mean_n + (1 - a ** 2).sqrt() * std_n[:, None, None] * z
        sig = coord_sigma(t, n)[:, None, None].expand_as(f0)
        noise = torch.randn(f0.shape, generator=g, device=g.device) * sig
        ft = (f0 + noise) % 1.0
        known = torch.rand(B, generator=g, device=g.device) < self.cfg.type_known_fraction
        slot_t, masked = mask_types(slot, mask, t, N_SLOTS, known, g)
        out_l, out_f, logits = model.net(x_lt, ft, slot_t, mask, model.time_embedding(t), cond)
        assert logits is not None
        m = mask[..., None].float()
        lf = (((out_f - wrapped_score(noise, sig)) ** 2) * m).sum() / (3 * m.sum())
        ll = ((symmetrize(out_l) - (z if self.cfg.lattice_param == "eps" else x_l0)) ** 2).mean()
        lt = (nn.functional.cross_entropy(logits[masked], slot[masked]) if bool(masked.any())
              else logits.sum() * 0.0)
        total = self.cfg.lattice_weight * ll + lf + lt
        return total, {"lattice": ll.item(), "frac": lf.item(), "types": lt.item()}

    def sample(self, model: CellSampler, cond: Tensor, comps: Sequence[tuple[int, ...]], x_l: Tensor, f: Tensor,
               slot: Tensor, mask: Tensor, g: torch.Generator, template: TemplateBlocks | None
               ) -> tuple[Tensor, Tensor, Tensor]:
        """MatterGen's reverse process (``sample_steps`` or else ``steps`` times from 1 to
        :data:`~c2np.models.inverse.mattergen.T_EPS`): the lattice from its atom-count limit, the
        coordinates from the wrapped prior, the slots from all masked (revealed within the
        composition) unless a template gives them or the model was trained with every type
        given (``type_known_fraction`` 1)."""
        B, N = slot.shape
        n = mask.sum(1).float()
        mean_n, std_n = self.limit(model, n)
        x_l = mean_n + std_n[:, None, None] * symmetric_noise((B, 3, 3), g)
        f0 = torch.randn(B, N, 3, generator=g, device=g.device)
        f = (f0 * coord_sigma(torch.ones(B, device=n.device), n)[:, None, None]) % 1.0
        budget = torch.as_tensor(np.array([list(c) + [0] * (N_SLOTS - len(c)) for c in comps]), dtype=torch.long,
                                 device=slot.device)
        gen_types = template is None and self.cfg.type_known_fraction < 1.0
        if gen_types:
            slot = torch.where(mask, torch.full_like(slot, N_SLOTS), slot)
        if template is not None:
            for _ in range(3):
                x_l, f = model.project(x_l, f, template)
        K = self.cfg.sample_steps or self.cfg.steps
        times = T_EPS + (1.0 - T_EPS) * torch.arange(K + 1, dtype=torch.float32) / K
        for k in range(K, 0, -1):
            t, t_prev, last = times[k], times[k - 1], k == 1
            tb = torch.full((B,), float(t), device=x_l.device)
            out_l, out_f, logits = model.net(x_l, f, slot, mask, model.time_embedding(tb), cond)
            x_l = self.lattice_step(x_l, out_l, mean_n, std_n, t, t_prev, last, g)
            # the corrector's time: one grid step before t (as a difference, to keep float32 rounding)
            t_corr = tb - (1.0 - T_EPS) / K
            f = self.coord_step(model, f, out_f, x_l, slot, mask, cond, n, (t, t_prev, t_corr), last, g)
            if gen_types:
                assert logits is not None
                p_reveal = 1.0 if last else float(t - t_prev) / float(t)
                slot = unmask_types(slot, logits, budget, p_reveal, N_SLOTS, g)
            if template is not None:
                x_l, f = model.project(x_l, f, template)
        return x_l, f, slot

    def lattice_step(self, x_l: Tensor, out_l: Tensor, mean_n: Tensor, std_n: Tensor, t: Tensor,
                     t_prev: Tensor, last: bool, g: torch.Generator) -> Tensor:
        """One reverse lattice step from ``t`` to ``t_prev``: MatterGen's ancestral step (the DDPM
        posterior; the last step goes to t = 0, the clean lattice's posterior mean) for
        ``sampler="pc"``, else Euler–Maruyama on the reverse VP SDE."""
        a = mean_coeff(t)
        std_n = std_n[:, None, None]
        std_l = (1 - a ** 2).sqrt() * std_n
        if self.cfg.lattice_param == "eps":
            score = -symmetrize(out_l) / std_l
        else:                           # the clean lattice predicted: the score of its Gaussian
            score = -(x_l - a * symmetrize(out_l) - (1 - a) * mean_n) / std_l ** 2
        if self.cfg.sampler == "pc":
            a_p = mean_coeff(torch.tensor(0.0) if last else t_prev)
            ab, ab_p = a ** 2, a_p ** 2
            y0 = ((x_l - mean_n) + std_l ** 2 * score) / a     # E[x0 - m | x_t] (Tweedie)
            y = (a_p * (1 - ab / ab_p) / (1 - ab)) * y0 + ((a / a_p) * (1 - ab_p) / (1 - ab)) * (x_l - mean_n)
            if last:
                return mean_n + y
            var = (1 - ab_p) / (1 - ab) * (1 - ab / ab_p)
            return mean_n + y + var.sqrt() * std_n * symmetric_noise(tuple(x_l.shape), g)
        bt, dt = beta(t), float(t - t_prev)
        g2 = bt * std_n ** 2
        x_l = x_l + (0.5 * bt * (x_l - mean_n) + g2 * score) * dt
        return x_l if last else x_l + (g2 * dt).sqrt() * symmetric_noise(tuple(x_l.shape), g)

    def coord_step(self, model: CellSampler, f: Tensor, out_f: Tensor, x_l: Tensor, slot: Tensor, mask: Tensor,
                   cond: Tensor, n: Tensor, times: tuple[Tensor, Tensor, Tensor], last: bool,
                   g: torch.Generator) -> Tensor:
        """One reverse coordinate step from ``t`` to ``t_prev`` (``times`` = (t, t_prev, the
        corrector's time (B,) = t_prev)), wrapped into [0, 1): MatterGen's wrapped ancestral
        predictor and one Langevin corrector step at ``t_prev`` for ``sampler="pc"`` (the last
        step to sigma 0: noise removal), else Euler–Maruyama."""
        t, t_prev, t_corr = times
        B = f.shape[0]
        sig = coord_sigma(torch.full((B,), float(t), device=f.device), n)[:, None, None]
        score = out_f / sig
        if self.cfg.sampler == "pc":
            if last:
                return (f + sig ** 2 * score) % 1.0
            sig_p = coord_sigma(torch.full((B,), float(t_prev), device=f.device), n)[:, None, None]
            f = f + (sig ** 2 - sig_p ** 2) * score
            noise = torch.randn(f.shape, generator=g, device=g.device)
            f = f + (sig_p ** 2 * (sig ** 2 - sig_p ** 2) / sig ** 2).sqrt() * noise
            return self.langevin_coords(model, f % 1.0, x_l, slot, mask, t_corr, sig_p, cond, g) % 1.0
        g2 = 2.0 * sig ** 2 * math.log(COORD_SIGMA_MAX / COORD_SIGMA_MIN)
        dt = float(t - t_prev)
        f = f + g2 * score * dt
        return (f if last else f + (g2 * dt).sqrt() * torch.randn(f.shape, generator=g, device=g.device)) % 1.0

    def langevin_coords(self, model: CellSampler, f: Tensor, x_l: Tensor, slot: Tensor, mask: Tensor, t: Tensor,
                        sig: Tensor, cond: Tensor, g: torch.Generator) -> Tensor:
        """One Langevin corrector step on the coordinates at time ``t`` (B,) and noise ``sig``
        (B,1,1), MatterGen's step size ``2 (snr |z| / |score|)^2`` per cell
        (:data:`~c2np.models.inverse.mattergen.LANGEVIN_SNR`)."""
        _, out_f, _ = model.net(x_l, f, slot, mask, model.time_embedding(t), cond)
        m = mask[..., None].to(f.dtype)
        score = out_f / sig * m
        z = torch.randn(f.shape, generator=g, device=g.device) * m
        ratio = z.flatten(1).norm(dim=1) / score.flatten(1).norm(dim=1).clamp(min=1e-12)
        step = (2.0 * (LANGEVIN_SNR * ratio) ** 2)[:, None, None]
        return f + step * score + (2.0 * step).sqrt() * z

