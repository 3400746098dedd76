"""The CSPNet-like denoiser shared by the task-2 generative processes: fully connected within
the cell, edge features the lattice Gram matrix and Fourier features of fractional differences,
so the network is permutation-equivariant and translation-invariant on the torus."""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import Tensor, nn

from c2np.models.backbone import MLP, periodic_features
from c2np.models.inverse.config import GenConfig
from c2np.particle_descriptor import N_SLOTS

__all__ = ["Denoiser"]


class _EdgeMLP(nn.Module):
    """The edge MLP of :class:`Denoiser`: messages ``out(silu(src h_i + dst h_j + edge e_ij))``
    on [h_i, h_j, e_ij]. The first layer is split by input, so its node parts and the part of
    the lattice Gram features (the same for every pair of a cell) are computed per node or per
    cell; the second layer is linear, so a node's summed message is ``out`` of its summed hidden
    activations (:meth:`summed`): one matrix product per node instead of one per edge."""

    def __init__(self, h: int, n_edge: int) -> None:
        super().__init__()
        self.src = nn.Linear(h, h, bias=False)
        self.dst = nn.Linear(h, h, bias=False)
        self.edge = nn.Linear(n_edge, h)
        self.out = nn.Linear(h, h)

    def hidden(self, h: Tensor, gram: Tensor, four: Tensor) -> Tensor:
        """h (B,N,H) nodes, gram (B,9) lattice Gram features, four (B,N,N,F) pair Fourier
        features -> (B,N,N,H) hidden activations of the messages (i receives from j)."""
        n_gram = gram.shape[-1]
        w = self.edge.weight
        node_i = self.src(h) + (gram @ w[:, :n_gram].T + self.edge.bias)[:, None, :]     # (B,N,H)
        x = torch.matmul(four, w[:, n_gram:].T)
        x += node_i[:, :, None, :] + self.dst(h)[:, None, :, :]
        return nn.functional.silu(x, inplace=not torch.is_grad_enabled())

    def summed(self, act: Tensor, pm: Tensor, deg: Tensor) -> Tensor:
        """The mean message of each node: act (B,N,N,H) hidden activations, pm (B,N,N) pair
        mask (float), deg (B,N,1) neighbour count clamped at 1 -> (B,N,H)."""
        s = torch.matmul(pm[:, :, None, :], act).squeeze(2)            # sum_j pm_ij act_ij
        return (self.out(s) + (pm.sum(-1, keepdim=True) - 1.0) * self.out.bias) / deg

    def messages(self, act: Tensor) -> Tensor:
        """The messages (B,N,N,H) of hidden activations (B,N,N,H)."""
        return self.out(act)


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

    def _edges(self) -> list[_EdgeMLP]:
        """The edge MLPs of the layers, typed."""
        return [cast(_EdgeMLP, e) for e in self.edge]

    def trunk(self, x_l: Tensor, f: Tensor, slot: Tensor, mask: Tensor, t_emb: Tensor, cond: Tensor
              ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """The message-passing layers: (node states h (B,N,H), the last layer's hidden message
        activations (B,N,N,H), pair mask (B,N,N), degree (B,N,1), masked mean of h (B,H),
        condition + time (B,H))."""
        B, N = slot.shape
        c = cond + self.time(t_emb)
        h = self.slot(slot) + c[:, None, :]
        gram = (x_l @ x_l.transpose(1, 2)).reshape(B, 9)
        four = periodic_features(f[:, None, :, :] - f[:, :, None, :], self.n_freq)
        pm = (mask[:, :, None] & mask[:, None, :]).to(h.dtype)
        deg = pm.sum(dim=2, keepdim=True).clamp(min=1.0)
        nodes = mask[..., None].to(h.dtype)
        act = h.new_zeros(B, N, N, h.shape[-1]) if not len(self.edge) else h   # set by every layer
        for edge, node, norm in zip(self._edges(), self.node, self.norm):
            act = edge.hidden(h, gram, four)
            h = norm(h + node(torch.cat([h, edge.summed(act, pm, deg)], dim=-1))) * nodes
        pooled = (h * nodes).sum(1) / mask.to(h.dtype).sum(1, keepdim=True).clamp(min=1)
        return h, act, pm, deg, pooled, c

    def forward(self, x_l: Tensor, f: Tensor, slot: Tensor, mask: Tensor, t_emb: Tensor,
                cond: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        B, N = slot.shape
        h, act, pm, deg, pooled, c = self.trunk(x_l, f, slot, mask, t_emb, cond)
        out_l = self.out_l(torch.cat([pooled, c, x_l.reshape(B, 9)], dim=-1)).reshape(B, 3, 3)
        out_f = self.out_f(h)
        if self.n_pair_freq:
            # periodic pair readout: sum_j sum_k w_ijk (per component) * sin(2 pi k (f_j - f_i)),
            # equivariant to translations and permutations, periodic in every coordinate
            K = self.n_pair_freq
            k = torch.arange(1, K + 1, dtype=f.dtype, device=f.device) * (2 * math.pi)
            d = f[:, None, :, :] - f[:, :, None, :]                          # (B,N,N,3) f_j - f_i
            sin = torch.sin(d[..., None] * k)                                  # (B,N,N,3,K)
            if len(self.edge):      # the last messages through pair_f: pair_f o out, one linear map
                last = self._edges()[-1].out
                w = nn.functional.linear(act, self.pair_f.weight @ last.weight,
                                         self.pair_f.weight @ last.bias + self.pair_f.bias)
            else:                   # no message-passing layer: no messages
                w = self.pair_f(act)
            w = w.reshape(B, N, N, 3, K)
            out_f = out_f + (w * sin).sum(-1).mul(pm[..., None]).sum(2) / deg
        return out_l, out_f, (self.out_type(h) if self.typed else None)

