"""Lattice sites of the condition's crystal: the site-assignment head (with its sphere penalty)
and the sampler's site filter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from c2np.models.backbone import MLP, ConditionBatch, lattice_site_vectors
from c2np.models.data import MAX_SPECIES_SLOTS
from c2np.models.forward.ablation import SHIPPED
from c2np.models.forward.base import batch_index

__all__ = ["SiteAssignment", "SiteInputs", "keep_sited", "inverse_softplus"]

S = MAX_SPECIES_SLOTS


def inverse_softplus(y: float) -> float:
    """x with softplus(x) = y (> 0), stable for large y."""
    return float(y + math.log(-math.expm1(-y)))


class SiteAssignment(nn.Module):
    """Soft assignment of atoms to candidate lattice sites with exclusion.

    Each atom scores its k nearest sites of every species slot, plus a "no site" option:
    logit = -|d|^2 / (2 sigma^2) (the Gaussian likelihood of the noise at level sigma, Å)
    - softplus(w) (|site| - R)_+ (the sphere penalty: w learned from an init of
    ``outside_per_angstrom`` per Å) + the species log-likelihood of the atom's noisy type (when
    the family has one) + a learned term from the atom's features and the site's distance and
    position relative to the sphere. ``ablation`` (:class:`~c2np.models.forward.ablation.Ablation`,
    set for one sampling run by ``ablated``) can drop the sphere penalty or the learned term.
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
        # which analytic priors the scores keep (set for a sampling run by ``ablated``)
        self.ablation = SHIPPED

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
        outside = (F.softplus(self.outside) * F.relu(2.0 * site_r) if self.ablation.sphere_penalty
                   else torch.zeros_like(site_r))
        return SiteInputs(c_feat=self.c_lin(feat), noise_term=0.5 * (dist / sigma.view(-1, 1, 1)) ** 2,
                          outside_term=outside, type_ll=type_ll,
                          invalid=dist >= 1e3, col=col, n_cols=int(col.max()) + 1 if col.numel() else 0,
                          pad=S_full - S_)

    def assign(self, h: Tensor, x: SiteInputs) -> tuple[Tensor, Tensor]:
        """:meth:`forward` on inputs from :meth:`prepare`."""
        N, S_, K, _ = x.c_feat.shape
        if self.ablation.learned_correction:
            logits = self.out(F.silu(self.h_lin(h).view(N, 1, 1, -1) + x.c_feat)).squeeze(-1)
            logits = logits - x.noise_term - x.outside_term
        else:  # the analytic terms alone
            logits = -x.noise_term - x.outside_term
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


def keep_sited(u: Tensor, types: Tensor, counts: Tensor, c: ConditionBatch, *,
               tol_angstrom: float, retype: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """Unit-ball positions ``u`` (N, 3), slot types (N,) and per-sample counts (B,) reduced to
    the atoms that sit on a lattice site of their own species (nearest such site of the
    condition's infinite lattice within ``tol_angstrom``), one atom per site (the nearest
    one): an atom with no site, or the second atom on a taken site, is dropped. With
    ``retype`` an atom takes the species of its nearest site of any species instead (the
    type read from the site, as DiffCSP's types here). Returns the kept (u, types, counts)."""
    batch = batch_index(counts)
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
