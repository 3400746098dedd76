"""Learned model families of the C2NP paper (CDVAE, DiffCSP, FlowMM, MatterGen, ADiT) plus a
site-scoring model, for task 1 (cell + R + rotation -> particle) and task 2 (particle ->
lattice + space group). PyTorch is imported only inside the submodules that need it, never
when ``c2np`` or this package is imported.
"""

from __future__ import annotations

MODEL_NAMES: tuple[str, ...] = ("cdvae", "diffcsp", "flowmm", "mattergen", "adit", "sitescore")
TASKS: tuple[str, ...] = ("forward", "inverse")
CONFIG_NAMES: tuple[str, ...] = ("tiny", "small", "paper")

__all__ = ["MODEL_NAMES", "TASKS", "CONFIG_NAMES"]
