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
  guidance on R at sampling; types revealed within the composition head's per-element budget.
* :class:`ADiT` — per-atom VAE (transformer encoder/decoder) to latents of size
  ``latent_dim``, then (two stages) a flow-matching diffusion transformer (adaLN) over the set
  of frozen, normalised latents that predicts the clean latent, as ADiT.
* :class:`SiteScorer` — beyond the paper: candidate lattice sites from carving the rotated
  crystal at R + margin (cell, R and rotation only), each scored inside/outside by a network
  on invariant features (|x| / R, |x| - R, species, local environment).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch
import torch.nn.functional as F
from scipy.spatial import cKDTree
from torch import Tensor, nn

from c2np.carving import carve
from c2np.models.backbone import (
    EGNN,
    MLP,
    N_FRAME_FEATURES,
    N_Z,
    AdaLNBlock,
    ConditionBatch,
    Conditioner,
    CountHead,
    ParticleBatch,
    collate_conditions,
    collate_particles,
    frame_features,
    from_padded,
    knn_graph,
    lattice_site_vectors,
    sinusoidal_embedding,
    site_edge_features,
    to_padded,
)
from c2np.models.config import ModelConfig
from c2np.models.data import MAX_SPECIES_SLOTS, Condition
from c2np.particle import Particle

__all__ = ["GeneratorBase", "CDVAE", "DiffCSP", "FlowMM", "MatterGen", "ADiT", "SiteScorer",
           "GENERATORS", "alpha_bar", "ddpm_posterior_step"]

S = MAX_SPECIES_SLOTS


# ---------------------------------------------------------------------------------------
# noise utilities
def randn(shape: tuple[int, ...], g: torch.Generator) -> Tensor:
    """Standard normal draws from generator ``g`` (on its device)."""
    return torch.randn(shape, generator=g, device=g.device)


def rand(shape: tuple[int, ...], g: torch.Generator) -> Tensor:
    """Uniform [0, 1) draws from generator ``g`` (on its device)."""
    return torch.rand(shape, generator=g, device=g.device)


def uniform_ball(n: int, g: torch.Generator) -> Tensor:
    """(n, 3) points uniform in the unit ball."""
    d = randn((n, 3), g)
    d = d / d.norm(dim=-1, keepdim=True).clamp(min=1e-8)
    return d * rand((n, 1), g) ** (1.0 / 3.0)


def alpha_bar(t: Tensor, s: float = 0.008) -> Tensor:
    """Cosine schedule alpha_bar(t), t in [0, 1] (1 = pure noise), clipped to [1e-4, 1]
    (exactly 1 at t = 0, the end of a sampler)."""
    f = torch.cos((t + s) / (1 + s) * math.pi / 2) ** 2 / math.cos(s / (1 + s) * math.pi / 2) ** 2
    return torch.where(t > 0, f.clamp(1e-4, 1.0), torch.ones_like(f))


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
        pos = (u[start:start + n] * c.radius[b]).double().cpu().numpy()
        z = c.slots_z[b, types[start:start + n]].cpu().numpy()
        out.append(Particle(z, pos))
        start += n
    return out


def _batch_index(counts: Tensor) -> Tensor:
    return torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts)


def _combined_loss(pos_loss: Tensor, type_loss: Tensor, count_loss: Tensor) -> tuple[Tensor, dict[str, float]]:
    """Sum of the position, type and count losses, with the parts for the training log."""
    return pos_loss + type_loss + count_loss, {"pos": pos_loss.item(), "type": type_loss.item(),
                                               "count": count_loss.item()}


def _collate(conds: Sequence[Condition], particles: Sequence[Particle],
             device: torch.device) -> tuple[ConditionBatch, ParticleBatch]:
    """Collated conditions and target particles on ``device``."""
    return collate_conditions(conds).to(device), collate_particles(particles, conds).to(device)


def sample_times(n: int, g: torch.Generator, *, power: float = 1.0, eps_t: float = 0.0) -> Tensor:
    """(n + 1,) decreasing times of an n-step sampler, on ``g``'s device: t_i = eps_t + (1 -
    eps_t) (1 - i / n)^power for i < n, and t_n = 0 (the last step returns the clean-position
    estimate at t_{n-1} = eps_t). ``power`` 1 with ``eps_t`` 0 is the uniform grid linspace(1, 0);
    ``power`` > 1 puts more steps near t = 0 (spacing (1 - eps_t) power k^(power - 1) / n^power at
    the k-th step from the end); ``eps_t`` is MatterGen's last denoising time (1e-3 there)."""
    if int(n) < 1 or power <= 0 or not 0.0 <= eps_t < 1.0:
        raise ValueError(f"sample_times: need n >= 1, power > 0, 0 <= eps_t < 1 (got {n}, {power}, {eps_t})")
    ts = eps_t + (1.0 - eps_t) * torch.linspace(1.0, 0.0, int(n) + 1, device=g.device) ** power
    ts[-1] = 0.0
    return ts


