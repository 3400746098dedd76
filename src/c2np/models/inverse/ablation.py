"""Explicit ablations of a shipped task-2 generator's settings (torch-free).

Each arm of :data:`ABLATIONS` is a change of the loaded :class:`~c2np.models.inverse.config.GenConfig`
that removes one analytic prior and nothing else (:func:`ablated_config`); ``shipped`` is the
configuration itself, unchanged. :func:`ablate` applies an arm to a loaded generator or to
every member of a generator pool.

* ``templates-off``: no space-group templates: one pass with the count head's most probable
  composition (``z_candidates="head"``) and the generic read-out (``read_rule="plateau"``),
  so no cell is projected onto a template and no template group is read out.
* ``refinement-off``: candidates ranked by the pair-profile mismatch of the generated cell as
  it is (``rank="profile"``): no isotropic stretch and no refinement of the lattice and
  coordinates against the particle's pair profile.
* ``crop-off``: the network is conditioned on the whole particle only
  (``crop_radii_angstrom=()``).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from c2np.errors import C2NPInputError
from c2np.models.inverse.config import GenConfig

__all__ = ["ABLATIONS", "SHIPPED", "ablated_config", "ablate"]

SHIPPED = "shipped"
#: each arm and what it removes
ABLATIONS: dict[str, str] = {
    SHIPPED: "as shipped",
    "templates-off": "no space-group templates (the count head's composition, the generic read-out)",
    "refinement-off": "no pair-profile stretch or refinement (rank by the generated cell's profile as it is)",
    "crop-off": "no central crops (the whole particle only)",
}


def ablated_config(cfg: GenConfig, arm: str = SHIPPED) -> GenConfig:
    """``cfg`` with the ablation ``arm`` applied (:data:`ABLATIONS`); ``shipped`` returns
    ``cfg`` itself. An arm whose prior the configuration does not use returns an equal copy."""
    if arm not in ABLATIONS:
        raise C2NPInputError(f"ablation must be one of {', '.join(ABLATIONS)}, got {arm!r}")
    if arm == SHIPPED:
        return cfg
    if arm == "templates-off":
        read = "plateau" if cfg.read_rule == "template" else cfg.read_rule
        z = "head" if cfg.z_candidates == "templates" else cfg.z_candidates
        return replace(cfg, z_candidates=z, read_rule=read)
    if arm == "refinement-off":
        return replace(cfg, rank="profile" if cfg.rank in ("stretch", "refine") else cfg.rank)
    return replace(cfg, crop_radii_angstrom=())


def ablate(generator: Any, arm: str = SHIPPED) -> Any:
    """A copy of a loaded generator (a :class:`~c2np.models.inverse.generator.CrystalGenerator`,
    sharing its weights) or of a :class:`~c2np.models.inverse.pool.GeneratorPool` (every
    member ablated) with the ablation ``arm``; ``shipped`` returns ``generator`` itself."""
    if arm not in ABLATIONS:
        raise C2NPInputError(f"ablation must be one of {', '.join(ABLATIONS)}, got {arm!r}")
    if arm == SHIPPED:
        return generator
    members = getattr(generator, "members", None)
    if members is not None:
        out = copy.copy(generator)
        out.members = tuple((name, ablate(gen, arm)) for name, gen in members)
        return out
    out = copy.copy(generator)
    out.cfg = ablated_config(generator.cfg, arm)
    return out
