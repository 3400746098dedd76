"""Ablations of the analytic priors in the task-1 families' samplers.

:class:`Ablation` says which prior a sampler keeps; the default (:data:`SHIPPED`) is the
shipped behaviour, bit for bit. Each switch removes one piece of analytic geometry:

* ``sphere_penalty``: the site-assignment head's fixed penalty per Å a candidate site lies
  outside R (``softplus(w)`` per Å, ``w`` learned from an init of 10/Å, 3,000/Å for MatterGen).
  Off: every site scores as if it were inside the sphere.
* ``learned_correction``: the network's learned term of every site score, on top of the
  Gaussian distance likelihood, the sphere penalty and the species likelihood. Off: the term
  is zero, so the site choice rests on the analytic terms alone (the learned "no site" score
  and the free prediction stay).
* ``site_snapping``: MatterGen's site filter (``sample_site_tol_angstrom``: keep only atoms
  within the tolerance of a lattice site, one per site, re-typed by the site) and ADiT's
  decoder snap (the decoded position moved to its soft site choice). Off: the positions are
  returned as generated (MatterGen then keeps its over-complete count).
* ``ball_confinement``: CDVAE's reflection of positions beyond R (1 + ``confine_margin``)
  back into the ball. Off: positions are never reflected.

A switch that does not apply to a family changes nothing there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["Ablation", "SHIPPED", "ARMS", "ablated"]


@dataclass(frozen=True)
class Ablation:
    """Which analytic priors a sampler keeps (all True: as shipped; see the module docstring)."""

    sphere_penalty: bool = True
    learned_correction: bool = True
    site_snapping: bool = True
    ball_confinement: bool = True

    @property
    def is_shipped(self) -> bool:
        """True when every prior is kept."""
        return self == SHIPPED


SHIPPED = Ablation()

#: the arms of the forward ablation table, by name
ARMS: dict[str, Ablation] = {
    "shipped": SHIPPED,
    "sphere-penalty-off": replace(SHIPPED, sphere_penalty=False),
    "learned-correction-zeroed": replace(SHIPPED, learned_correction=False),
    "no-snapping": replace(SHIPPED, site_snapping=False, ball_confinement=False),
}


@contextmanager
def ablated(model: Any, ablation: Ablation) -> Iterator[None]:
    """Within the block, every submodule of ``model`` (a torch module) that has an
    ``ablation`` attribute (the site-assignment heads) uses ``ablation``; restored after."""
    mods = [m for m in model.modules() if isinstance(getattr(m, "ablation", None), Ablation)]
    old = [m.ablation for m in mods]
    for m in mods:
        m.ablation = ablation
    try:
        yield
    finally:
        for m, a in zip(mods, old):
            m.ablation = a