def vp_denoise(denoiser: Denoiser, u: Tensor, type_feat: Tensor, type_ll: Tensor | None, t: Tensor,
               batch: Tensor, cond: Tensor, c: ConditionBatch,
               x0_prev: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """One evaluation of the denoiser for a VP (DDPM) process on unit-ball positions ``u``
    (N, 3) at times ``t`` (B,): (eps_hat (N, 3), clean type logits (N, S), x0_hat (N, 3) Å).

    The graph is built on ``u R``; the lattice features see ``u R / sqrt(alpha_bar)`` (the
    VE-equivalent coordinate x0 + sigma eps, sigma = R sqrt((1 - alpha_bar) / alpha_bar)),
    where the lattice phases of a noisy atom mean something; eps_hat follows from x0_hat."""
    return vp_denoise_each(denoiser, u, type_feat, type_ll, t, batch, (cond,), c, x0_prev)[0]


def vp_denoise_each(denoiser: Denoiser, u: Tensor, type_feat: Tensor, type_ll: Tensor | None, t: Tensor,
                    batch: Tensor, conds: Sequence[Tensor], c: ConditionBatch,
                    x0_prev: Tensor | None) -> list[tuple[Tensor, Tensor, Tensor]]:
    """:func:`vp_denoise` of the same state for each condition embedding in ``conds`` (e.g.
    the conditional and unconditional passes of guidance); the state's features, graph and
    lattice sites are computed once (:meth:`Denoiser.prepare`), so each result equals that
    of its own :func:`vp_denoise` call."""
    return vp_run(denoiser, u, vp_features(denoiser, u, type_feat, type_ll, t, batch, c), t, batch, conds, c,
                  x0_prev)


def vp_features(denoiser: Denoiser, u: Tensor, type_feat: Tensor, type_ll: Tensor | None, t: Tensor,
                batch: Tensor, c: ConditionBatch) -> DenoiserFeatures:
    """The denoiser's :meth:`~Denoiser.features` of the VP state ``u`` (N, 3) at times ``t``
    (B,): the graph on ``u R``, the lattice features on ``u R / sqrt(alpha_bar)`` (see
    :func:`vp_denoise`)."""
    ab = alpha_bar(t)  # (B,)
    R = c.radius[batch].unsqueeze(-1)
    abn = ab[batch].unsqueeze(-1)
    return denoiser.features(u * R, u * torch.rsqrt(abn) * R, c.radius * torch.sqrt((1 - ab) / ab), type_feat,
                             type_ll, t, batch, c)


def vp_run(denoiser: Denoiser, u: Tensor, feats: DenoiserFeatures, t: Tensor, batch: Tensor,
           conds: Sequence[Tensor], c: ConditionBatch, x0_prev: Tensor | None) -> list[tuple[Tensor, Tensor, Tensor]]:
    """:func:`vp_denoise_each` on the state's :func:`vp_features` ``feats`` (computed once
    when several evaluations see the same state, e.g. the self-conditioning estimate's pass
    and the main pass of a training step)."""
    abn = alpha_bar(t)[batch].unsqueeze(-1)
    R = c.radius[batch].unsqueeze(-1)
    inputs = denoiser.self_conditioned(feats, x0_prev)
    inv = torch.rsqrt(1 - abn)
    res = []
    for cond in conds:
        out = denoiser.run(inputs, cond)
        eps_hat, x0 = mix_target(out, u, R, inv, -torch.sqrt(abn) * inv)  # eps = (u - sqrt(ab) x0) / sqrt(1-ab)
        res.append((eps_hat, out.logits, x0))
    return res


def revealed_type_ll(types: Tensor, masked: Tensor) -> Tensor:
    """(N, S) species log-likelihood of an absorbing-state type: 0 for every slot while masked,
    0 for the revealed slot and -30 for the others once revealed."""
    onehot = F.one_hot(types.clamp(min=0), S).bool()
    return torch.where(masked.unsqueeze(-1) | onehot, 0.0, -30.0)


def composition_fractions(p: ParticleBatch, c: ConditionBatch) -> Tensor:
    """(B, S) species-slot fractions of the target particles (the composition heads' label)."""
    onehot = F.one_hot(p.types, S).float()
    comp = torch.zeros(c.size, S, device=onehot.device).index_add_(0, p.batch, onehot)
    return comp / p.counts.unsqueeze(-1).float()


def composition_budget(probs: Tensor, counts: Tensor) -> Tensor:
    """(B, S) integer atoms per species slot from predicted fractions ``probs`` (B, S) and atom
    counts (B,): floor of ``counts * probs`` plus the largest remainders, so each row sums to
    its count (Hamilton's apportionment)."""
    want = probs * counts.unsqueeze(-1).float()
    base = torch.floor(want)
    left = (counts - base.sum(-1).long()).clamp(min=0)
    order = torch.argsort(want - base, dim=-1, descending=True)
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(S, device=order.device).expand_as(order))
    return (base + (rank < left.unsqueeze(-1)).float()).long()


def reveal_confident(probs: Tensor, masked: Tensor, n_reveal: Tensor, batch: Tensor, budget: Tensor,
                     g: torch.Generator) -> tuple[Tensor, Tensor]:
    """Reveal ``n_reveal`` (B,) masked atoms per sample, most confident first (MaskGIT-style):
    every masked atom draws a type from ``probs`` (N, S) restricted to the species slots with
    atoms left in ``budget`` (B, S); the atom whose draw has the highest probability is revealed,
    the budget (decremented in place) and the draws are updated, and so on. Returns the
    revealed mask (N,) and the drawn types (N,) (-1 where not revealed)."""
    out = torch.full((len(probs),), -1, dtype=torch.long, device=probs.device)
    for b in torch.nonzero(n_reveal > 0).squeeze(-1).tolist():
        cand = torch.nonzero(masked & (batch == b)).squeeze(-1)
        for _ in range(min(int(n_reveal[b]), len(cand))):
            allowed = budget[b] > 0
            if not bool(allowed.any()):
                break
            p = (probs[cand] + 1e-12) * allowed
            p = p / p.sum(-1, keepdim=True)
            draw = torch.multinomial(p, 1, generator=g).squeeze(-1)
            k = int(p.gather(1, draw.unsqueeze(-1)).squeeze(-1).argmax())
            i, s = int(cand[k]), int(draw[k])
            out[i] = s
            budget[b, s] -= 1
            cand = torch.cat([cand[:k], cand[k + 1:]])
    return out >= 0, out


