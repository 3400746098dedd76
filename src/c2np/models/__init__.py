"""Learned model families of the C2NP paper (CDVAE, DiffCSP, FlowMM, MatterGen, ADiT) plus
``sitescore``, for task 1 (cell + R + rotation -> particle) and task 2 (particle -> lattice +
space group). PyTorch is imported only inside the submodules that need it, never when
``c2np`` or this package is imported.

Labels (:data:`FORWARD_KIND`): the task-1 ``sitescore`` carves the crystal at R + margin and
learns only the inside/outside threshold, so it is a *carve-based baseline (learned
threshold)*, not a learned generator; it is listed apart from the generators in every table
and never counted in a summary of what learned generators achieve.
"""

from __future__ import annotations

MODEL_NAMES: tuple[str, ...] = ("cdvae", "diffcsp", "flowmm", "mattergen", "adit", "sitescore")
TASKS: tuple[str, ...] = ("forward", "inverse")
CONFIG_NAMES: tuple[str, ...] = ("tiny", "small", "paper")
CARVE_BASED_LABEL = "carve-based (learned threshold)"
#: what each task-1 model is: a learned generator, or carve-based
FORWARD_KIND: dict[str, str] = {**{m: "learned generator" for m in MODEL_NAMES[:5]},
                                "sitescore": CARVE_BASED_LABEL}
#: the learned generators (positions from their own generative process, never the carver)
LEARNED_GENERATORS: tuple[str, ...] = tuple(m for m, k in FORWARD_KIND.items() if k == "learned generator")


def display_name(model: str, task: str) -> str:
    """``model`` with its label where it is not a learned generator, e.g.
    ``sitescore [carve-based (learned threshold)]`` for task 1."""
    if task == "forward" and FORWARD_KIND.get(model, "learned generator") != "learned generator":
        return f"{model} [{FORWARD_KIND[model]}]"
    return model


__all__ = ["MODEL_NAMES", "TASKS", "CONFIG_NAMES", "CARVE_BASED_LABEL", "FORWARD_KIND",
           "LEARNED_GENERATORS", "display_name"]
