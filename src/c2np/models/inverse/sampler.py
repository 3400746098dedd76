"""The network side of a task-2 crystal generator (:class:`CellSampler`): the particle
condition, the count head, the shared denoiser, the optional space-group condition, and one
generative process (:mod:`c2np.models.inverse.registry`) that trains it (:meth:`CellSampler.loss`)
and samples cells with it (:meth:`CellSampler.sample`), optionally under a space-group template.

Conditioned on :func:`c2np.particle_descriptor.describe` of the particle (rotation invariant,
lengths in units of the particle's scale ``s``), a model generates a **primitive cell**:
lattice ``L`` (3 x 3), fractional coordinates ``F`` (n x 3) and species slots. The cell's
composition (atoms per species slot) is predicted by a classification head over the
compositions seen in training.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn

from c2np.errors import C2NPInputError
from c2np.models.backbone import MLP, sinusoidal_embedding
from c2np.models.inverse.adit import LatentAutoencoder, LatentDiT
from c2np.models.inverse.config import GenConfig
from c2np.models.inverse.diffcsp import cosine_schedule
from c2np.models.inverse.network import Denoiser
from c2np.models.inverse.registry import process_for
from c2np.models.inverse.templates import CellTemplate, TemplateBlocks, project_frac_template, project_lattice
from c2np.particle_descriptor import N_SLOTS, ParticleDescriptor

__all__ = ["CellSampler"]


class CellSampler(nn.Module):
    """The network and generative process of a crystal generator (see the module)."""

    # buffers and process modules registered in __init__ (declared for the type checker;
    # nn.Module.__getattr__ is untyped)
    desc_mean: Tensor
    desc_std: Tensor
    lat_mean: Tensor
    lat_std: Tensor
    alpha_bar: Tensor
    sigma: Tensor
    limit_density: Tensor
    lp_mean: Tensor
    lp_std: Tensor
    cd_sigmas: Tensor
    encoder: Denoiser
    fc_mu: nn.Linear
    fc_logvar: nn.Linear
    z_proj: nn.Linear
    lattice_head: MLP
    ae: LatentAutoencoder
    dit: LatentDiT

    def __init__(self, cfg: GenConfig, n_desc: int, compositions: Sequence[tuple[int, ...]],
                 desc_mean: np.ndarray, desc_std: np.ndarray, lat_mean: np.ndarray, lat_std: float,
                 limit_density: float = 1.0, lattice_stats: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        super().__init__()
        self.cfg = cfg                      # also sets self.process
        self.n_desc = int(n_desc)
        self.compositions = [tuple(int(x) for x in c) for c in compositions]
        self.templates: list[CellTemplate] = []     # space-group templates (z_candidates="templates")
        self.net = Denoiser(self.process.denoiser_config(), n_desc, typed=self.process.typed)
        self.train_progress = 0.0           # share of the training run done (set by fit; staged processes)
        self.comp_head = MLP(cfg.hidden, cfg.hidden, len(self.compositions), 2)
        if cfg.spacegroups:                 # DiffCSP++-style space-group condition; row 0: not given
            self.sg_embed = nn.Embedding(len(cfg.spacegroups) + 1, cfg.hidden)
            nn.init.zeros_(self.sg_embed.weight)    # starts as the unconditioned network (warm starts)
        self.register_buffer("desc_mean", torch.as_tensor(desc_mean, dtype=torch.float32))
        self.register_buffer("desc_std", torch.as_tensor(desc_std, dtype=torch.float32))
        self.register_buffer("lat_mean", torch.as_tensor(lat_mean, dtype=torch.float32).reshape(3, 3))
        self.register_buffer("lat_std", torch.tensor(float(lat_std), dtype=torch.float32))
        ab, sig = cosine_schedule(cfg, cfg.steps)
        self.register_buffer("alpha_bar", ab)
        self.register_buffer("sigma", sig)
        self.process.build(self, limit_density=limit_density, lattice_stats=lattice_stats)

    @property
    def cfg(self) -> GenConfig:
        """The configuration; setting it (e.g. a sampler or ranking override of a loaded
        generator) also sets the generative process (:attr:`process`) to that of the new one."""
        return self._cfg

    @cfg.setter
    def cfg(self, cfg: GenConfig) -> None:
        self._cfg = cfg
        self.process = process_for(cfg)

    # --- features ----------------------------------------------------------------------
    @staticmethod
    def features(descs: Sequence[ParticleDescriptor]) -> np.ndarray:
        """(B, n_desc) float32 raw descriptor vectors (log1p histograms, fractions, log s)."""
        v = np.stack([d.vector for d in descs])
        n_hist = v.shape[1] - N_SLOTS - 1
        v[:, :n_hist] = np.log1p(np.maximum(v[:, :n_hist], 0.0))
        return v

    def condition(self, feats: Tensor) -> Tensor:
        """(B, H) particle condition of raw feature rows (:meth:`features`)."""
        return self.net.cond((feats - self.desc_mean) / self.desc_std)

    def spacegroup_index(self, spacegroup: int) -> int:
        """The condition row of a space-group number (0: not given, or not a training group)."""
        sgs = self.cfg.spacegroups
        return sgs.index(spacegroup) + 1 if spacegroup in sgs else 0

    def _with_spacegroup(self, cond: Tensor, sg_index: Tensor | None) -> Tensor:
        """The denoiser's condition: ``cond`` (B,H) plus the space-group embedding of
        ``sg_index`` (B,) when this generator is space-group conditioned (``cfg.spacegroups``)."""
        if not self.cfg.spacegroups or sg_index is None:
            return cond
        return cond + self.sg_embed(sg_index)

    def time_embedding(self, t: Tensor) -> Tensor:
        """(B, H) sinusoidal embedding of times ``t`` (B,) scaled by the process's time scale."""
        return sinusoidal_embedding(t.float() * self.process.time_scale(), self.cfg.hidden)

    def stage_progress(self) -> float:
        """Progress (0-1) within the current training stage, for the learning-rate schedule."""
        return self.process.stage_progress(self.train_progress)

    # --- training ----------------------------------------------------------------------
    def loss(self, feats: Tensor, x_l0: Tensor, f0: Tensor, slot: Tensor, mask: Tensor, comp: Tensor,
             g: torch.Generator, sg_index: Tensor | None = None) -> tuple[Tensor, dict[str, float]]:
        """Loss of one batch (lattice in the process's units, frac in [0, 1)): the count head's
        cross-entropy plus the process's loss; ``sg_index`` (B,): the space-group condition rows
        (:meth:`spacegroup_index`) of a conditioned generator."""
        cond = self.condition(feats)
        comp_loss = nn.functional.cross_entropy(self.comp_head(cond), comp)   # never told the group
        cond = self._with_spacegroup(cond, sg_index)
        total, parts = self.process.loss(self, x_l0, f0, slot, mask, comp, cond, g)
        total = total + comp_loss
        return total, {"loss": total.item(), **parts, "comp": comp_loss.item()}

    # --- sampling ----------------------------------------------------------------------
    @torch.no_grad()
    def composition_logits(self, feats: Tensor) -> Tensor:
        """(B, n_compositions) count-head logits over ``self.compositions`` per row."""
        return self.comp_head(self.condition(feats))

    def predict_compositions(self, feats: Tensor) -> list[tuple[int, ...]]:
        """The most probable cell composition (atoms per slot) of each row."""
        return [self.compositions[i] for i in self.composition_logits(feats).argmax(-1).tolist()]

    @torch.no_grad()
    def sample(self, feats: Tensor, comps: Sequence[tuple[int, ...]], g: torch.Generator,
               template: CellTemplate | TemplateBlocks | None = None
               ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """One generated cell per row of the given compositions: (normalised lattice (3,3),
        frac (n,3), slots (n,)). With a ``template`` (every row of its composition) the cell
        is projected onto the template's symmetric subspace at the start and after every
        reverse step (:meth:`project`); a space-group conditioned generator is also told the
        template's group (without a template: the "not given" row). :class:`TemplateBlocks`
        sample consecutive row blocks under several templates of one composition in one batch.
        Every tensor is made on the device of the weights; ``g`` must be a generator there."""
        B = feats.shape[0]
        dev = self.desc_mean.device
        blocks = TemplateBlocks.single(template, B) if isinstance(template, CellTemplate) else template
        feats = feats.to(dev)
        cond = self.condition(feats)
        if self.cfg.spacegroups:
            k = torch.zeros(B, dtype=torch.long)
            for t, a, b in blocks.blocks() if blocks is not None else []:
                k[a:b] = self.spacegroup_index(t.spacegroup)
            cond = self._with_spacegroup(cond, k.to(dev))
        N = max(sum(c) for c in comps)
        slot = torch.zeros(B, N, dtype=torch.long)
        mask = torch.zeros(B, N, dtype=torch.bool)
        for b, c in enumerate(comps):
            s = np.repeat(np.arange(N_SLOTS), c)
            slot[b, : len(s)] = torch.as_tensor(s)
            mask[b, : len(s)] = True
        if blocks is not None:
            if blocks.n_rows != B or any(tuple(c) != blocks.composition for c in comps) or not np.array_equal(
                    blocks.templates[0].slots, slot[0].numpy()):
                raise C2NPInputError("sample: a template needs every row of its composition, slots sorted")
        slot, mask = slot.to(dev), mask.to(dev)
        x_l = torch.randn(B, 3, 3, generator=g, device=dev)
        f = torch.rand(B, N, 3, generator=g, device=dev)
        if blocks is not None and not self.process.projects_own_start:
            for _ in range(3):          # uniform start: a few passes make the wrapped average exact
                x_l, f = self.project(x_l, f, blocks)
        x_l, f, slot = self.process.sample(self, cond, comps, x_l, f, slot, mask, g, blocks)
        xs, fs, ss, n_real = (x_l.cpu().numpy().astype(np.float64), f.cpu().numpy().astype(np.float64),
                              slot.cpu().numpy(), mask.sum(1).cpu().numpy())
        return [(xs[b], fs[b, :int(n_real[b])], ss[b, :int(n_real[b])]) for b in range(B)]

    def project(self, x_l: Tensor, f: Tensor, template: CellTemplate | TemplateBlocks) -> tuple[Tensor, Tensor]:
        """Normalised lattices (B,3,3) and frac (B,n,3) projected onto ``template``'s symmetric
        subspace (:func:`~c2np.models.inverse.templates.project_lattice` on the lattice in units
        of the particle scale, which the projection does not depend on, and
        :func:`~c2np.models.inverse.templates.project_frac`); with :class:`TemplateBlocks` each
        block of rows onto its own template. Computed on the CPU in float64; returned on the
        device and in the dtype of the inputs."""
        blocks = TemplateBlocks.single(template, x_l.shape[0]) if isinstance(template, CellTemplate) else template
        mu, sd = self.lat_mean.cpu().numpy().astype(np.float64), float(self.lat_std)
        lat = x_l.cpu().numpy().astype(np.float64) * sd + mu
        fr = f.cpu().numpy()
        lat_out, fr_out = np.empty_like(lat), np.empty(fr.shape, dtype=np.float64)
        for t, a, b in blocks.blocks():
            lat_out[a:b] = project_lattice(lat[a:b], t.rotations)
            fr_out[a:b] = project_frac_template(fr[a:b], t)
        return (torch.as_tensor((lat_out - mu) / sd, dtype=x_l.dtype, device=x_l.device),
                torch.as_tensor(fr_out, dtype=f.dtype, device=f.device))

    def schedule(self, n_steps: int) -> tuple[Tensor, Tensor]:
        """The diffusion schedule on ``n_steps + 1`` equally spaced times ``t = k T / n_steps``
        (k = 0..n_steps; ``T = cfg.steps``): (alpha_bar (n+1,), sigma (n+1,)). At
        ``n_steps = T`` these are the training buffers; other ``n_steps`` sample on a finer or
        coarser grid of the same continuous schedule (the time embedding is continuous)."""
        if n_steps == self.cfg.steps:
            return self.alpha_bar, self.sigma
        return cosine_schedule(self.cfg, n_steps)

    def cell_of(self, x_l: np.ndarray, frac: np.ndarray, slots: np.ndarray,
                desc: ParticleDescriptor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The generated cell in Å: (lattice (3,3), frac (n,3), atomic numbers (n,))."""
        lat = (x_l * float(self.lat_std) + self.lat_mean.cpu().numpy()) * desc.scale_angstrom
        numbers = desc.slot_numbers[slots]
        numbers = np.where(numbers == 0, desc.slot_numbers[0], numbers)
        return lat, frac, numbers