def keep_sited(u: Tensor, types: Tensor, counts: Tensor, c: ConditionBatch, *,
               tol_angstrom: float, retype: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """Unit-ball positions ``u`` (N, 3), slot types (N,) and per-sample counts (B,) reduced to
    the atoms that sit on a lattice site of their own species (nearest such site of the
    condition's infinite lattice within ``tol_angstrom``), one atom per site (the nearest
    one): an atom with no site, or the second atom on a taken site, is dropped. With
    ``retype`` an atom takes the species of its nearest site of any species instead (the
    type read from the site, as DiffCSP's types here). Returns the kept (u, types, counts)."""
    batch = _batch_index(counts)
    if len(u) == 0:
        return u, types, counts
    _, dist, keys = lattice_site_vectors(u * c.radius[batch].unsqueeze(-1), batch, c, 1, with_keys=True)
    rows = torch.arange(len(u), device=u.device)
    if retype:
        types = dist[:, :, 0].argmin(-1)
    d, key = dist[rows, types, 0], keys[rows, types, 0]
    order = torch.argsort(d)
    _, inv = torch.unique(key[order], return_inverse=True)
    first = torch.full((int(inv.max()) + 1,), len(u), dtype=torch.long, device=u.device)
    first = first.scatter_reduce(0, inv, torch.arange(len(u), device=u.device), reduce="amin")
    keep_sorted = torch.zeros(len(u), dtype=torch.bool, device=u.device)
    keep_sorted[first] = True
    keep = torch.zeros_like(keep_sorted)
    keep[order] = keep_sorted & (d[order] < tol_angstrom)
    new_counts = torch.zeros_like(counts).index_add_(0, batch, keep.long())
    return u[keep], types[keep], new_counts


def langevin_correct(x: Tensor, eps_hat: Tensor, var: Tensor, g: torch.Generator, *, step: float) -> Tensor:
    """One Langevin corrector step on p_t for an epsilon-predicting model of a Gaussian
    perturbation x = a x0 + sqrt(var) eps: score = -eps_hat / sqrt(var), step size ``step * var``
    (VP: var = 1 - alpha_bar(t), DiffCSP's step_lr (sigma_t / sigma_1)^2 rule in VP units; ADiT's
    linear interpolant z_t = t z1 + (1 - t) z0: var = (1 - t)^2)."""
    delta = step * var
    return x - delta * eps_hat / torch.sqrt(var) + torch.sqrt(2 * delta) * randn(tuple(x.shape), g)


# ---------------------------------------------------------------------------------------
class GeneratorBase(nn.Module):
    """Shared parts: conditioner (cell encoder + R + rotation), count head, slot embeddings."""

    task = "forward"
    device_ready = True  # every tensor is created on the weights' / the generator's device

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

    @property
    def device(self) -> torch.device:
        """Device of the weights (every tensor a generator creates goes there)."""
        return cast(nn.Linear, self.count_head.corr[0]).weight.device

    def _sample_setup(self, conds: Sequence[Condition]) -> tuple[ConditionBatch, Tensor, Tensor, Tensor]:
        """Collated conditions, their embedding, and the sampled atom counts with the atom ->
        sample index (the start of every sampler; the target count is never an input)."""
        c = collate_conditions(conds).to(self.device)
        cond = self.conditioner(c)
        counts = self.count_head.sample(c, cond)
        return c, cond, counts, _batch_index(counts)

    def loss(self, conds: Sequence[Condition], particles: Sequence[Particle],
             g: torch.Generator) -> tuple[Tensor, dict[str, float]]:
        raise NotImplementedError

    def sample(self, conds: Sequence[Condition], g: torch.Generator,
               steps: int | None = None) -> list[Particle]:
        raise NotImplementedError


def inverse_softplus(y: float) -> float:
    """x with softplus(x) = y (> 0), stable for large y."""
    return float(y + math.log(-math.expm1(-y)))


DATA_STD_UNIT = math.sqrt(0.2)  # per-coordinate standard deviation of a uniform unit ball


class SiteAssignment(nn.Module):
    """Soft assignment of atoms to candidate lattice sites with exclusion.

    Each atom scores its k nearest sites of every species slot, plus a "no site" option:
    logit = -|d|^2 / (2 sigma^2) (the Gaussian likelihood of the noise at level sigma, Å)
    + the species log-likelihood of the atom's noisy type (when the family has one) + a learned
    term from the atom's features and the site's distance and position relative to the sphere.
    A few Sinkhorn-style rounds then lower the logits of every site whose total mass over the
    atoms exceeds one, so two atoms cannot share a site. Returns (N, S, k) site probabilities
    and the (N, 1) "no site" probability (together they sum to 1 per atom).
    """

    def __init__(self, hidden: int, iters: int, *, outside_per_angstrom: float = 10.0,
                 sample_iters: int = 0) -> None:
        super().__init__()
        self.iters = int(iters)
        self.sample_iters = int(sample_iters) or self.iters  # rounds in eval mode (sampling)
        self.h_lin = nn.Linear(hidden, hidden)
        self.c_lin = nn.Linear(3 + S, hidden)
        self.out = nn.Linear(hidden, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)
        self.null = MLP(hidden, hidden, 1)
        # sphere prior: a site d Å outside the sphere loses softplus(w) d nats (w learned, init
        # ``outside_per_angstrom``, 10/Å unless a family asks for a sharper one)
        self.outside = nn.Parameter(torch.tensor(inverse_softplus(outside_per_angstrom)))

    def forward(self, h: Tensor, dist: Tensor, site_r: Tensor, keys: Tensor, sigma: Tensor,
                type_ll: Tensor | None) -> tuple[Tensor, Tensor]:
        """(N, S, k) site probabilities and (N, 1) "no site" probability of atoms with
        features ``h`` (N, H), their sites' distances ``dist`` (N, S, k) Å, positions relative
        to the sphere ``site_r`` (N, S, k), keys ``keys`` (N, S, k), noise ``sigma`` (N,) Å
        and species log-likelihood ``type_ll`` (N, S) or None."""
        return self.assign(h, self.prepare(dist, site_r, keys, sigma, type_ll))

    def prepare(self, dist: Tensor, site_r: Tensor, keys: Tensor, sigma: Tensor,
                type_ll: Tensor | None) -> SiteInputs:
        """The parts of :meth:`forward` that do not depend on the atom features ``h`` (computed
        once when several feature sets, e.g. the two passes of classifier-free guidance, are
        assigned to the same sites)."""
        S_full = dist.shape[1]
        used = max(1, int((dist < 1e3).any(-1).any(0).sum()))  # slots in use come first
        if used < S_full:
            dist, site_r, keys = dist[:, :used], site_r[:, :used], keys[:, :used]
            type_ll = None if type_ll is None else type_ll[:, :used]
        N, S_, K = dist.shape
        slot = torch.eye(S, device=dist.device)[:S_].view(1, S_, 1, S).expand(N, S_, K, S)
        feat = torch.cat([torch.exp(-0.5 * (dist / 0.5) ** 2).unsqueeze(-1),
                          (dist / 2.0).clamp(max=3.0).unsqueeze(-1), site_r.clamp(-3, 3).unsqueeze(-1), slot], -1)
        _, col = torch.unique(keys.reshape(-1), return_inverse=True)
        return SiteInputs(c_feat=self.c_lin(feat), noise_term=0.5 * (dist / sigma.view(-1, 1, 1)) ** 2,
                          outside_term=F.softplus(self.outside) * F.relu(2.0 * site_r), type_ll=type_ll,
                          invalid=dist >= 1e3, col=col, n_cols=int(col.max()) + 1 if col.numel() else 0,
                          pad=S_full - S_)

    def assign(self, h: Tensor, x: SiteInputs) -> tuple[Tensor, Tensor]:
        """:meth:`forward` on inputs from :meth:`prepare`."""
        N, S_, K, _ = x.c_feat.shape
        logits = self.out(F.silu(self.h_lin(h).view(N, 1, 1, -1) + x.c_feat)).squeeze(-1)
        logits = logits - x.noise_term - x.outside_term
        if x.type_ll is not None:
            logits = logits + x.type_ll.unsqueeze(-1)
        logits = logits.masked_fill(x.invalid, -1e9).reshape(N, S_ * K)
        null = self.null(h)
        for _ in range(self.iters if self.training else self.sample_iters):
            prob = torch.softmax(torch.cat([null, logits], -1), -1)[:, 1:]
            mass = torch.zeros(x.n_cols, device=h.device, dtype=h.dtype).index_add_(0, x.col, prob.reshape(-1))
            logits = logits - torch.log(mass[x.col].clamp(min=1.0)).view(N, -1)
        prob = torch.softmax(torch.cat([null, logits], -1), -1)
        sites = prob[:, 1:].view(N, S_, K)
        return (F.pad(sites, (0, 0, 0, x.pad)) if x.pad else sites), prob[:, :1]


@dataclass(frozen=True, eq=False)
class SiteInputs:
    """The atom-feature-independent inputs of :class:`SiteAssignment` (see its ``prepare``):
    ``c_feat`` (N, S', k, H) the site features' projection, ``noise_term`` / ``outside_term``
    (N, S', k) the Gaussian and sphere-prior logit terms, ``type_ll`` (N, S') or None,
    ``invalid`` (N, S', k) absent sites, ``col`` (N S' k,) site index of every candidate and
    ``n_cols`` their number, ``pad`` the unused slots cut off (S = S' + pad)."""

    c_feat: Tensor
    noise_term: Tensor
    outside_term: Tensor
    type_ll: Tensor | None
    invalid: Tensor
    col: Tensor
    n_cols: int
    pad: int


class Denoiser(nn.Module):
    """EGNN denoiser of every diffusion / flow family.

    Returns :class:`DenoiserOut`: the network's free prediction of the family's regression
    target (``free``, (N, 3): DDPM noise, score-matching noise or flow velocity) and, with
    ``site_features`` and ``exclusion_iters``, the lattice sites chosen by
    :class:`SiteAssignment` (probability-weighted site positions ``site_mix`` (N, 3) Å and the
    "no site" probability ``p_none`` (N, 1)). A family mixes the two into its target:
    target = sum_sites P target(site) + p_none free, with target(x0) its own affine map of the
    clean position (:func:`mix_target`), so the losses stay the families'.
    """

    def __init__(self, cfg: ModelConfig, type_dim: int, *, sphere_prior_per_angstrom: float = 10.0) -> None:
        super().__init__()
        H = cfg.hidden
        self.H = H
        self.t_mlp = MLP(H, H, H)
        self.type_in = nn.Linear(type_dim, H)
        self.sites = cfg.site_features
        self.site_k = max(1, cfg.site_k)
        self.exclusion = cfg.site_features and cfg.exclusion_iters > 0
        self.self_cond = cfg.self_cond
        SK = S * self.site_k
        extra = (3 * SK if self.sites else 0) + (3 if self.self_cond else 0) + 1
        edge_dim = (S if self.sites else 0) + (1 if self.self_cond else 0)
        n_vec = (SK if self.sites and not self.exclusion else 0) + (1 if self.self_cond else 0)
        self.egnn = EGNN(2 * H + N_FRAME_FEATURES + extra, H, cfg.layers, knn=cfg.knn,
                         edge_dim=edge_dim, n_vectors=n_vec, global_token=cfg.global_token)
        if self.exclusion:
            self.assign = SiteAssignment(H, cfg.exclusion_iters, outside_per_angstrom=sphere_prior_per_angstrom,
                                         sample_iters=cfg.sample_exclusion_iters)
        self.type_out = MLP(H + (S if self.exclusion else 0), H, S)

    def forward(self, pos: Tensor, xs: Tensor, sigma: Tensor, type_feat: Tensor, type_ll: Tensor | None,
                t: Tensor, batch: Tensor, cond: Tensor, c: ConditionBatch,
                x0_prev: Tensor | None = None) -> DenoiserOut:
        """``pos`` (N, 3) Å, the noisy positions at a bounded scale, builds the graph; ``xs``
        (N, 3) Å is the same state at the data's scale (x0 + sigma noise: the VE-equivalent
        coordinate) where lattice features mean something; ``sigma`` (B,) the noise level in
        Å at that scale; ``type_ll`` (N, S) the log-likelihood of each species slot given the
        noisy type (None: no information); ``x0_prev`` (N, 3) Å the previous clean-position
        estimate (self-conditioning; None = none)."""
        return self.run(self.prepare(pos, xs, sigma, type_feat, type_ll, t, batch, c, x0_prev), cond)

    def prepare(self, pos: Tensor, xs: Tensor, sigma: Tensor, type_feat: Tensor, type_ll: Tensor | None,
                t: Tensor, batch: Tensor, c: ConditionBatch, x0_prev: Tensor | None = None) -> DenoiserInputs:
        """Everything of :meth:`forward` that does not depend on the condition embedding
        ``cond`` (node and edge features, the graph, the lattice sites): computed once for the
        conditional and unconditional passes of classifier-free guidance."""
        return self.self_conditioned(self.features(pos, xs, sigma, type_feat, type_ll, t, batch, c), x0_prev)

    def features(self, pos: Tensor, xs: Tensor, sigma: Tensor, type_feat: Tensor, type_ll: Tensor | None,
                 t: Tensor, batch: Tensor, c: ConditionBatch) -> DenoiserFeatures:
        """The part of :meth:`prepare` that depends neither on ``cond`` nor on the
        self-conditioning estimate: computed once per training step for the estimate's pass
        and the main pass, which see the same state (:meth:`self_conditioned` adds the rest)."""
        temb = self.t_mlp(sinusoidal_embedding(t, self.H))[batch]
        R = c.radius[batch].unsqueeze(-1)
        sig = sigma[batch].unsqueeze(-1)
        ff = frame_features(pos, batch, c)
        ff = torch.cat([frame_features(xs, batch, c)[:, :12], ff[:, 12:]], -1)
        parts = [self.type_in(type_feat), ff, temb, torch.log(sig / R).clamp(-8, 5)]
        edges = knn_graph(pos, batch, self.egnn.knn, self.egnn.cutoff)
        edge_parts: list[Tensor] = []
        vec_parts: list[Tensor] = []
        sites: Tensor | None = None
        site_in: SiteInputs | None = None
        if self.sites:
            vec, dist, keys = lattice_site_vectors(xs, batch, c, self.site_k, with_keys=True)
            # where each candidate site lies with respect to the sphere: (|site| - R) / 2 Å
            site_r = ((xs.unsqueeze(1).unsqueeze(1) + vec).norm(dim=-1) - c.radius[batch].view(-1, 1, 1)) / 2.0
            parts += [torch.exp(-0.5 * (dist.flatten(1) / 0.5) ** 2), (dist.flatten(1) / 2.0).clamp(max=3.0),
                      site_r.flatten(1).clamp(-3.0, 3.0)]
            edge_parts.append(site_edge_features(xs.unsqueeze(1) + vec[:, :, 0], edges))
            if not self.exclusion:
                vec_parts.append(vec.flatten(1, 2) / R.unsqueeze(-1))
            else:
                sites = xs.unsqueeze(1).unsqueeze(1) + vec
                site_in = self.assign.prepare(dist, site_r, keys, sig.squeeze(-1), type_ll)
        return DenoiserFeatures(parts=tuple(parts), edge_parts=tuple(edge_parts), vec_parts=tuple(vec_parts),
                                pos=pos, xs=xs, R=R, batch=batch, c=c, edges=edges, sites=sites, site_in=site_in,
                                type_ll=type_ll)

    def self_conditioned(self, f: DenoiserFeatures, x0_prev: Tensor | None) -> DenoiserInputs:
        """The inputs of :meth:`run` from the state's :meth:`features` and the self-conditioning
        estimate ``x0_prev`` (N, 3) Å (None = none), as :meth:`prepare` builds them."""
        parts, edge_parts, vec_parts = list(f.parts), list(f.edge_parts), list(f.vec_parts)
        if self.self_cond:
            xs, R = f.xs, f.R
            have = x0_prev is not None
            x0p = x0_prev if x0_prev is not None else xs
            flag = torch.full_like(x0p[:, :1], float(have))
            parts.append(torch.cat([flag, ((x0p - xs).norm(dim=-1, keepdim=True) / 2.0).clamp(max=3.0),
                                    x0p.norm(dim=-1, keepdim=True) / R], -1))
            edge_parts.append(site_edge_features(x0p.unsqueeze(1), f.edges) * float(have))
            vec_parts.append(((x0p - xs) / R).unsqueeze(1))
        return DenoiserInputs(h_in=torch.cat(parts, -1), pos=f.pos, batch=f.batch, c=f.c, edges=f.edges,
                              edge_attr=torch.cat(edge_parts, -1) if edge_parts else None,
                              vectors=torch.cat(vec_parts, 1) if vec_parts else None,
                              sites=f.sites, site_in=f.site_in, type_ll=f.type_ll)

    def run(self, x: DenoiserInputs, cond: Tensor) -> DenoiserOut:
        """:meth:`forward` on inputs from :meth:`prepare` and the condition embedding ``cond`` (B, H)."""
        c = x.c
        h, free = self.egnn(x.h_in, x.pos, x.batch, cond[x.batch], c.lattice_rot, c.radius,
                            edges=x.edges, edge_attr=x.edge_attr, vectors=x.vectors)
        if x.site_in is None or x.sites is None:
            return DenoiserOut(free=free, site_mix=torch.zeros_like(free), p_none=torch.ones_like(free[:, :1]),
                               logits=self.type_out(h))
        prob, p_none = self.assign.assign(h, x.site_in)
        site_mix = torch.einsum("nsk,nskd->nd", prob, x.sites)
        # (N, S) species marginal of the assignment: an atom on a site has that site's species
        log_species = torch.log(prob.sum(-1) + p_none / S + 1e-6)
        logits = self.type_out(torch.cat([h, log_species], -1)) + log_species
        if x.type_ll is not None:
            logits = logits + x.type_ll
        return DenoiserOut(free=free, site_mix=site_mix, p_none=p_none, logits=logits)


@dataclass(frozen=True, eq=False)
class DenoiserFeatures:
    """What :meth:`Denoiser.features` computes of a state (positions, types, time), before the
    self-conditioning estimate: the node feature blocks ``parts`` (each (N, .)), edge feature
    blocks ``edge_parts`` ((E, .)) and equivariant vector blocks ``vec_parts`` ((N, ., 3)) in
    the order :meth:`Denoiser.self_conditioned` concatenates them, the graph positions ``pos``
    and data-scale positions ``xs`` (N, 3) Å, ``R`` (N, 1) Å, ``batch``, the conditions ``c``,
    ``edges`` (2, E) and the site head's ``sites``, ``site_in`` and ``type_ll`` (see
    :class:`DenoiserInputs`)."""

    parts: tuple[Tensor, ...]
    edge_parts: tuple[Tensor, ...]
    vec_parts: tuple[Tensor, ...]
    pos: Tensor
    xs: Tensor
    R: Tensor
    batch: Tensor
    c: ConditionBatch
    edges: Tensor
    sites: Tensor | None
    site_in: SiteInputs | None
    type_ll: Tensor | None


@dataclass(frozen=True, eq=False)
class DenoiserInputs:
    """The condition-independent inputs of :meth:`Denoiser.run` (from ``Denoiser.prepare``):
    node features ``h_in`` (N, D), graph positions ``pos`` (N, 3) Å, ``batch`` (N,), the
    conditions ``c``, ``edges`` (2, E) with ``edge_attr`` (E, F) or None, extra equivariant
    ``vectors`` (N, V, 3) or None, and with the exclusion head the candidate ``sites``
    (N, S, k, 3) Å, their :class:`SiteInputs` and the species log-likelihood ``type_ll``."""

    h_in: Tensor
    pos: Tensor
    batch: Tensor
    c: ConditionBatch
    edges: Tensor
    edge_attr: Tensor | None
    vectors: Tensor | None
    sites: Tensor | None
    site_in: SiteInputs | None
    type_ll: Tensor | None


@dataclass
class DenoiserOut:
    """Output of :class:`Denoiser` (see there): free (N, 3) target-unit prediction, site_mix
    (N, 3) Å, p_none (N, 1), logits (N, S) clean type logits."""

    free: Tensor
    site_mix: Tensor
    p_none: Tensor
    logits: Tensor


def mix_target(out: DenoiserOut, u: Tensor, R: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """A family's target t(x0) = a u + b x0 (x0 in units of R, ``a``/``b`` (N, 1)) mixed over the
    chosen sites and the free prediction; returns (target_hat, x0_hat in Å)."""
    target = (1 - out.p_none) * a * u + b * out.site_mix / R + out.p_none * out.free
    return target, (target - a * u) / b * R


# ---------------------------------------------------------------------------------------
class CDVAE(GeneratorBase):
    """Conditional CDVAE: latent from the cell encoder, count / composition heads, score
    network trained by denoising score matching, annealed Langevin decoding confined to the
    sphere (the finite-particle analogue of CDVAE wrapping coordinates into the cell)."""

    kl_weight = 1e-3
    sigmas: Tensor  # buffer registered in __init__ (declared for the type checker)

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

    def _features(self, u: Tensor, types: Tensor, sigma: Tensor, level_t: Tensor, batch: Tensor,
                  c: ConditionBatch) -> DenoiserFeatures:
        """The decoder's features of the noisy state (see :meth:`_predict`)."""
        R = c.radius[batch].unsqueeze(-1)
        return self.decoder.features(u * R, u * R, c.radius * sigma,
                                     self.slot_features(F.one_hot(types, S).float(), batch, c), None, level_t, batch, c)

    def _predict(self, u: Tensor, types: Tensor, sigma: Tensor, level_t: Tensor, batch: Tensor, zc: Tensor,
                 c: ConditionBatch, x0_prev: Tensor | None,
                 feats: DenoiserFeatures | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """(eps_hat (N,3), type logits (N,S), x0_hat (N,3) Å) at noisy unit-ball positions ``u``
        with per-sample noise levels ``sigma`` (B,) (units of R); ``feats`` the state's
        :meth:`_features` when already computed."""
        R = c.radius[batch].unsqueeze(-1)
        feats = self._features(u, types, sigma, level_t, batch, c) if feats is None else feats
        out = self.decoder.run(self.decoder.self_conditioned(feats, x0_prev), zc)
        inv = 1.0 / sigma[batch].unsqueeze(-1)
        eps_hat, x0 = mix_target(out, u, R, inv, -inv)  # eps = (u - x0) / sigma
        return eps_hat, out.logits, x0

    def loss(self, conds, particles, g):
        c, p = _collate(conds, particles, self.device)
        zc, kl = self.latent(c, g)
        count_loss = self.count_head.loss(c, zc, p.counts)
        comp_true = composition_fractions(p, c)
        comp_logits = self.comp_head(zc).masked_fill(~c.slot_mask, -1e9)
        comp_loss = -(comp_true * F.log_softmax(comp_logits, -1)).sum(-1).mean()
        level = torch.randint(0, len(self.sigmas), (c.size,), generator=g, device=g.device)
        sigma = self.sigmas[level]
        u0 = p.pos / c.radius[p.batch].unsqueeze(-1)
        eps = randn(tuple(u0.shape), g)
        u_noisy = u0 + sigma[p.batch].unsqueeze(-1) * eps
        # type corruption proportional to the noise level, drawn from the true composition
        flip = rand((len(p.types),), g) < (sigma / self.sigmas[0])[p.batch]
        rand_types = torch.multinomial(comp_true[p.batch] + 1e-12, 1, generator=g).squeeze(-1)
        noisy_types = torch.where(flip, rand_types, p.types)
        t = level.float() / max(len(self.sigmas) - 1, 1)
        feats = self._features(u_noisy, noisy_types, sigma, t, p.batch, c)  # one state, both passes
        x0_prev = None
        if self.cfg.self_cond and float(rand((1,), g)) < 0.5:
            with torch.no_grad():
                x0_prev = self._predict(u_noisy, noisy_types, sigma, t, p.batch, zc, c, None, feats)[2]
        eps_hat, type_logits, _ = self._predict(u_noisy, noisy_types, sigma, t, p.batch, zc, c, x0_prev, feats)
        pos_loss = F.mse_loss(eps_hat, eps)
        type_loss = F.cross_entropy(_masked_logits(type_logits, p.batch, c), p.types)
        loss = pos_loss + type_loss + comp_loss + count_loss + self.kl_weight * kl
        return loss, {"pos": pos_loss.item(), "type": type_loss.item(), "comp": comp_loss.item(),
                      "count": count_loss.item(), "kl": kl.item()}

    @torch.no_grad()
    def sample(self, conds, g, steps=None):
        c = collate_conditions(conds).to(self.device)
        zc, _ = self.latent(c, g)
        counts = self.count_head.sample(c, zc)
        batch = _batch_index(counts)
        comp = F.softmax(self.comp_head(zc).masked_fill(~c.slot_mask, -1e9), -1)
        types = torch.multinomial(comp[batch], 1, generator=g).squeeze(-1)
        u = uniform_ball(len(batch), g)
        L = len(self.sigmas)
        per_level = max(1, (steps or self.cfg.sample_steps) // L)
        eps_hat = torch.zeros_like(u)
        x0 = None
        for i, sigma in enumerate(self.sigmas):
            alpha = self.cfg.langevin_step * sigma ** 2
            t = torch.full((c.size,), i / max(L - 1, 1), device=self.device)
            sig = sigma.expand(c.size)
            for _ in range(per_level):
                eps_hat, logits, x0p = self._predict(u, types, sig, t, batch, zc, c, x0)
                x0 = x0p if self.cfg.self_cond else None
                score = -eps_hat / sigma
                u = u + alpha * score + torch.sqrt(2 * alpha) * randn(tuple(u.shape), g)
                u = confine_to_ball(u, self.cfg.confine_margin)
                types = _masked_logits(logits, batch, c).argmax(-1)
        u = u - self.sigmas[-1] * eps_hat  # final Tweedie denoising at the smallest level
        return _to_particles(confine_to_ball(u, self.cfg.confine_margin), types, counts, c)


def confine_to_ball(u: Tensor, margin: float) -> Tensor:
    """Reflect unit-ball positions (N, 3) with |u| > 1 + margin back inside the sphere of radius
    1 + margin (a point at distance r beyond the surface lands r inside it; never past the centre)."""
    if margin < 0:
        return u
    lim = 1.0 + margin
    r = u.norm(dim=-1, keepdim=True)
    r_new = torch.where(r > lim, (2 * lim - r).clamp(min=0.0), r)
    return u * (r_new / r.clamp(min=1e-12))


# ---------------------------------------------------------------------------------------
class DiffCSP(GeneratorBase):
    """Joint DDPM over positions (unit ball) and continuous one-hot types; predictor-corrector
    sampling (Langevin corrector on positions, as DiffCSP's sampler); optional self-conditioning."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.denoiser = Denoiser(cfg, 2 * S + cfg.hidden)

    def _type_feat(self, a: Tensor, batch: Tensor, c: ConditionBatch) -> Tensor:
        """Noisy one-hot ``a`` (N, S) -> features: a, its masked softmax, and the softmax-weighted
        species embedding."""
        probs = F.softmax(_masked_logits(2.0 * a, batch, c), -1)
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
        a0_hat = 2 * F.softmax(_masked_logits(logits, batch, c), -1) - 1
        eps_a_hat = (a - torch.sqrt(abn) * a0_hat) / torch.sqrt(1 - abn)
        return eps_hat, eps_a_hat, x0

    def loss(self, conds, particles, g):
        c, p = _collate(conds, particles, self.device)
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
        return _combined_loss(pos_loss, type_loss, count_loss)

    @torch.no_grad()
    def sample(self, conds, g, steps=None):
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
        types = _masked_logits(a0, batch, c).argmax(-1)
        return _to_particles(u, types, counts, c)


# ---------------------------------------------------------------------------------------
class _MaskedTypeGenerator(GeneratorBase):
    """Shared parts of the generators with a masked (absorbing-state) flow over types."""

    sphere_prior_per_angstrom = 10.0  # init sharpness of the denoiser's sphere prior (1/Å)

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.mask_emb = nn.Parameter(torch.zeros(cfg.hidden))
        self.denoiser = Denoiser(cfg, cfg.hidden, sphere_prior_per_angstrom=self.sphere_prior_per_angstrom)

    def _type_feat(self, types: Tensor, masked: Tensor, batch: Tensor, c: ConditionBatch) -> Tensor:
        feat = self.slot_features(F.one_hot(types.clamp(min=0), S).float(), batch, c)
        return torch.where(masked.unsqueeze(-1), self.mask_emb.expand_as(feat), feat)


class FlowMM(_MaskedTypeGenerator):
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
        c, p = _collate(conds, particles, self.device)
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
        ce = F.cross_entropy(_masked_logits(logits, p.batch, c), p.types, reduction="none")
        type_loss = (ce * masked).sum() / masked.sum().clamp(min=1)
        return _combined_loss(pos_loss, type_loss, count_loss)

    @torch.no_grad()
    def sample(self, conds, g, steps=None):
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
            probs = F.softmax(_masked_logits(logits, batch, c), -1)
            draw = torch.multinomial(probs, 1, generator=g).squeeze(-1)
            reveal = masked & (rand((len(batch),), g) < dt / (1 - t))
            types = torch.where(reveal, draw, types)
            masked = masked & ~reveal
        return _to_particles(u, types, counts, c)


# ---------------------------------------------------------------------------------------
class MatterGen(_MaskedTypeGenerator):
    """DDPM over positions + absorbing-state discrete diffusion over types, CFG on R;
    predictor-corrector sampling (Langevin corrector on positions, MatterGen's sampler);
    optional self-conditioning. A composition head predicts the species fractions of the
    particle from the condition; the sampler reveals types (most confident first) within that
    per-element budget, and the absorbing schedule masks every type for t >= ``type_mask_until``."""

    # the absorbing schedule: a type is masked with probability min(1, t / type_mask_until)
    type_mask_until = 0.2
    # init sharpness of the sphere prior (1/Å, still learned): a site 1 mÅ outside R loses 3 nats
    # (docs/models.md, "The overfit gate": the default 10/Å cannot resolve the gate particle's
    # 3.3 mÅ boundary margin)
    sphere_prior_per_angstrom = 3000.0

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        # composition head (species-slot fractions from the condition), as CDVAE's: the sampler
        # reveals types without replacement from the predicted per-element budget
        self.comp_head = MLP(cfg.hidden, cfg.hidden, S)

    def _features(self, u: Tensor, types: Tensor, masked: Tensor, t: Tensor, batch: Tensor,
                  c: ConditionBatch) -> DenoiserFeatures:
        """The denoiser's features of the state (u, types with ``masked`` absorbed) at times t (B,)."""
        return vp_features(self.denoiser, u, self._type_feat(types, masked, batch, c), revealed_type_ll(types, masked),
                           t, batch, c)

    def _predict(self, u: Tensor, types: Tensor, masked: Tensor, t: Tensor, batch: Tensor, cond: Tensor,
                 c: ConditionBatch, x0_prev: Tensor | None,
                 feats: DenoiserFeatures | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """(eps_hat, type logits, x0_hat Å) at the state; ``feats`` its :meth:`_features` when
        already computed."""
        feats = self._features(u, types, masked, t, batch, c) if feats is None else feats
        return vp_run(self.denoiser, u, feats, t, batch, (cond,), c, x0_prev)[0]

    def _guided(self, u: Tensor, types: Tensor, masked: Tensor, t: Tensor, batch: Tensor, cond: Tensor,
                uncond: Tensor, c: ConditionBatch, x0_prev: Tensor | None, w: float
                ) -> tuple[Tensor, Tensor, Tensor]:
        """Classifier-free guided (eps, logits, x0): (1 + w) conditional - w unconditional."""
        if w == 0:
            return self._predict(u, types, masked, t, batch, cond, c, x0_prev)
        # one state, two condition embeddings: the state's features are computed once
        (e_c, l_c, x_c), (e_u, l_u, x_u) = vp_run(self.denoiser, u, self._features(u, types, masked, t, batch, c),
                                                  t, batch, (cond, uncond), c, x0_prev)
        return (1 + w) * e_c - w * e_u, (1 + w) * l_c - w * l_u, (1 + w) * x_c - w * x_u

    def loss(self, conds, particles, g):
        c, p = _collate(conds, particles, self.device)
        drop = rand((c.size,), g) < self.cfg.cfg_drop
        cond = self.conditioner(c, drop_r=drop)
        full = self.conditioner(c)
        count_loss = self.count_head.loss(c, full, p.counts)
        comp_logits = self.comp_head(full).masked_fill(~c.slot_mask, -1e9)
        comp_loss = -(composition_fractions(p, c) * F.log_softmax(comp_logits, -1)).sum(-1).mean()
        t = rand((c.size,), g) * (1 - 1e-3) + 1e-3
        ab = alpha_bar(t)[p.batch].unsqueeze(-1)
        u0 = p.pos / c.radius[p.batch].unsqueeze(-1)
        eps = randn(tuple(u0.shape), g)
        ut = torch.sqrt(ab) * u0 + torch.sqrt(1 - ab) * eps
        masked = rand((len(p.types),), g) < (t[p.batch] / self.type_mask_until).clamp(max=1.0)
        feats = self._features(ut, p.types, masked, t, p.batch, c)  # one state, both passes
        x0_prev = None
        if self.cfg.self_cond and float(rand((1,), g)) < 0.5:
            with torch.no_grad():
                x0_prev = self._predict(ut, p.types, masked, t, p.batch, cond, c, None, feats)[2]
        eps_hat, logits, _ = self._predict(ut, p.types, masked, t, p.batch, cond, c, x0_prev, feats)
        pos_loss = F.mse_loss(eps_hat, eps)
        ce = F.cross_entropy(_masked_logits(logits, p.batch, c), p.types, reduction="none")
        type_loss = (ce * masked).sum() / masked.sum().clamp(min=1)
        loss, logs = _combined_loss(pos_loss, type_loss, count_loss)
        return loss + comp_loss, {**logs, "comp": comp_loss.item()}

    @torch.no_grad()
    def sample(self, conds, g, steps=None, guidance: float | None = None):
        w = self.cfg.cfg_weight if guidance is None else guidance
        c, cond, counts, batch = self._sample_setup(conds)
        dev = self.device
        if self.cfg.sample_count_margin > 0:  # over-complete: the site assignment decides the count
            counts = torch.ceil(counts * (1.0 + self.cfg.sample_count_margin)).long()
            batch = _batch_index(counts)
        uncond = self.conditioner(c, drop_r=torch.ones(c.size, dtype=torch.bool, device=dev))
        budget = composition_budget(F.softmax(self.comp_head(cond).masked_fill(~c.slot_mask, -1e9), -1), counts)
        u = randn((len(batch), 3), g)
        types = torch.zeros(len(batch), dtype=torch.long, device=dev)
        masked = torch.ones(len(batch), dtype=torch.bool, device=dev)
        ts = sample_times(steps or self.cfg.sample_steps, g, power=self.cfg.sample_time_power,
                          eps_t=self.cfg.sample_eps_t)
        x0 = None
        for i in range(len(ts) - 1):
            t, s = ts[i], ts[i + 1]
            ab_t, ab_s = alpha_bar(t), alpha_bar(s)
            tt = t.expand(c.size)
            for _ in range(self.cfg.corrector_steps):
                e, _, xc = self._guided(u, types, masked, tt, batch, cond, uncond, c, x0, w)
                u = langevin_correct(u, e, 1 - ab_t, g, step=self.cfg.corrector_step)
                x0 = xc if self.cfg.self_cond else None
            e, logits, xp = self._guided(u, types, masked, tt, batch, cond, uncond, c, x0, w)
            x0 = xp if self.cfg.self_cond else None
            u, _ = ddpm_posterior_step(u, e, ab_t, ab_s, g, clip=1.5)
            probs = F.softmax(_masked_logits(logits, batch, c), -1)
            tf, sf = float(t), float(s)
            # as many reveals per sample as the schedule draws, most confident atoms first
            mt, ms = min(1.0, tf / self.type_mask_until), min(1.0, sf / self.type_mask_until)
            reveal = masked & (rand((len(batch),), g) < (mt - ms) / max(mt, 1e-12))
            n_rev = torch.zeros(c.size, dtype=torch.long, device=dev).index_add_(0, batch, reveal.long())
            reveal, drawn = reveal_confident(probs, masked, n_rev, batch, budget, g)
            types = torch.where(reveal, drawn, types)
            masked = masked & ~reveal
        if self.cfg.sample_site_tol_angstrom > 0:
            u, types, counts = keep_sited(u, types, counts, c, tol_angstrom=self.cfg.sample_site_tol_angstrom,
                                          retype=True)
        return _to_particles(u, types, counts, c)


# ---------------------------------------------------------------------------------------
class ADiT(GeneratorBase):
    """All-atom latent diffusion in two stages (as ADiT): a per-atom VAE (transformer encoder /
    decoder) trained first, then frozen; a latent flow-matching diffusion transformer (DiT,
    adaLN-Zero) over the set of normalised latents, with self-conditioning and classifier-free
    guidance on R. The stage follows the number of training steps taken (a buffer, so a
    resumed run continues in the right stage): the first ``ae_fraction`` of the config's
    epochs x steps_per_epoch train the autoencoder."""

    kl_weight = 1e-3
    # times t of the flow at which the latent Langevin corrector runs (cfg.corrector_steps per
    # Euler step, step cfg.corrector_step): where tokens choose their clean latents (docs/models.md)
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
               c: ConditionBatch) -> tuple[Tensor, Tensor]:
        """Latents (N, L) -> unit-ball positions (N, 3) and type logits (N, S)."""
        xp, mask = to_padded(self.dec_in(z), batch, counts)
        h = from_padded(self._run(self.dec, xp, cond, mask), mask)
        out = self.dec_out(h)
        u, logits = out[:, :3], out[:, 3:]
        if self.snap is None:
            return u, logits
        R = c.radius[batch].unsqueeze(-1)
        vec, dist, keys = lattice_site_vectors(u * R, batch, c, max(1, self.cfg.site_k), with_keys=True)
        site_r = ((u * R).unsqueeze(1).unsqueeze(1) + vec).norm(dim=-1) - c.radius[batch].view(-1, 1, 1)
        site_r = site_r / 2.0
        hs = self.snap_in(torch.cat([h, torch.exp(-0.5 * (dist.flatten(1) / 0.5) ** 2),
                                     (dist.flatten(1) / 2.0).clamp(max=3.0), site_r.flatten(1).clamp(-3, 3)], -1))
        sigma = F.softplus(self.snap_sigma).expand(len(u))
        type_ll = F.log_softmax(_masked_logits(logits, batch, c), -1)
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
        c, p = _collate(conds, particles, self.device)
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
            type_loss = F.cross_entropy(_masked_logits(logits, p.batch, c), p.types)
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

    @torch.no_grad()
    def sample(self, conds, g, steps=None):
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
        u_hat, logits = self.decode(mu, batch, counts, ae_cond, c)
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
        c = collate_conditions(conds).to(self.device)
        cands = [self.candidates(k) for k in conds]
        p = collate_particles(cands, conds).to(self.device)
        # R enters only through the per-site features |x|/R and |x| - R, never as an embedding
        # of its value, so the decision rule carries over to radii outside the training range.
        cond = self.conditioner(c, drop_r=torch.ones(c.size, dtype=torch.bool, device=self.device))
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
        y = torch.as_tensor(np.concatenate(labels), dtype=torch.float32, device=self.device)
        loss = F.binary_cross_entropy_with_logits(logits, y)
        acc = ((logits > 0).float() == y).float().mean()
        return loss, {"bce": loss.item(), "site_acc": acc.item()}

    @torch.no_grad()
    def sample(self, conds, g, steps=None):
        logits, cands = self.logits(conds)
        out, start = [], 0
        for cand in cands:
            keep = (logits[start:start + cand.n_atoms] > 0).cpu().numpy()
            out.append(Particle(cand.numbers[keep], cand.positions_angstrom[keep]))
            start += cand.n_atoms
        return out


GENERATORS: dict[str, type[GeneratorBase]] = {
    "cdvae": CDVAE, "diffcsp": DiffCSP, "flowmm": FlowMM, "mattergen": MatterGen, "adit": ADiT,
    "sitescore": SiteScorer,
}
