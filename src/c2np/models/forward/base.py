"""The base class of the task-1 families (conditioner, count head, slot embeddings) and the
batching helpers they share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from torch import Tensor, nn

from c2np.models.backbone import (
    N_Z,
    ConditionBatch,
    Conditioner,
    CountHead,
    ParticleBatch,
    collate_conditions,
    collate_particles,
)
from c2np.models.config import ModelConfig
from c2np.models.data import MAX_SPECIES_SLOTS, Condition
from c2np.models.forward.ablation import SHIPPED, Ablation, ablated
from c2np.particle import Particle

__all__ = ["GeneratorBase", "masked_logits", "to_particles", "batch_index", "combined_loss", "collate"]

S = MAX_SPECIES_SLOTS


def masked_logits(logits: Tensor, batch: Tensor, c: ConditionBatch) -> Tensor:
    return logits.masked_fill(~c.slot_mask[batch], -1e9)


def to_particles(u: Tensor, types: Tensor, counts: Tensor, c: ConditionBatch) -> list[Particle]:
    """Unit-ball positions and slot types -> particles in Å."""
    out = []
    start = 0
    for b, n in enumerate(counts.tolist()):
        pos = (u[start:start + n] * c.radius[b]).double().cpu().numpy()
        z = c.slots_z[b, types[start:start + n]].cpu().numpy()
        out.append(Particle(z, pos))
        start += n
    return out


def batch_index(counts: Tensor) -> Tensor:
    """(sum(counts),) sample index of every atom of per-sample ``counts`` (B,)."""
    return torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts)


def combined_loss(pos_loss: Tensor, type_loss: Tensor, count_loss: Tensor) -> tuple[Tensor, dict[str, float]]:
    """Sum of the position, type and count losses, with the parts for the training log."""
    return pos_loss + type_loss + count_loss, {"pos": pos_loss.item(), "type": type_loss.item(),
                                               "count": count_loss.item()}


def collate(conds: Sequence[Condition], particles: Sequence[Particle],
            device: torch.device) -> tuple[ConditionBatch, ParticleBatch]:
    """Collated conditions and target particles on ``device``."""
    return collate_conditions(conds).to(device), collate_particles(particles, conds).to(device)


class GeneratorBase(nn.Module):
    """Shared parts: conditioner (cell encoder + R + rotation), count head, slot embeddings.

    A family implements ``loss(conds, particles, g) -> (loss, logs)`` (the training objective;
    ``particles`` are the targets, used only as the data being noised / reconstructed) and
    ``_sample(conds, g, steps, ablation) -> list[Particle]``; :meth:`sample` runs it without
    gradients under an :class:`~c2np.models.forward.ablation.Ablation` of its priors."""

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
        return c, cond, counts, batch_index(counts)

    def loss(self, conds: Sequence[Condition], particles: Sequence[Particle],
             g: torch.Generator) -> tuple[Tensor, dict[str, float]]:
        raise NotImplementedError

    def sample(self, conds: Sequence[Condition], g: torch.Generator, steps: int | None = None, *,
               ablation: Ablation = SHIPPED) -> list[Particle]:
        """Particles for ``conds`` (cell, R, rotation only) drawn with generator ``g`` in
        ``steps`` sampler steps (None: the config's), keeping the priors ``ablation`` keeps
        (default: as shipped)."""
        with torch.no_grad(), ablated(self, ablation):
            return self._sample(conds, g, steps, ablation)

    def _sample(self, conds: Sequence[Condition], g: torch.Generator, steps: int | None,
                ablation: Ablation) -> list[Particle]:
        raise NotImplementedError
