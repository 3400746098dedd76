"""Faithful configurations of the five task-1 families, and the remedies measured on them
(torch-free).

A *faithful* configuration uses no analytic geometry beyond the query (category ``learned``):
no lattice-site features or site-assignment head (``site_features=False``, no Sinkhorn
exclusion), hence no sphere penalty on sites; no snapping of sampled atoms onto sites
(``sample_site_tol_angstrom=0``), no over-complete count (``sample_count_margin=0``) and no
confinement to the ball (``confine_margin < 0``). :func:`c2np.models.priors.forward_priors`
returns no prior for any of them (tested).

:data:`REMEDIES` names the changes that stay inside a family's own formulation (sampler,
network size, schedule): each maps a family, its faithful configuration and its optimiser steps
to a changed configuration and step count. ``reproduce/faithful/gate.py`` measures them on the
one-particle overfit gate (:mod:`c2np.models.overfit`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from c2np.errors import C2NPInputError
from c2np.models.config import ModelConfig

__all__ = ["FAITHFUL_FAMILIES", "NO_PRIOR_FIELDS", "REFERENCE_SAMPLERS", "Remedy", "REMEDIES",
           "faithful_config", "reference_sampler", "apply_remedy"]

FAITHFUL_FAMILIES: tuple[str, ...] = ("cdvae", "diffcsp", "flowmm", "mattergen", "adit")

#: the config fields that switch every analytic prior of a task-1 generator off
NO_PRIOR_FIELDS: dict[str, Any] = dict(site_features=False, site_k=1, exclusion_iters=0, sample_exclusion_iters=0,
                                       sample_count_margin=0.0, sample_site_tol_angstrom=0.0, confine_margin=-1.0)

#: each family's reference sampler in this code's terms: steps and predictor-corrector rounds
#: (CDVAE: 100 Langevin steps per noise level, the reference's n_step_each; DiffCSP and
#: MatterGen: 1,000 steps with one Langevin corrector step; FlowMM: 1,000 Euler steps; ADiT:
#: 100 Euler steps, no corrector). CDVAE's steps follow its number of noise levels.
REFERENCE_SAMPLERS: dict[str, dict[str, Any]] = {
    "cdvae": {"steps_per_level": 100},
    "diffcsp": {"sample_steps": 1000, "corrector_steps": 1},
    "flowmm": {"sample_steps": 1000},
    "mattergen": {"sample_steps": 1000, "corrector_steps": 1},
    "adit": {"sample_steps": 100, "corrector_steps": 0},
}


def _check_family(family: str) -> None:
    if family not in FAITHFUL_FAMILIES:
        raise C2NPInputError(f"unknown faithful family {family!r}; choose one of {list(FAITHFUL_FAMILIES)}")


def faithful_config(family: str, base: ModelConfig | str = "small", **overrides: Any) -> ModelConfig:
    """The faithful configuration of ``family``: ``base`` (a :class:`ModelConfig` or a preset
    name, taken through the overfit gate's :func:`~c2np.models.overfit.gate_config` so that
    each family keeps its gate sampler) with every prior switched off
    (:data:`NO_PRIOR_FIELDS`), then ``overrides`` (which may not switch a prior back on)."""
    _check_family(family)
    bad = sorted(set(overrides) & set(NO_PRIOR_FIELDS))
    if bad:
        raise C2NPInputError(f"faithful_config: {bad} would change the fields that keep the model prior-free")
    if isinstance(base, str):
        from c2np.models.overfit import gate_config

        cfg = gate_config(family, base)
    else:
        cfg = base
    return replace(cfg, **NO_PRIOR_FIELDS, **overrides)


def reference_sampler(family: str, cfg: ModelConfig) -> dict[str, Any]:
    """The config fields of ``family``'s reference sampler (:data:`REFERENCE_SAMPLERS`) for
    ``cfg`` (CDVAE's step count is per noise level, so it scales with ``langevin_levels``)."""
    _check_family(family)
    ref = dict(REFERENCE_SAMPLERS[family])
    per_level = ref.pop("steps_per_level", None)
    if per_level is not None:
        ref["sample_steps"] = int(per_level) * int(cfg.langevin_levels)
    return ref


@dataclass(frozen=True)
class Remedy:
    """A change inside a family's formulation. ``kind`` 'sampler' (same trained weights,
    another sampler) or 'training' (a fresh run); ``change(family, cfg, steps)`` returns the
    config overrides and the optimiser steps; ``applies(family)`` False where the change has
    no meaning for the family (e.g. no corrector to remove)."""

    name: str
    kind: str
    description: str
    change: Callable[[str, ModelConfig, int], tuple[dict[str, Any], int]]
    applies: Callable[[str], bool] = lambda family: True


def _has_corrector(family: str) -> bool:
    return family in ("diffcsp", "mattergen", "adit")


REMEDIES: dict[str, Remedy] = {r.name: r for r in (
    Remedy("faithful", "sampler", "the faithful configuration with the gate's sampler",
           lambda f, c, s: ({}, s)),
    Remedy("reference-sampler", "sampler", "the reference implementation's sampler steps and corrector rounds",
           lambda f, c, s: (reference_sampler(f, c), s)),
    Remedy("no-corrector", "sampler", "the gate's sampler without the Langevin corrector (corrector_steps=0)",
           lambda f, c, s: ({"corrector_steps": 0}, s), _has_corrector),
    Remedy("10x-steps", "sampler", "ten times the gate's sampler steps",
           lambda f, c, s: ({"sample_steps": 10 * int(c.sample_steps)}, s)),
    Remedy("larger-network", "training", "twice the hidden size and two more layers",
           lambda f, c, s: ({"hidden": 2 * int(c.hidden), "layers": int(c.layers) + 2}, s)),
    Remedy("long-schedule", "training", "three times the optimiser steps (same warmup, cosine decay and EMA)",
           lambda f, c, s: ({}, 3 * int(s))),
)}


def apply_remedy(name: str, family: str, cfg: ModelConfig, steps: int) -> tuple[ModelConfig, int]:
    """``cfg`` and ``steps`` changed by remedy ``name`` (:data:`REMEDIES`); the result is
    still prior-free."""
    if name not in REMEDIES:
        raise C2NPInputError(f"unknown remedy {name!r}; choose one of {list(REMEDIES)}")
    overrides, new_steps = REMEDIES[name].change(family, cfg, int(steps))
    return replace(cfg, **overrides), int(new_steps)
