"""The interface of a task-2 generative process (:class:`Process`). Each family (DiffCSP,
FlowMM, MatterGen, CDVAE, ADiT) is one subclass in its own module, found by
``GenConfig.process`` in :mod:`c2np.models.inverse.registry`.

A process owns what differs between the families: the modules and buffers it adds to the
generator (:meth:`Process.build`), the lattice representation it trains on
(:meth:`Process.training_lattices`), its noising and regression target (:meth:`Process.loss`)
and its sampler (:meth:`Process.sample`). The generator (:class:`~c2np.models.inverse.sampler.CellSampler`)
owns what they share: the particle condition, the count head, the denoiser, the space-group
condition and the template projection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from c2np.models.inverse.config import GenConfig
from c2np.models.inverse.templates import TemplateBlocks

if TYPE_CHECKING:       # the generator holds its process; annotations only
    from c2np.models.inverse.sampler import CellSampler

__all__ = ["Process"]


class Process:
    """One generative process of the crystal generator (see the module). Instances hold only
    the configuration; every learned tensor lives on the generator, so saved weights keep
    their names whatever the process."""

    #: the value of ``GenConfig.process`` that selects this class
    name: ClassVar[str] = ""
    #: whether the denoiser has a slot head (a type process)
    typed: ClassVar[bool] = False
    #: whether the lattice is standardised by the training lattices' mean and spread (else in
    #: units of the particle scale, O(1), as the references' in Å)
    standardised_lattice: ClassVar[bool] = True
    #: whether :meth:`sample` projects its own starting cell onto a template (else the
    #: generator projects the uniform start before calling it)
    projects_own_start: ClassVar[bool] = False

    def __init__(self, cfg: GenConfig) -> None:
        self.cfg = cfg

    def time_scale(self) -> float:
        """Factor of the time given to the sinusoidal time embedding."""
        return 1.0

    def denoiser_config(self) -> GenConfig:
        """The configuration of the shared denoiser (:class:`~c2np.models.inverse.network.Denoiser`)."""
        return self.cfg

    def build(self, model: CellSampler, *, limit_density: float,
              lattice_stats: tuple[np.ndarray, np.ndarray] | None) -> None:
        """Add this process's modules and buffers to ``model`` (after the shared ones)."""

    def training_lattices(self, lattices: np.ndarray, n_atoms: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """The training lattices (B, 3, 3, units of s) as this process represents them, and the
        statistics :meth:`build` takes (``limit_density``, ``lattice_stats``) from them and the
        cells' atom counts (B,)."""
        return lattices, {}

    def stage_progress(self, progress: float) -> float:
        """Progress (0-1) within the current training stage, for the learning-rate schedule."""
        return progress

    def loss(self, model: CellSampler, x_l0: Tensor, f0: Tensor, slot: Tensor, mask: Tensor, comp: Tensor,
             cond: Tensor, g: torch.Generator) -> tuple[Tensor, dict[str, float]]:
        """The process's loss of one batch (lattice (B,3,3) in the process's units, frac (B,N,3)
        in [0, 1), slots and mask (B,N), composition index (B,), condition (B,H)) and its parts."""
        raise NotImplementedError

    def sample(self, model: CellSampler, cond: Tensor, comps: Sequence[tuple[int, ...]], x_l: Tensor, f: Tensor,
               slot: Tensor, mask: Tensor, g: torch.Generator, template: TemplateBlocks | None
               ) -> tuple[Tensor, Tensor, Tensor]:
        """Generated cells (lattice (B,3,3), frac (B,N,3), slots (B,N)) from the starting draw
        ``x_l`` ~ N(0, I), ``f`` ~ U[0, 1) (projected onto ``template`` unless
        :attr:`projects_own_start`), projected onto ``template`` after every step."""
        raise NotImplementedError
