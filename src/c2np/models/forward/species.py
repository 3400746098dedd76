"""Species-slot helpers of the task-1 families: composition labels and budgets, and the
reveals of absorbing-state types.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from c2np.models.backbone import ConditionBatch, ParticleBatch
from c2np.models.data import MAX_SPECIES_SLOTS

__all__ = ["revealed_type_ll", "composition_fractions", "composition_budget", "reveal_confident"]

S = MAX_SPECIES_SLOTS


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

