"""The generative process of each ``GenConfig.process`` (:data:`PROCESS_CLASSES`)."""

from __future__ import annotations

from c2np.errors import C2NPInputError
from c2np.models.inverse.adit import ADiTProcess
from c2np.models.inverse.cdvae import CDVAEProcess
from c2np.models.inverse.config import PROCESSES, GenConfig
from c2np.models.inverse.diffcsp import DiffCSPProcess
from c2np.models.inverse.flowmm import FlowMMProcess
from c2np.models.inverse.mattergen import MatterGenProcess
from c2np.models.inverse.process import Process

__all__ = ["PROCESS_CLASSES", "process_for"]

#: the process class of each name of :data:`~c2np.models.inverse.config.PROCESSES`
PROCESS_CLASSES: dict[str, type[Process]] = {
    cls.name: cls for cls in (DiffCSPProcess, FlowMMProcess, MatterGenProcess, CDVAEProcess, ADiTProcess)}
assert tuple(PROCESS_CLASSES) == PROCESSES


def process_for(cfg: GenConfig) -> Process:
    """The process of ``cfg.process``."""
    cls = PROCESS_CLASSES.get(cfg.process)
    if cls is None:
        raise C2NPInputError(f"process must be one of {list(PROCESS_CLASSES)}, got {cfg.process!r}")
    return cls(cfg)
