"""The CSPNet-like denoiser shared by the task-2 generative processes: fully connected within
the cell, edge features the lattice Gram matrix and Fourier features of fractional differences,
so the network is permutation-equivariant and translation-invariant on the torus."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from c2np.models.backbone import MLP, periodic_features
from c2np.models.inverse.config import GenConfig
from c2np.particle_descriptor import N_SLOTS

__all__ = ["Denoiser"]


class _EdgeMLP(nn.Module):
    """The edge MLP of :class:`Denoiser`: Linear-SiLU-Linear on [h_i, h_j, e_ij], with the
    first layer split by input so the node parts are computed per node, not per edge."""

    def __init__(self, h: int, n_edge: int) -> None:
        super().__init__()
        self.src = nn.Linear(h, h, bias=False)
        self.dst = nn.Linear(h, h, bias=False)
        self.edge = nn.Linear(n_edge, h)
        self.out = nn.Linear(h, h)

    def forward(self, h: Tensor, e: Tensor) -> Tensor:
        """h (B,N,H) nodes, e (B,N,N,E) edges -> (B,N,N,H) messages (i receives from j)."""
        x = self.src(h)[:, :, None, :] + self.dst(h)[:, None, :, :] + self.edge(e)
        return self.out(nn.functional.silu(x))


class Denoiser(nn.Module):
    """CSPNet-like network on padded cells: (lattice (B,3,3), frac (B,N,3), slot (B,N),
    mask (B,N), time (B,), condition (B,H)) -> (lattice output (B,3,3), frac output (B,N,3),
    slot logits (B,N,N_SLOTS) or None). With ``typed`` (MatterGen's process) it has a slot
    head, and a mask token (slot index ``N_SLOTS``) for the absorbing type process."""

    def __init__(self, cfg: GenConfig, n_desc: int, *, typed: bool = False) -> None:
        super().__init__()
        h = cfg.hidden
        self.n_freq = cfg.n_freq
        self.cond = MLP(n_desc, h, h, 2)
        self.typed = typed
        self.slot = nn.Embedding(N_SLOTS + 1 if self.typed else N_SLOTS, h)
        self.time = nn.Linear(h, h)
        self.edge = nn.ModuleList([_EdgeMLP(h, 9 + 6 * cfg.n_freq) for _ in range(cfg.layers)])
        self.node = nn.ModuleList([MLP(2 * h, h, h, 2) for _ in range(cfg.layers)])
        self.norm = nn.ModuleList([nn.LayerNorm(h) for _ in range(cfg.layers)])
        self.out_f = nn.Linear(h, 3)
        self.out_l = MLP(2 * h + 9, h, 9, 2)
        self.n_pair_freq = min(cfg.n_freq, 3) if cfg.pair_readout else 0
        if self.n_pair_freq:
            self.pair_f = nn.Linear(h, 3 * self.n_pair_freq)
        if self.typed:
            self.out_type = nn.Linear(h, N_SLOTS)

    def trunk(self, x_l: Tensor, f: Tensor, slot: Tensor, mask: Tensor, t_emb: Tensor, cond: Tensor
              ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """The message-passing layers: (node states h (B,N,H), last messages (B,N,N,H), pair
        mask (B,N,N,1), degree (B,N,1), masked mean of h (B,H), condition + time (B,H))."""
        B, N = slot.shape
        c = cond + self.time(t_emb)
        h = self.slot(slot) + c[:, None, :]
        gram = (x_l @ x_l.transpose(1, 2)).reshape(B, 1, 1, 9).expand(B, N, N, 9)
        four = periodic_features(f[:, None, :, :] - f[:, :, None, :], self.n_freq)
        e = torch.cat([gram, four], dim=-1)
        pm = (mask[:, :, None] & mask[:, None, :]).float()[..., None]
        deg = pm.sum(dim=2).clamp(min=1.0)
        m = h.new_zeros(B, N, N, h.shape[-1])
        for edge, node, norm in zip(self.edge, self.node, self.norm):
            m = edge(h, e) * pm
            h = norm(h + node(torch.cat([h, m.sum(dim=2) / deg], dim=-1))) * mask[..., None].float()
        pooled = (h * mask[..., None].float()).sum(1) / mask.float().sum(1, keepdim=True).clamp(min=1)
        return h, m, pm, deg, pooled, c

    def forward(self, x_l: Tensor, f: Tensor, slot: Tensor, mask: Tensor, t_emb: Tensor,
                cond: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        B, N = slot.shape
        h, m, pm, deg, pooled, c = self.trunk(x_l, f, slot, mask, t_emb, cond)
        out_l = self.out_l(torch.cat([pooled, c, x_l.reshape(B, 9)], dim=-1)).reshape(B, 3, 3)
        out_f = self.out_f(h)
        if self.n_pair_freq:
            # periodic pair readout: sum_j sum_k w_ijk (per component) * sin(2 pi k (f_j - f_i)),
            # equivariant to translations and permutations, periodic in every coordinate
            K = self.n_pair_freq
            k = torch.arange(1, K + 1, dtype=f.dtype, device=f.device) * (2 * math.pi)
            d = f[:, None, :, :] - f[:, :, None, :]                          # (B,N,N,3) f_j - f_i
            sin = torch.sin(d[..., None] * k)                                  # (B,N,N,3,K)
            w = self.pair_f(m).reshape(B, N, N, 3, K)
            out_f = out_f + (w * sin).sum(-1).mul(pm).sum(2) / deg
        return out_l, out_f, (self.out_type(h) if self.typed else None)

