"""Model families of the C2NP paper (CDVAE, DiffCSP, FlowMM, MatterGen, ADiT) plus
``sitescore``, for task 1 (cell + R + rotation -> particle) and task 2 (particle -> lattice +
space group). PyTorch is imported only inside the submodules that need it, never when
``c2np`` or this package is imported.

What a model knows is read from its configuration (:mod:`c2np.models.priors`): a model with
any analytic prior is ``learned+prior`` and its name carries the tags of its priors
(:func:`display_name`, e.g. ``mattergen+sites+sphere+snap``); ``sitescore`` calls the carver.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MODEL_NAMES: tuple[str, ...] = ("cdvae", "diffcsp", "flowmm", "mattergen", "adit", "sitescore")
TASKS: tuple[str, ...] = ("forward", "inverse")
CONFIG_NAMES: tuple[str, ...] = ("tiny", "small", "paper")


def display_name(model: str, task: str, config: Mapping[str, Any] | None = None) -> str:
    """``model`` followed by the tags of the priors its ``config`` (a ``ModelConfig`` dict)
    gives it, e.g. ``mattergen+sites+sphere+snap`` (task 1; ``sitescore`` always
    ``sitescore+carve``); the task-2 regression predictors use no prior."""
    from c2np.categories import name_with_priors
    from c2np.models.priors import forward_priors

    if task != "forward":
        return model
    return name_with_priors(model, forward_priors(model, config or {}))


__all__ = ["MODEL_NAMES", "TASKS", "CONFIG_NAMES", "display_name"]
