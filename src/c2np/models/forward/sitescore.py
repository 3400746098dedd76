"""The task-1 site scorer: carved candidate sites, each scored inside / outside the particle."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from scipy.spatial import cKDTree
from torch import Tensor

from c2np.carving import carve
from c2np.models.backbone import (
    EGNN,
    MLP,
    N_FRAME_FEATURES,
    collate_conditions,
    collate_particles,
    frame_features,
)
from c2np.models.config import ModelConfig
from c2np.models.data import Condition
from c2np.models.forward.base import GeneratorBase
from c2np.particle import Particle

__all__ = ["SiteScorer"]


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

    def _sample(self, conds, g, steps, ablation):
        logits, cands = self.logits(conds)
        out, start = [], 0
        for cand in cands:
            keep = (logits[start:start + cand.n_atoms] > 0).cpu().numpy()
            out.append(Particle(cand.numbers[keep], cand.positions_angstrom[keep]))
            start += cand.n_atoms
        return out

