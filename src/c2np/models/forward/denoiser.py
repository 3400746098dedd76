"""The EGNN denoiser of every diffusion / flow family, with the site-assignment head, and its
VP (DDPM) evaluation helpers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from c2np.models.backbone import (
    EGNN,
    MLP,
    N_FRAME_FEATURES,
    ConditionBatch,
    frame_features,
    knn_graph,
    lattice_site_vectors,
    sinusoidal_embedding,
    site_edge_features,
)
from c2np.models.config import ModelConfig
from c2np.models.data import MAX_SPECIES_SLOTS
from c2np.models.forward.noise import alpha_bar
from c2np.models.forward.sites import SiteAssignment, SiteInputs

__all__ = ["Denoiser", "DenoiserFeatures", "DenoiserInputs", "DenoiserOut", "mix_target",
           "vp_denoise", "vp_denoise_each", "vp_features", "vp_run", "DATA_STD_UNIT"]

S = MAX_SPECIES_SLOTS


DATA_STD_UNIT = math.sqrt(0.2)  # per-coordinate standard deviation of a uniform unit ball


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
