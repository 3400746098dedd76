"""Shared parts of the families with a masked (absorbing-state) process over types."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from c2np.models.backbone import ConditionBatch
from c2np.models.config import ModelConfig
from c2np.models.data import MAX_SPECIES_SLOTS
from c2np.models.forward.base import GeneratorBase
from c2np.models.forward.denoiser import Denoiser

__all__ = ["MaskedTypeGenerator"]

S = MAX_SPECIES_SLOTS


class MaskedTypeGenerator(GeneratorBase):
    """Shared parts of the generators with a masked (absorbing-state) flow over types."""

    sphere_prior_per_angstrom = 10.0  # init sharpness of the denoiser's sphere prior (1/Å)

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.mask_emb = nn.Parameter(torch.zeros(cfg.hidden))
        self.denoiser = Denoiser(cfg, cfg.hidden, sphere_prior_per_angstrom=self.sphere_prior_per_angstrom)

    def _type_feat(self, types: Tensor, masked: Tensor, batch: Tensor, c: ConditionBatch) -> Tensor:
        feat = self.slot_features(F.one_hot(types.clamp(min=0), S).float(), batch, c)
        return torch.where(masked.unsqueeze(-1), self.mask_emb.expand_as(feat), feat)

