"""Task-2 predictors: particle -> (a, b, c, alpha, beta, gamma) of the standardized
conventional cell + space group (1..230).

Each family's encoder runs on the particle (centred at its centroid, cropped to the
``max_atoms`` atoms nearest the centroid — the same crop at training and prediction, which
keeps the cost bounded at R = 30 Å while the lattice stays visible), followed by a lattice
head (regression of the six parameters normalised by the training mean / std) and a
space-group head (230-way classification):

* ``cdvae``: invariant message passing (EGNN without coordinate updates; CDVAE's encoder is
  the invariant DimeNet++).
* ``diffcsp`` / ``flowmm``: EGNN with equivariant coordinate updates (CSPNet-like).
* ``mattergen``: a deeper EGNN with more neighbours (GemNet-like capacity).
* ``adit``: a transformer over atoms with invariant tokens (species, distance to the
  centroid, sorted distances to the nearest neighbours).
* ``sitescore``: the scale-robust model: a normalised pair-distance histogram (0-10 Å)
  per species pair class + composition, then an MLP; its input does not depend on R except
  through surface effects.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from scipy.spatial import cKDTree
from torch import Tensor, nn

from c2np.particle import Particle
from c2np.models.backbone import (EGNN, MLP, N_Z, AdaLNBlock, collate_particles, gaussian_rbf,
                                  scatter_mean, to_padded)
from c2np.models.config import ModelConfig

__all__ = ["InversePredictor", "crop_particle", "ENCODER_KIND"]

ENCODER_KIND = {"cdvae": "invariant", "diffcsp": "egnn", "flowmm": "egnn", "mattergen": "deep",
                "adit": "transformer", "sitescore": "rdf"}
N_SG = 230
RDF_BINS = 64
RDF_MAX_ANGSTROM = 10.0
N_KNN_FEATS = 8


def crop_particle(particle: Particle, max_atoms: int | None) -> Particle:
    """Centre at the centroid and keep the ``max_atoms`` atoms nearest to it (all when None)."""
    pos = particle.positions_angstrom - particle.positions_angstrom.mean(axis=0)
    if max_atoms is not None and particle.n_atoms > max_atoms:
        keep = np.argsort(np.linalg.norm(pos, axis=1), kind="stable")[:max_atoms]
        return Particle(particle.numbers[keep], pos[keep])
    return Particle(particle.numbers, pos)


def _rdf_features(p: Particle) -> np.ndarray:
    """(3 * RDF_BINS,) pair-distance histograms (all pairs, same-species, different-species),
    each normalised to unit sum."""
    out = np.zeros((3, RDF_BINS))
    if p.n_atoms > 1:
        pairs = cKDTree(p.positions_angstrom).query_pairs(RDF_MAX_ANGSTROM, output_type="ndarray")
        if len(pairs):
            d = np.linalg.norm(p.positions_angstrom[pairs[:, 0]] - p.positions_angstrom[pairs[:, 1]], axis=1)
            same = p.numbers[pairs[:, 0]] == p.numbers[pairs[:, 1]]
            for k, sel in enumerate([np.ones_like(same), same, ~same]):
                h, _ = np.histogram(d[sel], bins=RDF_BINS, range=(0, RDF_MAX_ANGSTROM))
                out[k] = h / max(h.sum(), 1)
    return out.reshape(-1) * RDF_BINS / 4.0


def _knn_distances(p: Particle) -> np.ndarray:
    """(n, N_KNN_FEATS) sorted distances (Å) to the nearest neighbours (padded with 10 Å)."""
    k = min(N_KNN_FEATS + 1, p.n_atoms)
    d, _ = cKDTree(p.positions_angstrom).query(p.positions_angstrom, k=k)
    d = np.asarray(d).reshape(p.n_atoms, k)[:, 1:]
    return np.pad(d, ((0, 0), (0, N_KNN_FEATS - d.shape[1])), constant_values=10.0)


class InversePredictor(nn.Module):
    """A family's particle encoder + lattice head + space-group head.

    The buffers ``lat_mean``/``lat_std`` (6,) normalise the targets (set from the training
    materials before training, saved in the checkpoint).
    """

    task = "inverse"

    def __init__(self, family: str, cfg: ModelConfig) -> None:
        super().__init__()
        self.family, self.cfg = family, cfg
        self.kind = ENCODER_KIND[family]
        H = cfg.hidden
        self.z_emb = nn.Embedding(N_Z, H)
        if self.kind in ("invariant", "egnn", "deep"):
            layers = cfg.layers + (2 if self.kind == "deep" else 0)
            knn = cfg.knn + (4 if self.kind == "deep" else 0)
            self.encoder = EGNN(H, H, layers, knn=knn, cutoff_angstrom=cfg.cutoff_angstrom,
                                update_coords=self.kind != "invariant")
            self.null_cond = nn.Parameter(torch.zeros(H), requires_grad=False)
            pooled = 2 * H
        elif self.kind == "transformer":
            self.tok = nn.Linear(H + 16 + N_KNN_FEATS, H)
            self.blocks = nn.ModuleList([AdaLNBlock(H, cfg.heads) for _ in range(cfg.layers)])
            pooled = 2 * H
        else:
            self.rdf = MLP(3 * RDF_BINS, 2 * H, H, n_layers=3)
            pooled = 2 * H
        self.lattice_head = MLP(pooled, H, 6)
        self.sg_head = MLP(pooled, H, N_SG)
        self.register_buffer("lat_mean", torch.tensor([4.0, 4.0, 4.0, 90.0, 90.0, 90.0]))
        self.register_buffer("lat_std", torch.ones(6))

    def set_normalisation(self, targets: np.ndarray) -> None:
        """Set lat_mean / lat_std from (n, 6) training targets (std floored at 0.05)."""
        t = np.asarray(targets, dtype=np.float64).reshape(-1, 6)
        self.lat_mean.copy_(torch.as_tensor(t.mean(0), dtype=torch.float32))
        self.lat_std.copy_(torch.as_tensor(np.maximum(t.std(0), 0.05), dtype=torch.float32))

    def embed(self, particles: Sequence[Particle]) -> Tensor:
        """(B, pooled) invariant embedding of the (cropped) particles."""
        parts = [crop_particle(p, self.cfg.max_atoms) for p in particles]
        pb = collate_particles(parts)
        B = pb.size
        if self.kind == "rdf":
            rdf = torch.as_tensor(np.stack([_rdf_features(p) for p in parts]), dtype=torch.float32)
            comp = scatter_mean(self.z_emb(pb.z), pb.batch, B)
            return torch.cat([self.rdf(rdf), comp], -1)
        if self.kind == "transformer":
            knn = torch.as_tensor(np.concatenate([_knn_distances(p) for p in parts]), dtype=torch.float32)
            r = pb.pos.norm(dim=-1)
            x = self.tok(torch.cat([self.z_emb(pb.z), gaussian_rbf(r, 0.0, 30.0, 16), knn], -1))
            xp, mask = to_padded(x, pb.batch, pb.counts)
            cond = torch.zeros(B, self.cfg.hidden)
            for blk in self.blocks:
                xp = blk(xp, cond, mask)
            m = mask.unsqueeze(-1).float()
            mean = (xp * m).sum(1) / m.sum(1).clamp(min=1)
            mx = xp.masked_fill(~mask.unsqueeze(-1), -1e9).max(1).values
            return torch.cat([mean, mx], -1)
        radius = torch.ones(B)
        h, _ = self.encoder(self.z_emb(pb.z), pb.pos, pb.batch, self.null_cond.expand(len(pb.z), -1),
                            None, radius)
        mean = scatter_mean(h, pb.batch, B)
        mx = torch.full((B, h.shape[1]), -1e9).scatter_reduce(0, pb.batch.unsqueeze(-1).expand_as(h), h,
                                                              reduce="amax")
        return torch.cat([mean, mx], -1)

    def forward(self, particles: Sequence[Particle]) -> tuple[Tensor, Tensor]:
        """(B, 6) normalised lattice predictions and (B, 230) space-group logits."""
        e = self.embed(particles)
        return self.lattice_head(e), self.sg_head(e)

    def loss(self, particles: Sequence[Particle], lattice: np.ndarray, spacegroup: np.ndarray,
             g: torch.Generator | None = None) -> tuple[Tensor, dict[str, float]]:
        """MSE on normalised lattice parameters + cross-entropy on the space group."""
        lat_hat, sg_logits = self(particles)
        y = (torch.as_tensor(np.asarray(lattice).reshape(-1, 6), dtype=torch.float32) - self.lat_mean) / self.lat_std
        sg = torch.as_tensor(np.asarray(spacegroup), dtype=torch.long) - 1
        lat_loss = F.mse_loss(lat_hat, y)
        sg_loss = F.cross_entropy(sg_logits, sg)
        return lat_loss + sg_loss, {"lattice": lat_loss.item(), "sg": sg_loss.item(),
                                    "sg_acc": (sg_logits.argmax(-1) == sg).float().mean().item()}

    @torch.no_grad()
    def predict(self, particles: Sequence[Particle]) -> tuple[np.ndarray, np.ndarray]:
        """(B, 6) lattice parameters (Å, deg; lengths >= 0.1 Å, angles in [1, 179]) and (B,)
        space groups 1..230."""
        lat_hat, sg_logits = self(particles)
        lat = (lat_hat * self.lat_std + self.lat_mean).double().numpy()
        lat[:, :3] = np.maximum(lat[:, :3], 0.1)
        lat[:, 3:] = np.clip(lat[:, 3:], 1.0, 179.0)
        return lat, sg_logits.argmax(-1).numpy() + 1
