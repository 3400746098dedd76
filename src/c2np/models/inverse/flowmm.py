"""FlowMM's flow matching for the task-2 crystal generator (``process="flowmm"``).

Straight paths from N(0, I) to the normalised lattice and geodesics on the flat torus from
uniform fractional coordinates; the coordinate vector fields (target and network) without
their drift (mean over the cell's atoms: a translation is no change of crystal). Euler
integration, the coordinate velocity scaled by ``1 + anneal_slope * t`` (FlowMM's inference
anti-annealing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from c2np.models.inverse.diffcsp import masked_mse
from c2np.models.inverse.process import Process
from c2np.models.inverse.templates import TemplateBlocks

if TYPE_CHECKING:
    from c2np.models.inverse.sampler import CellSampler

__all__ = ["FlowMMProcess", "no_drift"]


def no_drift(u: Tensor, mask: Tensor) -> Tensor:
    """Fractional velocities (B, n, 3) less their mean over each cell's atoms (``mask`` (B, n)):
    FlowMM's tangent space of the torus modulo translations, where the conditional and the
    learned vector fields live (a translation of the whole cell is no change of crystal)."""
    m = mask[..., None].to(u.dtype)
    mean = (u * m).sum(dim=1, keepdim=True) / m.sum(dim=1, keepdim=True).clamp(min=1.0)
    return (u - mean) * m


class FlowMMProcess(Process):
    """FlowMM's flow matching (see the module)."""

    name = "flowmm"

    def loss(self, model: CellSampler, x_l0: Tensor, f0: Tensor, slot: Tensor, mask: Tensor, comp: Tensor,
             cond: Tensor, g: torch.Generator) -> tuple[Tensor, dict[str, float]]:
        """A point ``t ~ U[0, 1)`` on each conditional path; regress the path's velocities."""
        B = x_l0.shape[0]
        eps_l = torch.randn(x_l0.shape, generator=g, device=g.device)
        tt = torch.rand(B, generator=g, device=g.device)
        x_lt = (1 - tt)[:, None, None] * eps_l + tt[:, None, None] * x_l0
        fb = torch.rand(f0.shape, generator=g, device=g.device)
        d = (f0 - fb + 0.5) % 1.0 - 0.5
        ft = (fb + tt[:, None, None] * d) % 1.0
        out_l, out_f, _ = model.net(x_lt, ft, slot, mask, model.time_embedding(tt), cond)
        ll, lf = masked_mse(out_l, x_l0 - eps_l, no_drift(out_f, mask), no_drift(d, mask), mask)
        return self.cfg.lattice_weight * ll + lf, {"lattice": ll.item(), "frac": lf.item()}

    def sample(self, model: CellSampler, cond: Tensor, comps: Sequence[tuple[int, ...]], x_l: Tensor, f: Tensor,
               slot: Tensor, mask: Tensor, g: torch.Generator, template: TemplateBlocks | None
               ) -> tuple[Tensor, Tensor, Tensor]:
        """``sample_steps`` (else ``steps``) Euler steps from t = 0 to 1."""
        T = self.cfg.sample_steps or self.cfg.steps
        B = x_l.shape[0]
        for i in range(T, 0, -1):
            t_now = (T - i) / T
            tt = torch.full((B,), t_now, device=x_l.device)
            out_l, out_f, _ = model.net(x_l, f, slot, mask, model.time_embedding(tt), cond)
            x_l = x_l + out_l / T
            # FlowMM's inference anti-annealing of the coordinate velocity: (1 + c t) u
            f = (f + (1.0 + self.cfg.anneal_slope * t_now) * no_drift(out_f, mask) / T) % 1.0
            if template is not None:
                x_l, f = model.project(x_l, f, template)
        return x_l, f, slot
