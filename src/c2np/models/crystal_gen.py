"""Task-2 crystal generators: particle -> a generated unit cell -> spglib -> space group and
lattice parameters.

Conditioned on :func:`c2np.particle_descriptor.describe` of the particle (rotation invariant,
lengths in units of the particle's scale ``s``), a model generates a **primitive cell**:
lattice ``L`` (3 x 3, Å), fractional coordinates ``F`` (n x 3) and species. Three generative
processes share one CSPNet-like denoiser (fully connected within the cell; edge features
are the lattice Gram matrix and Fourier features of fractional differences, so the network
is permutation-equivariant and translation-invariant on the torus):

* ``diffcsp``: DiffCSP's joint diffusion — DDPM (cosine schedule) on the normalised
  lattice ``(L / s - mu) / sd`` and a variance-exploding wrapped-normal score process on
  ``F`` (sigma from 0.005 to 0.5), ancestral / reverse-SDE sampling.
* ``flowmm``: FlowMM's flow matching — straight paths from N(0, I) to the lattice and
  geodesics on the flat torus from uniform ``F``, the coordinate vector fields (target and
  network) without their drift (mean over the cell's atoms: translations are no change of
  crystal); Euler integration, the coordinate velocity scaled by ``1 + anneal_slope * t``
  (FlowMM's inference anti-annealing).
* ``mattergen``: MatterGen's diffusion (:mod:`c2np.models.mattergen_process`) — the
  symmetric (polar) lattice by a variance-preserving SDE towards an atom-count-dependent
  limit, fractional coordinates by a wrapped VE SDE with sigma divided by ``n^(1/3)``, and
  absorbing-state diffusion of the species slots (a type head; in training the types are
  given, not corrupted, in a share ``type_known_fraction`` of the rows, MatterGen's
  crystal-structure-prediction mode, which is how cells are sampled under a template);
  sampler ``pc`` is MatterGen's (ancestral steps, a Langevin corrector on the coordinates,
  noise removal at the last step), ``sde`` Euler–Maruyama.
* ``cdvae``: CDVAE's VAE + score decoder (:mod:`c2np.models.cdvae_process`) — a second copy
  of the network encodes the training cell into a latent ``z`` (KL-regularised; ``z ~ N(0, I)``
  at sampling); the lattice's six parameters are regressed from ``z``, the particle and the
  cell's composition (not diffused); the coordinates come from annealed Langevin dynamics on a
  noise-conditional score of isotropic Cartesian noise (``steps`` geometric levels,
  ``ld_steps_per_level`` Langevin steps each), the lattice held at the regressed one. The
  species are given by the composition, as in DiffCSP (CDVAE's type noise is not used).
* ``adit``: ADiT's latent diffusion (:mod:`c2np.models.adit_process`) — a transformer
  autoencoder of cells into per-atom latents (the first :data:`~c2np.models.adit_process.AE_FRACTION`
  of the training steps), then a diffusion transformer over those latents (linear interpolant,
  clean-latent prediction, ``steps`` Euler steps), the autoencoder frozen; the generated latents
  are decoded into coordinates and a lattice. Species given, as in DiffCSP.

The cell's composition (atoms per species slot, i.e. formula units x stoichiometry) is
predicted by a classification head over the compositions seen in training, not given.
The species of each slot are the particle's. The answer is then
``c2np.cells.standardize`` of the generated cell under a tolerance sweep
(:data:`SYMPREC_SWEEP_ANGSTROM`, tight to loose): the first tolerance whose space group is
the same at the next tolerance (a plateau); none -> the one at 0.1 Å.

Training material: ForwardTask training examples (the training cells and their particles;
under protocol ``strict`` never a held-out material). Prediction sees only the
:class:`~c2np.tasks.InverseQuery` particle.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from c2np.cells import UnitCell, standardize
from c2np.errors import C2NPInputError
from c2np.models import adit_process as adp
from c2np.models import cdvae_process as cdp
from c2np.models import mattergen_process as mgp
from c2np.models.backbone import MLP, periodic_features, sinusoidal_embedding
from c2np.models.cell_ranking import (
    best_scale_mismatch,
    cell_pair_profile,
    particle_pair_profile,
    profile_mismatch,
    refine_to_profile,
)
from c2np.models.cell_templates import (
    CellTemplate,
    load_templates,
    merge_templates,
    project_frac,
    project_lattice,
    template_of,
)
from c2np.particle import Particle, central_crop
from c2np.particle_descriptor import N_SLOTS, ParticleDescriptor, describe, position_noise_angstrom
from c2np.predictions import InversePrediction
from c2np.tasks import ForwardTask

__all__ = ["GenConfig", "CellExample", "cell_example", "CrystalGenerator", "SYMPREC_SWEEP_ANGSTROM",
           "SYMPREC_FINE_SWEEP_ANGSTROM", "SYMPREC_TEMPLATE_LADDER_ANGSTROM", "READ_RULES",
           "read_cell_to_prediction", "save_generator", "load_generator", "PROCESSES", "SAMPLERS", "vote",
           "training_pairs", "learning_rate_factor", "min_pair_distance_angstrom", "Candidate",
           "choose_candidate", "Z_CANDIDATES", "RANK_RULES", "build_templates", "CROP_MIN_GAP_ANGSTROM"]

PROCESSES = ("diffcsp", "flowmm", "mattergen", "cdvae", "adit")
SAMPLERS = ("sde", "ode", "pc")
SYMPREC_SWEEP_ANGSTROM: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3)
SYMPREC_FINE_SWEEP_ANGSTROM: tuple[float, ...] = (0.005, 0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3)
SYMPREC_TEMPLATE_LADDER_ANGSTROM: tuple[float, ...] = (0.005, 0.002, 1e-3, 3e-4, 1e-4)
READ_RULES = ("plateau", "longest", "tight", "template")
Z_CANDIDATES = ("head", "all", "templates")
RANK_RULES = ("vote", "profile", "stretch", "refine")
#: a central crop of radius r conditions the generator only for particles of radius >= r + this (Å)
CROP_MIN_GAP_ANGSTROM = 2.0


@dataclass(frozen=True)
class GenConfig:
    """Hyper-parameters of a crystal generator (all sizes counts; lr per step)."""

    process: str = "diffcsp"
    hidden: int = 64
    layers: int = 3
    n_freq: int = 6
    steps: int = 100
    sigma_min: float = 0.005
    sigma_max: float = 0.5
    train_steps: int = 3000
    batch: int = 32
    lr: float = 1e-3
    seed: int = 0
    n_samples: int = 1
    sampler: str = "sde"
    lattice_param: str = "eps"
    step_lr: float = 1e-5
    lattice_weight: float = 1.0
    read_rule: str = "plateau"
    pair_readout: bool = False
    balance_classes: bool = False
    mid_t_fraction: float = 0.0
    min_pair_angstrom: float = 0.0
    sample_steps: int = 0
    z_candidates: str = "head"
    rank: str = "vote"
    refine_top: int = 2
    refine_evals: int = 200
    refine_screen_evals: int = 0
    refine_coord_starts: int = 0
    refine_shape_starts: tuple[float, ...] = ()
    symmetric_margin: float = 0.0
    symmetric_margin_rel: float = 0.0
    symmetric_margin_per_angstrom: float = 0.0
    anneal_slope: float = 0.0
    type_known_fraction: float = 0.5
    ld_steps_per_level: int = 1
    spacegroups: tuple[int, ...] = ()
    spacegroup_drop_fraction: float = 0.1
    crop_radii_angstrom: tuple[float, ...] = ()
    crop_max_noise_angstrom: float | None = None

    def __post_init__(self) -> None:
        # a JSON list becomes a tuple, so that the frozen config stays hashable
        object.__setattr__(self, "spacegroups", tuple(int(g) for g in self.spacegroups))
        if not all(1 <= g <= 230 for g in self.spacegroups) or len(set(self.spacegroups)) != len(self.spacegroups):
            raise C2NPInputError(f"spacegroups must be distinct space-group numbers 1-230, got {self.spacegroups}")
        object.__setattr__(self, "crop_radii_angstrom", tuple(float(r) for r in self.crop_radii_angstrom))
        if not all(r > 0.0 for r in self.crop_radii_angstrom) or \
                len(set(self.crop_radii_angstrom)) != len(self.crop_radii_angstrom):
            raise C2NPInputError(f"crop_radii_angstrom must be distinct radii > 0 Å, got {self.crop_radii_angstrom}")
        if self.crop_max_noise_angstrom is not None and not self.crop_max_noise_angstrom >= 0.0:
            raise C2NPInputError(f"crop_max_noise_angstrom must be >= 0 Å or None (no limit), "
                                 f"got {self.crop_max_noise_angstrom!r}")
        if not 0.0 <= self.spacegroup_drop_fraction < 1.0:
            raise C2NPInputError(f"spacegroup_drop_fraction must be in [0, 1), got {self.spacegroup_drop_fraction!r}")
        if self.ld_steps_per_level < 1:
            raise C2NPInputError(f"ld_steps_per_level must be >= 1, got {self.ld_steps_per_level}")
        if self.process == "cdvae" and self.steps < 2:
            raise C2NPInputError(f"process 'cdvae' needs steps >= 2 noise levels, got {self.steps}")
        if not 0.0 <= self.type_known_fraction <= 1.0:
            raise C2NPInputError(f"type_known_fraction must be in [0, 1], got {self.type_known_fraction!r}")
        if not self.anneal_slope >= 0.0:
            raise C2NPInputError(f"anneal_slope must be >= 0, got {self.anneal_slope!r}")
        if self.z_candidates not in Z_CANDIDATES:
            raise C2NPInputError(f"z_candidates must be one of {list(Z_CANDIDATES)}, got {self.z_candidates!r}")
        if self.rank not in RANK_RULES:
            raise C2NPInputError(f"rank must be one of {list(RANK_RULES)}, got {self.rank!r}")
        if self.refine_top < 0 or self.refine_evals < 1:
            raise C2NPInputError(f"refine_top must be >= 0 and refine_evals >= 1, got {self.refine_top}, "
                                 f"{self.refine_evals}")
        if self.refine_screen_evals < 0:
            raise C2NPInputError(f"refine_screen_evals must be >= 0 (0: no screening), got {self.refine_screen_evals}")
        if self.refine_coord_starts < 0:
            raise C2NPInputError(f"refine_coord_starts must be >= 0, got {self.refine_coord_starts}")
        # a JSON list becomes a tuple, so that the frozen config stays hashable
        object.__setattr__(self, "refine_shape_starts", tuple(float(t) for t in self.refine_shape_starts))
        if not all(0.0 < t < 1.0 for t in self.refine_shape_starts):
            raise C2NPInputError(f"refine_shape_starts must be amplitudes in (0, 1), got {self.refine_shape_starts}")
        if not 0.0 <= self.mid_t_fraction <= 1.0:
            raise C2NPInputError(f"mid_t_fraction must be in [0, 1], got {self.mid_t_fraction!r}")
        if self.sample_steps < 0:
            raise C2NPInputError(f"sample_steps must be >= 0 (0: the training steps), got {self.sample_steps}")
        if not self.min_pair_angstrom >= 0.0:
            raise C2NPInputError(f"min_pair_angstrom must be >= 0, got {self.min_pair_angstrom!r}")
        margins = (self.symmetric_margin, self.symmetric_margin_rel, self.symmetric_margin_per_angstrom)
        if not all(m >= 0.0 for m in margins):
            raise C2NPInputError(f"symmetric_margin, symmetric_margin_rel and symmetric_margin_per_angstrom "
                                 f"must be >= 0, got {margins}")
        if self.sampler not in SAMPLERS:
            raise C2NPInputError(f"sampler must be one of {list(SAMPLERS)}, got {self.sampler!r}")
        if self.lattice_param not in ("eps", "x0"):
            raise C2NPInputError(f"lattice_param must be 'eps' or 'x0', got {self.lattice_param!r}")
        if self.read_rule not in READ_RULES:
            raise C2NPInputError(f"read_rule must be one of {list(READ_RULES)}, got {self.read_rule!r}")
        if self.n_samples < 1:
            raise C2NPInputError(f"n_samples must be >= 1, got {self.n_samples}")
        if self.process not in PROCESSES:
            raise C2NPInputError(f"process must be one of {list(PROCESSES)}, got {self.process!r}")


@dataclass(frozen=True, eq=False)
class CellExample:
    """One training pair: descriptor of a particle and the spglib standardized primitive cell
    of its material (lattice (3, 3) Å, frac (n, 3), slot of each atom (n,)), with the cell's
    space-group number (spglib on the slotted cell, as :func:`~c2np.models.cell_templates.template_of`;
    0: not known)."""

    descriptor: ParticleDescriptor
    lattice_angstrom: np.ndarray
    frac: np.ndarray
    slots: np.ndarray
    spacegroup: int = 0


def cell_example(descriptor: ParticleDescriptor, cell: UnitCell, *, symprec_angstrom: float = 1e-3
                 ) -> CellExample:
    """The training pair of a training cell (its standardized primitive cell, spglib)."""
    import spglib

    # spglib annotates the cell as nested Sequences; it takes (and documents) NumPy arrays
    std = spglib.standardize_cell(cell.to_spglib(), to_primitive=True, no_idealize=False,  # type: ignore[arg-type]
                                  symprec=symprec_angstrom)
    assert std is not None, f"{cell.material_id}: spglib could not standardize the cell"
    lat_raw, frac_raw, nums = std
    slot_by_z = {int(z): int(s) for z, s in zip(descriptor.numbers, descriptor.slot_of)}
    slots = np.array([slot_by_z.get(int(z), N_SLOTS - 1) for z in nums], dtype=np.int64)
    order = np.argsort(slots, kind="stable")
    lat = np.asarray(lat_raw, dtype=np.float64)
    frac = np.asarray(frac_raw, dtype=np.float64)[order] % 1.0
    slots = slots[order]
    ds = spglib.get_symmetry_dataset((lat, frac, slots + 1), symprec=symprec_angstrom)  # type: ignore[arg-type]
    return CellExample(descriptor, lat, frac, slots, int(ds.number) if ds is not None else 0)


def training_pairs(task: ForwardTask, *, seed: int = 0, noisy_copies: int = 0,
                   max_noise_angstrom: float = 0.06) -> list[CellExample]:
    """The generator's training pairs from a task's training examples (one rotation per
    (material, R); under protocol ``strict`` never a held-out material, checked here).

    Per training particle: (1) as stored; (2) the training cell re-carved about a random
    centre (same R and rotation) with isotropic Gaussian noise of a sigma uniform in
    [0, ``max_noise_angstrom``]; (3) ``noisy_copies`` copies of the stored particle with
    noise of a sigma uniform in [0.01, ``max_noise_angstrom``]. This is augmentation of the
    *training* data (the carve here makes inputs, never a generated answer). Seeded by
    ``numpy.random.default_rng(seed)``."""
    from c2np.carving import carve

    held = set(task.heldout_materials)
    rng = np.random.default_rng(seed)
    out = []
    for q, part in task.training_examples(rotations_per_group=1):
        if q.cell.material_id in held:
            raise C2NPInputError(f"{q.cell.material_id}: a held-out material among the training examples")
        rc = carve(q.cell, q.radius_angstrom, centre_frac=rng.random(3), quaternion=q.quaternion).particle
        out.append(cell_example(describe(part), q.cell))
        pos = rc.positions_angstrom + rng.normal(scale=rng.uniform(0, max_noise_angstrom),
                                                 size=rc.positions_angstrom.shape)
        out.append(cell_example(describe(Particle(rc.numbers, pos)), q.cell))
        for _ in range(noisy_copies):
            pos = part.positions_angstrom + rng.normal(scale=rng.uniform(0.01, max_noise_angstrom),
                                                       size=part.positions_angstrom.shape)
            out.append(cell_example(describe(Particle(part.numbers, pos)), q.cell))
    return out


def build_templates(task: ForwardTask) -> list[CellTemplate]:
    """The distinct templates of a ForwardTask's training cells (one per training material,
    its first training example giving the slot of each species; under protocol ``strict``
    never a held-out material, checked)."""
    held = set(task.heldout_materials)
    seen: set[str] = set()
    found = []
    for q, part in task.training_examples(rotations_per_group=1):
        mid = q.cell.material_id
        if mid in held:
            raise C2NPInputError(f"{mid}: a held-out material among the training examples")
        if mid in seen:
            continue
        seen.add(mid)
        ex = cell_example(describe(part), q.cell)
        found.append(template_of(ex.lattice_angstrom, ex.frac, ex.slots, mid))
    return merge_templates(found)


def _composition_key(slots: np.ndarray) -> tuple[int, ...]:
    return tuple(int(np.sum(slots == k)) for k in range(N_SLOTS))


class _EdgeMLP(nn.Module):
    """The edge MLP of :class:`Denoiser`: Linear-SiLU-Linear on [h_i, h_j, e_ij], with the
    first layer split by input so the node parts are computed per node, not per edge."""

    def __init__(self, h: int, n_edge: int) -> None:
        super().__init__()
        self.src = nn.Linear(h, h, bias=False)
        self.dst = nn.Linear(h, h, bias=False)
        self.edge = nn.Linear(n_edge, h)
        self.out = nn.Linear(h, h)

    def forward(self, h: Tensor, e: Tensor) -> Tensor:
        """h (B,N,H) nodes, e (B,N,N,E) edges -> (B,N,N,H) messages (i receives from j)."""
        x = self.src(h)[:, :, None, :] + self.dst(h)[:, None, :, :] + self.edge(e)
        return self.out(nn.functional.silu(x))


class Denoiser(nn.Module):
    """CSPNet-like network on padded cells: (lattice (B,3,3), frac (B,N,3), slot (B,N),
    mask (B,N), time (B,), condition (B,H)) -> (lattice output (B,3,3), frac output (B,N,3),
    slot logits (B,N,N_SLOTS) or None). Only ``process="mattergen"`` has a slot head, and a
    mask token (slot index ``N_SLOTS``) for its absorbing type process."""

    def __init__(self, cfg: GenConfig, n_desc: int) -> None:
        super().__init__()
        h = cfg.hidden
        self.n_freq = cfg.n_freq
        self.cond = MLP(n_desc, h, h, 2)
        self.typed = cfg.process == "mattergen"
        self.slot = nn.Embedding(N_SLOTS + 1 if self.typed else N_SLOTS, h)
        self.time = nn.Linear(h, h)
        self.edge = nn.ModuleList([_EdgeMLP(h, 9 + 6 * cfg.n_freq) for _ in range(cfg.layers)])
        self.node = nn.ModuleList([MLP(2 * h, h, h, 2) for _ in range(cfg.layers)])
        self.norm = nn.ModuleList([nn.LayerNorm(h) for _ in range(cfg.layers)])
        self.out_f = nn.Linear(h, 3)
        self.out_l = MLP(2 * h + 9, h, 9, 2)
        self.n_pair_freq = min(cfg.n_freq, 3) if cfg.pair_readout else 0
        if self.n_pair_freq:
            self.pair_f = nn.Linear(h, 3 * self.n_pair_freq)
        if self.typed:
            self.out_type = nn.Linear(h, N_SLOTS)

    def trunk(self, x_l: Tensor, f: Tensor, slot: Tensor, mask: Tensor, t_emb: Tensor, cond: Tensor
              ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """The message-passing layers: (node states h (B,N,H), last messages (B,N,N,H), pair
        mask (B,N,N,1), degree (B,N,1), masked mean of h (B,H), condition + time (B,H))."""
        B, N = slot.shape
        c = cond + self.time(t_emb)
        h = self.slot(slot) + c[:, None, :]
        gram = (x_l @ x_l.transpose(1, 2)).reshape(B, 1, 1, 9).expand(B, N, N, 9)
        four = periodic_features(f[:, None, :, :] - f[:, :, None, :], self.n_freq)
        e = torch.cat([gram, four], dim=-1)
        pm = (mask[:, :, None] & mask[:, None, :]).float()[..., None]
        deg = pm.sum(dim=2).clamp(min=1.0)
        m = h.new_zeros(B, N, N, h.shape[-1])
        for edge, node, norm in zip(self.edge, self.node, self.norm):
            m = edge(h, e) * pm
            h = norm(h + node(torch.cat([h, m.sum(dim=2) / deg], dim=-1))) * mask[..., None].float()
        pooled = (h * mask[..., None].float()).sum(1) / mask.float().sum(1, keepdim=True).clamp(min=1)
        return h, m, pm, deg, pooled, c

    def forward(self, x_l: Tensor, f: Tensor, slot: Tensor, mask: Tensor, t_emb: Tensor,
                cond: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        B, N = slot.shape
        h, m, pm, deg, pooled, c = self.trunk(x_l, f, slot, mask, t_emb, cond)
        out_l = self.out_l(torch.cat([pooled, c, x_l.reshape(B, 9)], dim=-1)).reshape(B, 3, 3)
        out_f = self.out_f(h)
        if self.n_pair_freq:
            # periodic pair readout: sum_j sum_k w_ijk (per component) * sin(2 pi k (f_j - f_i)),
            # equivariant to translations and permutations, periodic in every coordinate
            K = self.n_pair_freq
            k = torch.arange(1, K + 1, dtype=f.dtype, device=f.device) * (2 * math.pi)
            d = f[:, None, :, :] - f[:, :, None, :]                          # (B,N,N,3) f_j - f_i
            sin = torch.sin(d[..., None] * k)                                  # (B,N,N,3,K)
            w = self.pair_f(m).reshape(B, N, N, 3, K)
            out_f = out_f + (w * sin).sum(-1).mul(pm).sum(2) / deg
        return out_l, out_f, (self.out_type(h) if self.typed else None)


def _no_drift(u: Tensor, mask: Tensor) -> Tensor:
    """Fractional velocities (B, n, 3) less their mean over each cell's atoms (``mask`` (B, n)):
    FlowMM's tangent space of the torus modulo translations, where the conditional and the
    learned vector fields live (a translation of the whole cell is no change of crystal)."""
    m = mask[..., None].to(u.dtype)
    mean = (u * m).sum(dim=1, keepdim=True) / m.sum(dim=1, keepdim=True).clamp(min=1.0)
    return (u - mean) * m


def _wrapped_score(d: Tensor, sigma: Tensor, n_images: int = 3) -> Tensor:
    """sigma * d/dx log of the wrapped normal (period 1, std sigma) at displacement d."""
    k = torch.arange(-n_images, n_images + 1, dtype=d.dtype, device=d.device)
    x = d[..., None] + k
    s = sigma[..., None]
    w = torch.softmax(-(x ** 2) / (2 * s ** 2), dim=-1)
    return (-(x / s ** 2) * w).sum(-1) * sigma


class CrystalGenerator(nn.Module):
    """A task-2 crystal generator (see the module docstring). Call :meth:`fit` to train,
    :meth:`predict_descriptors` to answer."""

    # buffers registered in __init__ (declared for the type checker; nn.Module.__getattr__ is untyped)
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

    def __init__(self, cfg: GenConfig, n_desc: int, compositions: Sequence[tuple[int, ...]],
                 desc_mean: np.ndarray, desc_std: np.ndarray, lat_mean: np.ndarray, lat_std: float,
                 limit_density: float = 1.0, lattice_stats: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.compositions = [tuple(int(x) for x in c) for c in compositions]
        self.templates: list[CellTemplate] = []     # space-group templates (z_candidates="templates")
        # adit generates latents with its own transformers; the denoiser only conditions (no layers)
        self.net = Denoiser(replace(cfg, layers=0, pair_readout=False) if cfg.process == "adit" else cfg, n_desc)
        self.train_progress = 0.0           # share of the training run done (set by fit; adit's stages)
        self.comp_head = MLP(cfg.hidden, cfg.hidden, len(self.compositions), 2)
        if cfg.spacegroups:                 # DiffCSP++-style space-group condition; row 0: not given
            self.sg_embed = nn.Embedding(len(cfg.spacegroups) + 1, cfg.hidden)
            nn.init.zeros_(self.sg_embed.weight)    # starts as the unconditioned network (warm starts)
        self.register_buffer("desc_mean", torch.as_tensor(desc_mean, dtype=torch.float32))
        self.register_buffer("desc_std", torch.as_tensor(desc_std, dtype=torch.float32))
        self.register_buffer("lat_mean", torch.as_tensor(lat_mean, dtype=torch.float32).reshape(3, 3))
        self.register_buffer("lat_std", torch.tensor(float(lat_std), dtype=torch.float32))
        ab, sig = _schedule(cfg, cfg.steps)
        self.register_buffer("alpha_bar", ab)
        self.register_buffer("sigma", sig)
        if cfg.process == "mattergen":      # atoms per s^3 of the training cells (the lattice limit)
            self.register_buffer("limit_density", torch.tensor(float(limit_density), dtype=torch.float32))
        if cfg.process == "cdvae":          # the encoder, the latent and the lattice head
            h = cfg.hidden
            self.encoder = Denoiser(replace(cfg, layers=min(cfg.layers, 2), pair_readout=False), n_desc)
            self.fc_mu, self.fc_logvar, self.z_proj = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
            self.lattice_head = MLP(2 * h + len(self.compositions), h, 6, 2)
            self.register_buffer("cd_sigmas", cdp.noise_levels(cfg.steps))
        if cfg.process == "adit":           # the autoencoder (first stage) and the latent DiT (second)
            self.ae = adp.LatentAutoencoder(cfg.hidden, max(cfg.layers // 2, 1), cfg.n_freq, N_SLOTS)
            self.dit = adp.LatentDiT(cfg.hidden, cfg.layers, N_SLOTS)
        if cfg.process in ("cdvae", "adit"):    # standardisation of the six lattice parameters
            mean, std = lattice_stats if lattice_stats is not None else (np.zeros(6), np.ones(6))
            self.register_buffer("lp_mean", torch.as_tensor(mean, dtype=torch.float32).reshape(6))
            self.register_buffer("lp_std", torch.as_tensor(std, dtype=torch.float32).reshape(6))

    # --- features ----------------------------------------------------------------------
    @staticmethod
    def features(descs: Sequence[ParticleDescriptor]) -> np.ndarray:
        """(B, n_desc) float32 raw descriptor vectors (log1p histograms, fractions, log s)."""
        v = np.stack([d.vector for d in descs])
        n_hist = v.shape[1] - N_SLOTS - 1
        v[:, :n_hist] = np.log1p(np.maximum(v[:, :n_hist], 0.0))
        return v

    def _cond(self, feats: Tensor) -> Tensor:
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

    def _temb(self, t: Tensor) -> Tensor:
        scale = 1.0 / self.cfg.steps if self.cfg.process == "diffcsp" else 1.0
        return sinusoidal_embedding(t.float() * scale, self.cfg.hidden)

    # --- training ----------------------------------------------------------------------
    def loss(self, feats: Tensor, x_l0: Tensor, f0: Tensor, slot: Tensor, mask: Tensor, comp: Tensor,
             g: torch.Generator, sg_index: Tensor | None = None) -> tuple[Tensor, dict[str, float]]:
        """Loss of one batch (lattice in normalised units, frac in [0, 1)); ``sg_index`` (B,):
        the space-group condition rows (:meth:`spacegroup_index`) of a conditioned generator."""
        B = feats.shape[0]
        cond = self._cond(feats)
        comp_loss = nn.functional.cross_entropy(self.comp_head(cond), comp)   # never told the group
        cond = self._with_spacegroup(cond, sg_index)
        if self.cfg.process in ("mattergen", "cdvae", "adit"):
            if self.cfg.process == "mattergen":
                total, parts = self._mattergen_loss(x_l0, f0, slot, mask, cond, g)
            elif self.cfg.process == "cdvae":
                total, parts = self._cdvae_loss(x_l0, f0, slot, mask, comp, cond, g)
            else:
                total, parts = self._adit_loss(x_l0, f0, slot, mask, cond, g)
            total = total + comp_loss
            return total, {"loss": total.item(), **parts, "comp": comp_loss.item()}
        eps_l = torch.randn(x_l0.shape, generator=g)
        if self.cfg.process == "diffcsp":
            t = torch.randint(1, self.cfg.steps + 1, (B,), generator=g)
            if self.cfg.mid_t_fraction > 0:     # emphasise the site-assignment regime (0.5 T, 0.9 T]
                lo, hi = self.cfg.steps // 2, (9 * self.cfg.steps) // 10
                mid = torch.randint(lo + 1, hi + 1, (B,), generator=g)
                pick = torch.rand(B, generator=g) < self.cfg.mid_t_fraction
                t = torch.where(pick, mid, t)
            ab = self.alpha_bar[t][:, None, None]
            x_lt = ab.sqrt() * x_l0 + (1 - ab).sqrt() * eps_l
            sig = self.sigma[t][:, None, None].expand_as(f0)
            noise = torch.randn(f0.shape, generator=g) * sig
            ft = (f0 + noise) % 1.0
            target_f = _wrapped_score(noise, sig)
            target_l = eps_l if self.cfg.lattice_param == "eps" else x_l0
            temb = self._temb(t)
        else:
            tt = torch.rand(B, generator=g)
            x_lt = (1 - tt)[:, None, None] * eps_l + tt[:, None, None] * x_l0
            fb = torch.rand(f0.shape, generator=g)
            d = (f0 - fb + 0.5) % 1.0 - 0.5
            ft = (fb + tt[:, None, None] * d) % 1.0
            target_f, target_l = _no_drift(d, mask), x_l0 - eps_l
            temb = self._temb(tt)
        out_l, out_f, _ = self.net(x_lt, ft, slot, mask, temb, cond)
        if self.cfg.process == "flowmm":
            out_f = _no_drift(out_f, mask)
        m = mask[..., None].float()
        lf = (((out_f - target_f) ** 2) * m).sum() / (3 * m.sum())
        ll = ((out_l - target_l) ** 2).mean()
        total = self.cfg.lattice_weight * ll + lf + comp_loss
        return total, {"loss": total.item(), "lattice": ll.item(), "frac": lf.item(), "comp": comp_loss.item()}

    def _standard_lattice_parameters(self, lattice: Tensor, n_atoms: Tensor) -> Tensor:
        """(B, 6) standardised lattice parameters (lengths / ``n^(1/3)``, angles) of lattices
        (B,3,3) in units of s with ``n_atoms`` (B,) atoms; :meth:`_lattice_from_standard` inverts."""
        return (cdp.scaled_lattice_parameters(lattice, n_atoms) - self.lp_mean) / self.lp_std

    def _lattice_from_standard(self, pred: Tensor, n_atoms: Tensor) -> Tensor:
        """Lattices (B,3,3) in units of s from standardised parameters (B,6) of cells of
        ``n_atoms`` (B,) atoms (lengths scaled by ``n^(1/3)``, CDVAE's ``scale_length``)."""
        return cdp.lattice_from_scaled_parameters(pred * self.lp_std + self.lp_mean, n_atoms)

    def _adit_loss(self, x_l0: Tensor, f0: Tensor, slot: Tensor, mask: Tensor, cond: Tensor,
                   g: torch.Generator) -> tuple[Tensor, dict[str, float]]:
        """ADiT's losses of one batch, by stage (``train_progress`` below
        :data:`~c2np.models.adit_process.AE_FRACTION`: the autoencoder's reconstruction and KL;
        after: the latent diffusion's, the autoencoder frozen). Cells keep spglib's standard origin
        (ADiT translates them at random; see :mod:`c2np.models.adit_process`)."""
        B = x_l0.shape[0]
        n = mask.sum(1)
        lp = self._standard_lattice_parameters(x_l0, n)
        if self.train_progress < adp.AE_FRACTION:
            mu, logvar = self.ae.encode(f0, lp, slot, mask)
            frac, lp_pred = self.ae.decode(cdp.reparameterize(mu, logvar, g), slot, mask)
            m = mask[..., None].float()
            lf = (adp.wrapped_sq_error(frac, f0) * m).sum() / (3 * m.sum())
            ll = ((lp_pred - lp) ** 2).mean()
            kl = cdp.kl_divergence(mu, logvar, mask)
            total = adp.FRAC_WEIGHT * lf + self.cfg.lattice_weight * ll + adp.KL_WEIGHT * kl
            return total, {"lattice": ll.item(), "frac": lf.item(), "kl": kl.item()}
        with torch.no_grad():
            x1 = cdp.reparameterize(*self.ae.encode(f0, lp, slot, mask), g)
        t = torch.rand(B, generator=g)
        pred = self.dit(adp.interpolate(x1, t, g), slot, mask, self._temb(t), cond)
        lz = adp.latent_loss(pred, x1, t, mask)
        return lz, {"latent": lz.item()}

    @torch.no_grad()
    def _adit_sample(self, cond: Tensor, slot: Tensor, mask: Tensor, g: torch.Generator,
                     template: CellTemplate | None) -> tuple[Tensor, Tensor]:
        """ADiT's generation: latents from N(0, I) by ``steps`` Euler steps of the interpolant's
        ODE, decoded; with a template the decoded cell is projected onto its symmetry."""
        B, N = slot.shape
        x = torch.randn(B, N, adp.LATENT_DIM, generator=g)
        K = self.cfg.steps
        for k in range(K):
            t = k / K
            pred = self.dit(x, slot, mask, self._temb(torch.full((B,), t)), cond)
            x = adp.euler_step(x, pred, t, 1.0 / K)
        frac, lp = self.ae.decode(x, slot, mask)
        x_l, f = self._lattice_from_standard(lp, mask.sum(1)), frac % 1.0
        if template is not None:
            for _ in range(3):
                x_l, f = self.project(x_l, f, template)
        return x_l, f

    def _cdvae_latent(self, cond: Tensor, z: Tensor, comp: Tensor) -> tuple[Tensor, Tensor]:
        """The decoder's condition (particle + latent, (B,H)) and the standardised lattice
        parameters (B, 6) regressed from it and the composition index ``comp`` (B,; -1: none)."""
        zc = cond + self.z_proj(z)
        onehot = nn.functional.one_hot(comp.clamp(min=0), len(self.compositions)).to(zc.dtype)
        onehot = onehot * (comp >= 0)[:, None].to(zc.dtype)
        return zc, self.lattice_head(torch.cat([zc, z, onehot], dim=-1))

    def _cdvae_loss(self, x_l0: Tensor, f0: Tensor, slot: Tensor, mask: Tensor, comp: Tensor, cond: Tensor,
                    g: torch.Generator) -> tuple[Tensor, dict[str, float]]:
        """CDVAE's losses of one batch (the lattice in units of s): the latent's KL divergence
        (weight :data:`~c2np.models.cdvae_process.KL_WEIGHT`), the lattice parameters' squared
        error (standardised; weight ``lattice_weight``) and the coordinate score's (the minimum
        image displacement noisy -> clean over sigma, Cartesian); the decoder sees the true
        lattice (CDVAE's teacher forcing, kept for the whole run)."""
        B = x_l0.shape[0]
        n = mask.sum(1).float()
        _, _, _, _, pooled, _ = self.encoder.trunk(x_l0, f0, slot, mask, self._temb(torch.zeros(B)), cond)
        mu, logvar = self.fc_mu(pooled), self.fc_logvar(pooled).clamp(-10.0, 10.0)
        z = cdp.reparameterize(mu, logvar, g)
        zc, pred_lp = self._cdvae_latent(cond, z, comp)
        ll = ((pred_lp - self._standard_lattice_parameters(x_l0, n)) ** 2).mean()
        sig = self.cd_sigmas[torch.randint(0, len(self.cd_sigmas), (B,), generator=g)]
        ft = cdp.perturb(f0, x_l0, sig, g)
        target = cdp.min_image_displacement(ft, f0, x_l0) / sig[:, None, None]
        _, out_f, _ = self.net(x_l0, ft, slot, mask, self._temb(cdp.level_time(sig)), zc)
        m = mask[..., None].float()
        lf = ((((out_f @ x_l0) - target) ** 2) * m).sum() / (3 * m.sum())
        kl = cdp.kl_divergence(mu, logvar)
        total = self.cfg.lattice_weight * ll + lf + cdp.KL_WEIGHT * kl
        return total, {"lattice": ll.item(), "frac": lf.item(), "kl": kl.item()}

    @torch.no_grad()
    def _cdvae_sample(self, cond: Tensor, comps: Sequence[tuple[int, ...]], slot: Tensor, mask: Tensor,
                      g: torch.Generator, template: CellTemplate | None) -> tuple[Tensor, Tensor]:
        """CDVAE's generation: ``z ~ N(0, I)``, the lattice from the head (projected onto the
        template's metric symmetry), uniform coordinates, then annealed Langevin dynamics over
        the ``steps`` noise levels (``ld_steps_per_level`` steps each; projected onto the
        template after every step)."""
        B, N = slot.shape
        z = torch.randn(B, self.cfg.hidden, generator=g)
        idx = torch.as_tensor([self.compositions.index(tuple(c)) if tuple(c) in self.compositions else -1
                               for c in comps], dtype=torch.long)
        zc, pred_lp = self._cdvae_latent(cond, z, idx)
        x_l = self._lattice_from_standard(pred_lp, mask.sum(1))
        f = torch.rand(B, N, 3, generator=g)
        if template is not None:
            for _ in range(3):
                x_l, f = self.project(x_l, f, template)
        for sigma in self.cd_sigmas:
            temb = self._temb(cdp.level_time(sigma.expand(B)))
            for _ in range(self.cfg.ld_steps_per_level):
                _, out_f, _ = self.net(x_l, f, slot, mask, temb, zc)
                f = cdp.langevin_step(f, out_f @ x_l, x_l, float(sigma), g)
                if template is not None:
                    x_l, f = self.project(x_l, f, template)
        return x_l, f

    def stage_progress(self) -> float:
        """Progress (0-1) within the current training stage, for the learning-rate schedule:
        ``train_progress`` itself, except for adit, whose two stages each get a whole schedule."""
        p, f = self.train_progress, adp.AE_FRACTION
        if self.cfg.process != "adit":
            return p
        return p / f if p < f else (p - f) / (1.0 - f)

    def _limit(self, n_atoms: Tensor) -> tuple[Tensor, Tensor]:
        """MatterGen's lattice limit (normalised mean (B,3,3), std (B,)) for cells of ``n_atoms``."""
        return mgp.limit_mean_std(n_atoms, float(self.limit_density), self.lat_mean, float(self.lat_std))

    def _mattergen_loss(self, x_l0: Tensor, f0: Tensor, slot: Tensor, mask: Tensor, cond: Tensor,
                        g: torch.Generator) -> tuple[Tensor, dict[str, float]]:
        """MatterGen's denoising losses of one batch: the lattice noise (symmetric; or, with
        ``lattice_param="x0"``, the clean lattice), the wrapped-normal coordinate score (times
        sigma) and the cross-entropy of the masked atoms' slots."""
        B = x_l0.shape[0]
        n = mask.sum(1).float()
        t = mgp.T_EPS + (1.0 - mgp.T_EPS) * torch.rand(B, generator=g)
        a = mgp.mean_coeff(t)[:, None, None]
        mean_n, std_n = self._limit(n)
        z = mgp.symmetric_noise((B, 3, 3), g)
        x_lt = a * x_l0 + (1 - a) * mean_n + (1 - a ** 2).sqrt() * std_n[:, None, None] * z
        sig = mgp.coord_sigma(t, n)[:, None, None].expand_as(f0)
        noise = torch.randn(f0.shape, generator=g) * sig
        ft = (f0 + noise) % 1.0
        known = torch.rand(B, generator=g) < self.cfg.type_known_fraction
        slot_t, masked = mgp.mask_types(slot, mask, t, N_SLOTS, known, g)
        out_l, out_f, logits = self.net(x_lt, ft, slot_t, mask, self._temb(t), cond)
        assert logits is not None
        m = mask[..., None].float()
        lf = (((out_f - _wrapped_score(noise, sig)) ** 2) * m).sum() / (3 * m.sum())
        ll = ((mgp.symmetrize(out_l) - (z if self.cfg.lattice_param == "eps" else x_l0)) ** 2).mean()
        lt = (nn.functional.cross_entropy(logits[masked], slot[masked]) if bool(masked.any())
              else logits.sum() * 0.0)
        total = self.cfg.lattice_weight * ll + lf + lt
        return total, {"lattice": ll.item(), "frac": lf.item(), "types": lt.item()}

    @torch.no_grad()
    def _mattergen_sample(self, cond: Tensor, comps: Sequence[tuple[int, ...]], slot: Tensor, mask: Tensor,
                          g: torch.Generator, template: CellTemplate | None) -> tuple[Tensor, Tensor, Tensor]:
        """MatterGen's reverse process (``sample_steps`` or else ``steps`` times from 1 to
        :data:`~c2np.models.mattergen_process.T_EPS`): the lattice from its atom-count limit, the
        coordinates from the wrapped prior, the slots from all masked (revealed within the
        composition) unless a template gives them or the model was trained with every type
        given (``type_known_fraction`` 1)."""
        B, N = slot.shape
        n = mask.sum(1).float()
        mean_n, std_n = self._limit(n)
        x_l = mean_n + std_n[:, None, None] * mgp.symmetric_noise((B, 3, 3), g)
        f = (torch.randn(B, N, 3, generator=g) * mgp.coord_sigma(torch.ones(B), n)[:, None, None]) % 1.0
        budget = torch.as_tensor(np.array([list(c) + [0] * (N_SLOTS - len(c)) for c in comps]), dtype=torch.long)
        gen_types = template is None and self.cfg.type_known_fraction < 1.0
        if gen_types:
            slot = torch.where(mask, torch.full_like(slot, N_SLOTS), slot)
        if template is not None:
            for _ in range(3):
                x_l, f = self.project(x_l, f, template)
        K = self.cfg.sample_steps or self.cfg.steps
        times = mgp.T_EPS + (1.0 - mgp.T_EPS) * torch.arange(K + 1, dtype=torch.float32) / K
        for k in range(K, 0, -1):
            t, t_prev, last = times[k], times[k - 1], k == 1
            tb = torch.full((B,), float(t))
            out_l, out_f, logits = self.net(x_l, f, slot, mask, self._temb(tb), cond)
            x_l = self._mattergen_lattice_step(x_l, out_l, mean_n, std_n, t, t_prev, last, g)
            # the corrector's time: one grid step before t (as a difference, to keep float32 rounding)
            t_corr = tb - (1.0 - mgp.T_EPS) / K
            f = self._mattergen_coord_step(f, out_f, x_l, slot, mask, cond, n, (t, t_prev, t_corr), last, g)
            if gen_types:
                assert logits is not None
                p_reveal = 1.0 if last else float(t - t_prev) / float(t)
                slot = mgp.unmask_types(slot, logits, budget, p_reveal, N_SLOTS, g)
            if template is not None:
                x_l, f = self.project(x_l, f, template)
        return x_l, f, slot

    def _mattergen_lattice_step(self, x_l: Tensor, out_l: Tensor, mean_n: Tensor, std_n: Tensor, t: Tensor,
                                t_prev: Tensor, last: bool, g: torch.Generator) -> Tensor:
        """One reverse lattice step from ``t`` to ``t_prev``: MatterGen's ancestral step (the DDPM
        posterior; the last step goes to t = 0, the clean lattice's posterior mean) for
        ``sampler="pc"``, else Euler–Maruyama on the reverse VP SDE."""
        a = mgp.mean_coeff(t)
        std_n = std_n[:, None, None]
        std_l = (1 - a ** 2).sqrt() * std_n
        if self.cfg.lattice_param == "eps":
            score = -mgp.symmetrize(out_l) / std_l
        else:                           # the clean lattice predicted: the score of its Gaussian
            score = -(x_l - a * mgp.symmetrize(out_l) - (1 - a) * mean_n) / std_l ** 2
        if self.cfg.sampler == "pc":
            a_p = mgp.mean_coeff(torch.tensor(0.0) if last else t_prev)
            ab, ab_p = a ** 2, a_p ** 2
            y0 = ((x_l - mean_n) + std_l ** 2 * score) / a     # E[x0 - m | x_t] (Tweedie)
            y = (a_p * (1 - ab / ab_p) / (1 - ab)) * y0 + ((a / a_p) * (1 - ab_p) / (1 - ab)) * (x_l - mean_n)
            if last:
                return mean_n + y
            var = (1 - ab_p) / (1 - ab) * (1 - ab / ab_p)
            return mean_n + y + var.sqrt() * std_n * mgp.symmetric_noise(tuple(x_l.shape), g)
        bt, dt = mgp.beta(t), float(t - t_prev)
        g2 = bt * std_n ** 2
        x_l = x_l + (0.5 * bt * (x_l - mean_n) + g2 * score) * dt
        return x_l if last else x_l + (g2 * dt).sqrt() * mgp.symmetric_noise(tuple(x_l.shape), g)

    def _mattergen_coord_step(self, f: Tensor, out_f: Tensor, x_l: Tensor, slot: Tensor, mask: Tensor,
                              cond: Tensor, n: Tensor, times: tuple[Tensor, Tensor, Tensor], last: bool,
                              g: torch.Generator) -> Tensor:
        """One reverse coordinate step from ``t`` to ``t_prev`` (``times`` = (t, t_prev, the
        corrector's time (B,) = t_prev)), wrapped into [0, 1): MatterGen's wrapped ancestral
        predictor and one Langevin corrector step at ``t_prev`` for ``sampler="pc"`` (the last
        step to sigma 0: noise removal), else Euler–Maruyama."""
        t, t_prev, t_corr = times
        B = f.shape[0]
        sig = mgp.coord_sigma(torch.full((B,), float(t)), n)[:, None, None]
        score = out_f / sig
        if self.cfg.sampler == "pc":
            if last:
                return (f + sig ** 2 * score) % 1.0
            sig_p = mgp.coord_sigma(torch.full((B,), float(t_prev)), n)[:, None, None]
            f = f + (sig ** 2 - sig_p ** 2) * score
            f = f + (sig_p ** 2 * (sig ** 2 - sig_p ** 2) / sig ** 2).sqrt() * torch.randn(f.shape, generator=g)
            return self._langevin_coords(f % 1.0, x_l, slot, mask, t_corr, sig_p, cond, g) % 1.0
        g2 = 2.0 * sig ** 2 * math.log(mgp.COORD_SIGMA_MAX / mgp.COORD_SIGMA_MIN)
        dt = float(t - t_prev)
        f = f + g2 * score * dt
        return (f if last else f + (g2 * dt).sqrt() * torch.randn(f.shape, generator=g)) % 1.0

    def _langevin_coords(self, f: Tensor, x_l: Tensor, slot: Tensor, mask: Tensor, t: Tensor, sig: Tensor,
                         cond: Tensor, g: torch.Generator) -> Tensor:
        """One Langevin corrector step on the coordinates at time ``t`` (B,) and noise ``sig``
        (B,1,1), MatterGen's step size ``2 (snr |z| / |score|)^2`` per cell
        (:data:`~c2np.models.mattergen_process.LANGEVIN_SNR`)."""
        _, out_f, _ = self.net(x_l, f, slot, mask, self._temb(t), cond)
        m = mask[..., None].to(f.dtype)
        score = out_f / sig * m
        z = torch.randn(f.shape, generator=g) * m
        ratio = z.flatten(1).norm(dim=1) / score.flatten(1).norm(dim=1).clamp(min=1e-12)
        step = (2.0 * (mgp.LANGEVIN_SNR * ratio) ** 2)[:, None, None]
        return f + step * score + (2.0 * step).sqrt() * z

    # --- sampling ----------------------------------------------------------------------
    @torch.no_grad()
    def composition_logits(self, feats: Tensor) -> Tensor:
        """(B, n_compositions) count-head logits over ``self.compositions`` per row."""
        return self.comp_head(self._cond(feats))

    def predict_compositions(self, feats: Tensor) -> list[tuple[int, ...]]:
        """The most probable cell composition (atoms per slot) of each row."""
        return [self.compositions[i] for i in self.composition_logits(feats).argmax(-1).tolist()]

    @torch.no_grad()
    def sample(self, feats: Tensor, comps: Sequence[tuple[int, ...]], g: torch.Generator,
               template: CellTemplate | None = None) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """One generated cell per row of the given compositions: (normalised lattice (3,3),
        frac (n,3), slots (n,)). With a ``template`` (every row of its composition) the cell
        is projected onto the template's symmetric subspace at the start and after every
        reverse step (:meth:`project`); a space-group conditioned generator is also told the
        template's group (without a template: the "not given" row)."""
        B = feats.shape[0]
        cond = self._cond(feats)
        if self.cfg.spacegroups:
            k = self.spacegroup_index(template.spacegroup) if template is not None else 0
            cond = self._with_spacegroup(cond, torch.full((B,), k, dtype=torch.long))
        N = max(sum(c) for c in comps)
        slot = torch.zeros(B, N, dtype=torch.long)
        mask = torch.zeros(B, N, dtype=torch.bool)
        for b, c in enumerate(comps):
            s = np.repeat(np.arange(N_SLOTS), c)
            slot[b, : len(s)] = torch.as_tensor(s)
            mask[b, : len(s)] = True
        x_l = torch.randn(B, 3, 3, generator=g)
        f = torch.rand(B, N, 3, generator=g)
        if template is not None:
            if any(tuple(c) != template.composition for c in comps) or not np.array_equal(
                    template.slots, slot[0].numpy()):
                raise C2NPInputError("sample: a template needs every row of its composition, slots sorted")
            if self.cfg.process not in ("mattergen", "cdvae", "adit"):     # these project their own
                for _ in range(3):          # uniform start: a few passes make the wrapped average exact
                    x_l, f = self.project(x_l, f, template)
        T = self.cfg.steps
        if self.cfg.process == "mattergen":
            x_l, f, slot = self._mattergen_sample(cond, comps, slot, mask, g, template)
        elif self.cfg.process == "cdvae":
            x_l, f = self._cdvae_sample(cond, comps, slot, mask, g, template)
        elif self.cfg.process == "adit":
            x_l, f = self._adit_sample(cond, slot, mask, g, template)
        elif self.cfg.process == "diffcsp":
            ab_k, sig_k = self.schedule(self.cfg.sample_steps or T)
            K = len(sig_k) - 1
            for k in range(K, 0, -1):
                x_l, f = self._diffcsp_step(k * T / K, (ab_k[k], ab_k[k - 1]), (sig_k[k], sig_k[k - 1]),
                                            k == 1, x_l, f, slot, mask, cond, g)
                if template is not None:
                    x_l, f = self.project(x_l, f, template)
        else:
            for i in range(T, 0, -1):
                t_now = (T - i) / T
                tt = torch.full((B,), t_now)
                out_l, out_f, _ = self.net(x_l, f, slot, mask, self._temb(tt), cond)
                x_l = x_l + out_l / T
                # FlowMM's inference anti-annealing of the coordinate velocity: (1 + c t) u
                f = (f + (1.0 + self.cfg.anneal_slope * t_now) * _no_drift(out_f, mask) / T) % 1.0
                if template is not None:
                    x_l, f = self.project(x_l, f, template)
        out = []
        for b in range(B):
            n = int(mask[b].sum())
            out.append((x_l[b].numpy().astype(np.float64), f[b, :n].numpy().astype(np.float64),
                        slot[b, :n].numpy()))
        return out

    def project(self, x_l: Tensor, f: Tensor, template: CellTemplate) -> tuple[Tensor, Tensor]:
        """Normalised lattices (B,3,3) and frac (B,n,3) projected onto ``template``'s symmetric
        subspace (:func:`~c2np.models.cell_templates.project_lattice` on the lattice in units of
        the particle scale, which the projection does not depend on, and
        :func:`~c2np.models.cell_templates.project_frac`)."""
        mu, sd = self.lat_mean.numpy().astype(np.float64), float(self.lat_std)
        lat = project_lattice(x_l.numpy().astype(np.float64) * sd + mu, template.rotations)
        fr = project_frac(f.numpy(), template.rotations, template.translations, template.perm, template.frac)
        return (torch.as_tensor((lat - mu) / sd, dtype=x_l.dtype), torch.as_tensor(fr, dtype=f.dtype))

    def schedule(self, n_steps: int) -> tuple[Tensor, Tensor]:
        """The diffusion schedule on ``n_steps + 1`` equally spaced times ``t = k T / n_steps``
        (k = 0..n_steps; ``T = cfg.steps``): (alpha_bar (n+1,), sigma (n+1,)). At
        ``n_steps = T`` these are the training buffers; other ``n_steps`` sample on a finer or
        coarser grid of the same continuous schedule (the time embedding is continuous)."""
        if n_steps == self.cfg.steps:
            return self.alpha_bar, self.sigma
        return _schedule(self.cfg, n_steps)

    def _diffcsp_step(self, t_now: float, abs_: tuple[Tensor, Tensor], sigs: tuple[Tensor, Tensor], last: bool,
                      x_l: Tensor, f: Tensor, slot: Tensor, mask: Tensor, cond: Tensor,
                      g: torch.Generator) -> tuple[Tensor, Tensor]:
        """One reverse step from time ``t_now`` (in training steps, may be fractional) to the
        previous grid time of the joint process (lattice DDPM, frac VE score);
        ``abs_`` = (alpha_bar now, before), ``sigs`` = (sigma now, before).

        ``sde``: ancestral lattice step, reverse-SDE frac step. ``ode``: DDIM (eta 0) and the
        probability-flow ODE. ``pc``: DiffCSP's predictor-corrector — a Langevin corrector
        on frac (step ``step_lr * (sigma_i / sigma_min)^2``), then the predictor with the
        posterior noise ``sigma_{i-1} sqrt(1 - sigma_{i-1}^2 / sigma_i^2)``."""
        B = x_l.shape[0]
        temb = self._temb(torch.full((B,), float(t_now)))
        sig, sig_p = sigs
        s2, s2p = sig ** 2, sig_p ** 2
        if self.cfg.sampler == "pc":
            _, out_f, _ = self.net(x_l, f, slot, mask, temb, cond)
            eps_c = self.cfg.step_lr * (sig / self.cfg.sigma_min) ** 2
            f = f + eps_c * out_f / sig
            if not last:
                f = f + (2 * eps_c).sqrt() * torch.randn(f.shape, generator=g)
            f = f % 1.0
        out_l, out_f, _ = self.net(x_l, f, slot, mask, temb, cond)
        ab, ab_prev = abs_
        a = ab / ab_prev
        if self.cfg.lattice_param == "x0":
            x0 = out_l.clamp(-6, 6)
        else:
            x0 = ((x_l - (1 - ab).sqrt() * out_l) / ab.sqrt()).clamp(-6, 6)
        score = out_f / sig
        if self.cfg.sampler == "ode":       # DDIM (eta 0) + probability-flow ODE
            eps = (x_l - ab.sqrt() * x0) / (1 - ab).sqrt()
            return ab_prev.sqrt() * x0 + (1 - ab_prev).sqrt() * eps, (f + 0.5 * (s2 - s2p) * score) % 1.0
        mean = (ab_prev.sqrt() * (1 - a) / (1 - ab)) * x0 + (a.sqrt() * (1 - ab_prev) / (1 - ab)) * x_l
        var = (1 - ab_prev) / (1 - ab) * (1 - a)
        x_l = mean + (var.sqrt() * torch.randn(x_l.shape, generator=g) if not last else 0.0)
        f = f + (s2 - s2p) * score
        if not last:
            std = (s2 - s2p).sqrt() if self.cfg.sampler == "sde" else (s2p * (s2 - s2p) / s2).sqrt()
            f = f + std * torch.randn(f.shape, generator=g)
        return x_l, f % 1.0

    def cell_of(self, x_l: np.ndarray, frac: np.ndarray, slots: np.ndarray,
                desc: ParticleDescriptor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The generated cell in Å: (lattice (3,3), frac (n,3), atomic numbers (n,))."""
        lat = (x_l * float(self.lat_std) + self.lat_mean.numpy()) * desc.scale_angstrom
        numbers = desc.slot_numbers[slots]
        numbers = np.where(numbers == 0, desc.slot_numbers[0], numbers)
        return lat, frac, numbers

    def condition_views(self, particles: Sequence[Particle]) -> list[list[tuple[float, ParticleDescriptor]]]:
        """Per particle, the extra conditions of :meth:`candidates`: (crop radius Å, descriptor)
        of each :func:`~c2np.particle.central_crop` of ``cfg.crop_radii_angstrom`` that is at
        least :data:`CROP_MIN_GAP_ANGSTROM` smaller than the particle (its largest distance
        from the centroid) and keeps every species of it; none for a particle whose
        :func:`~c2np.particle_descriptor.position_noise_angstrom` exceeds
        ``cfg.crop_max_noise_angstrom``; empty lists without crop radii."""
        out: list[list[tuple[float, ParticleDescriptor]]] = []
        for p in particles:
            views: list[tuple[float, ParticleDescriptor]] = []
            limit = self.cfg.crop_max_noise_angstrom
            if self.cfg.crop_radii_angstrom and p.n_atoms and (limit is None or position_noise_angstrom(p) <= limit):
                pos = p.positions_angstrom - p.positions_angstrom.mean(axis=0)
                radius = float(np.linalg.norm(pos, axis=1).max())
                species = set(np.unique(p.numbers).tolist())
                for r in self.cfg.crop_radii_angstrom:
                    if r + CROP_MIN_GAP_ANGSTROM > radius:
                        continue
                    crop = central_crop(p, r)
                    if crop.n_atoms > 1 and set(np.unique(crop.numbers).tolist()) == species:
                        views.append((r, describe(crop)))
            out.append(views)
        return out

    def candidates(self, descs: Sequence[ParticleDescriptor], *, seed: int = 0, batch: int = 256,
                   profiles: Sequence[np.ndarray] | None = None,
                   particles: Sequence[Particle] | None = None) -> list[list[Candidate]]:
        """The read-out generated cells of each particle (``n_samples`` per composition; the
        compositions: the count head's most probable one (``z_candidates="head"``), every
        training composition (``"all"``) or every space-group template of :attr:`templates`,
        sampled under the template's symmetry (``"templates"``)), each with its structural validity and, given the
        particles' pair profiles (:func:`c2np.models.cell_ranking.particle_pair_profile`),
        its profile mismatch (else nan). Unreadable cells are left out.

        With ``cfg.crop_radii_angstrom`` the network is also conditioned on the particles'
        central crops (:meth:`condition_views`; ``particles`` needed); those cells are read
        out, ranked and refined against the whole particle (its descriptor's scale and
        species, its profile), with the others. They are drawn after the whole-particle
        cells with their own random stream, so the whole-particle candidates are those of
        the same generator without crops, bit for bit."""
        if self.cfg.crop_radii_angstrom and particles is None:
            raise C2NPInputError("crop_radii_angstrom: the generator needs the particles themselves "
                                 "(use predict_particles, or pass particles=)")
        if particles is not None and len(particles) != len(descs):
            raise C2NPInputError(f"candidates: {len(particles)} particles for {len(descs)} descriptors")
        self.eval()
        out: list[list[tuple[Candidate, CellTemplate | None]]] = [[] for _ in descs]
        feats = torch.as_tensor(self.features(descs))
        with torch.no_grad():
            logp = torch.log_softmax(self.composition_logits(feats), dim=-1).numpy()
        whole = [(i, 0.0) for i in range(len(descs))]
        self._draw(whole, feats, logp, torch.Generator().manual_seed(int(seed)), descs, profiles, out, batch)
        views = self.condition_views(particles) if particles is not None else [[] for _ in descs]
        crops = [(i, r) for i, vs in enumerate(views) for r, _ in vs]
        if crops:       # their own random stream: the whole-particle candidates stay those of no crops
            crop_seed = int(np.random.SeedSequence([int(seed), 1]).generate_state(1)[0])
            crop_feats = torch.as_tensor(self.features([v for vs in views for _, v in vs]))
            self._draw(crops, crop_feats, logp, torch.Generator().manual_seed(crop_seed), descs, profiles, out,
                       batch)
        if self.cfg.rank == "refine" and profiles is not None:
            return [self._refined(c, d, p) for c, d, p in zip(out, descs, profiles)]
        return [[c for c, _ in row] for row in out]

    def _draw(self, rows: Sequence[tuple[int, float]], feats: Tensor, logp: np.ndarray, g: torch.Generator,
              descs: Sequence[ParticleDescriptor], profiles: Sequence[np.ndarray] | None,
              out: list[list[tuple[Candidate, CellTemplate | None]]], batch: int) -> None:
        """Sample ``n_samples`` cells per plan for each condition row (particle index, crop
        radius Å or 0 for the whole particle; its features the row of ``feats``) with ``g``,
        read each out against its particle (``descs``, ``profiles``, composition log-probs
        ``logp``) and append it to that particle's list in ``out``."""
        owner = np.array([i for i, _ in rows], dtype=np.int64)
        plans = self._plans(len(rows), logp[owner])
        for _ in range(self.cfg.n_samples):
            for comps, template in plans:
                order = np.argsort([sum(c) for c in comps], kind="stable")   # batches of similar size
                for a in range(0, len(rows), batch):
                    idx = order[a:a + batch]
                    cells = self.sample(feats[torch.as_tensor(idx)], [comps[k] for k in idx], g, template)
                    for k, (xl, fr, sl) in zip(idx, cells):
                        o, radius = rows[k]
                        c = self._candidate(xl, fr, sl, descs[o], comps[k], logp[o], template,
                                            None if profiles is None else profiles[o])
                        if c is not None:
                            out[o].append((replace(c, view_radius_angstrom=radius) if radius else c, template))

    def _candidate(self, xl: np.ndarray, fr: np.ndarray, sl: np.ndarray, desc: ParticleDescriptor,
                   comp: tuple[int, ...], logp: np.ndarray, template: CellTemplate | None,
                   profile: np.ndarray | None) -> Candidate | None:
        """One generated cell read out (None: unreadable). With a profile its mismatch; for
        ``rank`` ``stretch`` / ``refine`` the lattice first stretched isotropically to the
        particle's pair distances (:func:`~c2np.models.cell_ranking.best_scale_mismatch`)."""
        lat, frac, numbers = self.cell_of(xl, fr, sl, desc)
        mis = float("nan")
        if profile is not None and self.cfg.rank in ("stretch", "refine"):
            lam, mis = best_scale_mismatch(profile, lat, frac, sl, desc.scale_angstrom)
            lat = lat * lam
        elif profile is not None:
            mis = profile_mismatch(profile, cell_pair_profile(lat, frac, sl, desc.scale_angstrom))
        lp = float(logp[self.compositions.index(comp)]) if comp in self.compositions else float("-inf")
        return self._read(lat, frac, sl, numbers, comp, lp, template, mis)

    def _read(self, lat: np.ndarray, frac: np.ndarray, sl: np.ndarray, numbers: np.ndarray,
              comp: tuple[int, ...], lp: float, template: CellTemplate | None, mis: float
              ) -> Candidate | None:
        """The :class:`Candidate` of a cell in Å (None: spglib reads nothing)."""
        tsg = template.spacegroup if template is not None else 0
        res = read_cell_to_prediction(lat, frac, numbers, rule=self.cfg.read_rule, template_spacegroup=tsg)
        if res is None:
            return None
        return Candidate(comp, res[0], res[1], min_pair_distance_angstrom(lat, frac), mis, lp,
                         float(abs(np.linalg.det(lat))), tsg, (lat, np.asarray(frac) % 1.0, np.asarray(sl)),
                         len(template.rotations) if template is not None else 0)

    def _refined(self, row: list[tuple[Candidate, CellTemplate | None]], desc: ParticleDescriptor,
                 profile: np.ndarray) -> list[Candidate]:
        """A particle's candidates with the ``refine_top`` valid template-sampled ones of smallest
        mismatch replaced by their cells refined to the particle's pair profile
        (:func:`~c2np.models.cell_ranking.refine_to_profile`, ``refine_evals`` profiles each).

        With ``refine_screen_evals`` > 0 every valid template-sampled candidate is first refined
        with that many profiles (a screen), and the ``refine_top`` of smallest *screened*
        mismatch are then refined from their screened cells with ``refine_evals`` more; the
        other candidates keep their screened cells (a generated cell that starts far from the
        particle's crystal can still be the one that fits it, docs/inverse_results.md, session 17)."""
        order = sorted((k for k, (c, t) in enumerate(row) if t is not None and c.cell is not None
                        and c.min_pair_angstrom >= self.cfg.min_pair_angstrom), key=lambda k: row[k][0].mismatch)
        out = [c for c, _ in row]
        if self.cfg.refine_screen_evals > 0:
            for k in order:
                out[k] = self._refine_one(out[k], row[k][1], desc, profile, self.cfg.refine_screen_evals)
            order = sorted(order, key=lambda k: out[k].mismatch)
        for k in order[: self.cfg.refine_top]:
            out[k] = self._refine_one(out[k], row[k][1], desc, profile, self.cfg.refine_evals)
        return out

    def _refine_one(self, c: Candidate, t: CellTemplate | None, desc: ParticleDescriptor, profile: np.ndarray,
                    max_evals: int) -> Candidate:
        """One candidate refined to the particle's pair profile with ``max_evals`` profiles (the
        candidate itself when the refined cell cannot be read or has atoms too close)."""
        assert t is not None and c.cell is not None
        lat, frac, sl = c.cell
        lat, frac, mis = refine_to_profile(profile, t, lat, frac, sl, desc.scale_angstrom, max_evals=max_evals,
                                           shape_starts=self.cfg.refine_shape_starts,
                                           coord_starts=self.cfg.refine_coord_starts)
        new = self._read(lat, frac, sl, self.cell_of(np.zeros((3, 3)), frac, sl, desc)[2], c.composition,
                         c.composition_logprob, t, mis)
        if new is not None and new.min_pair_angstrom >= self.cfg.min_pair_angstrom:
            return replace(new, view_radius_angstrom=c.view_radius_angstrom, generator=c.generator)
        return c

    def _plans(self, n: int, logp: np.ndarray) -> list[tuple[list[tuple[int, ...]], CellTemplate | None]]:
        """The generation plans of :meth:`candidates` for ``n`` particles: (composition per
        particle, template or None) per pass over the particles (``z_candidates``)."""
        if self.cfg.z_candidates == "head":
            return [([self.compositions[int(i)] for i in logp.argmax(-1)], None)]
        if self.cfg.z_candidates == "all":
            return [([c] * n, None) for c in self.compositions]
        if not self.templates:
            raise C2NPInputError("z_candidates 'templates': this generator has no space-group templates "
                                 "(write them with benchmarks/build_cell_templates.py)")
        return [([t.composition] * n, t) for t in self.templates]

    def predict_descriptors(self, descs: Sequence[ParticleDescriptor], *, seed: int = 0,
                            batch: int = 256, profiles: Sequence[np.ndarray] | None = None,
                            noise_angstrom: Sequence[float] | None = None,
                            particles: Sequence[Particle] | None = None
                            ) -> list[InversePrediction | None]:
        """Predictions for particles given by their descriptors (and, for ``rank="profile"``,
        their pair profiles; with ``symmetric_margin_per_angstrom`` > 0, their
        :func:`position_noise_angstrom`): the :meth:`candidates` combined by :meth:`choose`;
        None where no cell could be read."""
        if self.cfg.rank != "vote" and profiles is None:
            raise C2NPInputError("rank 'profile' needs the particles' pair profiles (use predict_particles)")
        if self.needs_noise and noise_angstrom is None:
            raise C2NPInputError("symmetric_margin_per_angstrom needs the particles' noise estimates "
                                 "(use predict_particles)")
        cands = self.candidates(descs, seed=seed, batch=batch, profiles=profiles, particles=particles)
        noise = [0.0] * len(cands) if noise_angstrom is None else list(noise_angstrom)
        return [self.choose(c, noise_angstrom=s) for c, s in zip(cands, noise, strict=True)]

    @property
    def needs_noise(self) -> bool:
        """Whether :meth:`choose` reads the particle's noise estimate."""
        return self.cfg.symmetric_margin_per_angstrom > 0

    def choose(self, cands: Sequence[Candidate], *, noise_angstrom: float = 0.0) -> InversePrediction | None:
        """The answer of one particle from its :meth:`candidates`: :func:`choose_candidate`
        with this configuration's rank, minimum pair distance and symmetric margins
        (``noise_angstrom``: the particle's :func:`position_noise_angstrom`)."""
        return choose_candidate(cands, rule=self.cfg.rank, min_pair_angstrom=self.cfg.min_pair_angstrom,
                                symmetric_margin=self.cfg.symmetric_margin,
                                symmetric_margin_rel=self.cfg.symmetric_margin_rel,
                                symmetric_margin_per_angstrom=self.cfg.symmetric_margin_per_angstrom,
                                noise_angstrom=noise_angstrom)

    def predict_particles(self, particles: Sequence[Particle], *, seed: int = 0, batch: int = 256
                          ) -> list[InversePrediction | None]:
        """Predictions for particles: :func:`describe` each (and its pair profile for
        ``rank="profile"``), then :meth:`predict_descriptors`."""
        descs = [describe(p) for p in particles]
        profiles = ([particle_pair_profile(p, d) for p, d in zip(particles, descs)]
                    if self.cfg.rank != "vote" else None)
        noise = [position_noise_angstrom(p) for p in particles] if self.needs_noise else None
        return self.predict_descriptors(descs, seed=seed, batch=batch, profiles=profiles, noise_angstrom=noise,
                                        particles=particles)

    # --- fit -------------------------------------------------------------------------------
    @classmethod
    def fit(cls, examples: Sequence[CellExample], cfg: GenConfig, *, log: Any = None,
            time_budget_s: float | None = None, checkpoint: Any = None, checkpoint_every: int = 1000,
            init_state: Mapping[str, Tensor] | None = None) -> CrystalGenerator:
        """Train on ``examples`` (one thread is the caller's business) for ``cfg.train_steps``
        steps or until ``time_budget_s`` (wall clock, s) is spent, whichever is first.
        ``checkpoint(model, step)`` is called every ``checkpoint_every`` steps and at the end;
        ``log(row)`` every 50 steps and at the end (``row["stopped"]`` says why it ended).
        ``init_state``: start from these weights (a state dict of the same configuration and
        training set, e.g. a checkpoint) instead of a fresh initialisation."""
        import time

        if time_budget_s is not None and not time_budget_s >= 0:
            raise C2NPInputError(f"time_budget_s must be >= 0 s, got {time_budget_s!r}")
        t_start = time.monotonic()
        if not examples:
            raise C2NPInputError("crystal generator: no training examples")
        rng = np.random.default_rng(cfg.seed)
        torch.manual_seed(cfg.seed)
        g = torch.Generator().manual_seed(cfg.seed)
        feats = cls.features([e.descriptor for e in examples])
        lat_n = np.stack([e.lattice_angstrom / e.descriptor.scale_angstrom for e in examples])
        density = 1.0
        if cfg.process == "mattergen":      # the symmetric lattice, atoms per s^3
            lat_n = mgp.symmetric_polar_factor(torch.as_tensor(lat_n)).numpy()
            density = float(np.mean([len(e.slots) for e in examples] / np.abs(np.linalg.det(lat_n))))
        stats = None
        if cfg.process in ("cdvae", "adit"):    # six lattice parameters, lengths / n^(1/3), standardised
            lp = cdp.scaled_lattice_parameters(torch.as_tensor(lat_n),
                                               torch.as_tensor([len(e.slots) for e in examples])).numpy()
            stats = (lp.mean(0), lp.std(0) + 1e-3)
        if cfg.process in ("mattergen", "cdvae", "adit"):   # the lattice in units of s, O(1), as theirs in Å
            lat_mean, lat_std = np.zeros((3, 3)), 1.0
        else:
            lat_mean = lat_n.mean(axis=0)
            lat_std = float(np.std(lat_n - lat_mean)) + 1e-3
        comps = sorted({_composition_key(e.slots) for e in examples})
        model = cls(cfg, feats.shape[1], comps, feats.mean(0), feats.std(0) + 1e-3, lat_mean, lat_std,
                    limit_density=density, lattice_stats=stats)
        if init_state is not None:
            _load_init_state(model, init_state)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=1e-4)
        comp_of = np.array([comps.index(_composition_key(e.slots)) for e in examples])
        SG0 = np.array([model.spacegroup_index(e.spacegroup) for e in examples], dtype=np.int64)
        N = max(len(e.slots) for e in examples)
        F0 = np.zeros((len(examples), N, 3), dtype=np.float32)
        S0 = np.zeros((len(examples), N), dtype=np.int64)
        M0 = np.zeros((len(examples), N), dtype=bool)
        for i, e in enumerate(examples):
            F0[i, : len(e.slots)] = e.frac
            S0[i, : len(e.slots)] = e.slots
            M0[i, : len(e.slots)] = True
        XL = ((lat_n - lat_mean) / lat_std).astype(np.float32)
        # Batches of one composition (no padding): the class by its frequency, then examples.
        members = [np.flatnonzero(comp_of == c) for c in range(len(comps))]
        freq = np.array([len(m) for m in members], dtype=np.float64) / len(examples)
        if cfg.balance_classes:             # every composition class equally often
            freq = np.full(len(members), 1.0 / len(members))
        model.train()
        for step in range(cfg.train_steps):
            cls_k = int(rng.choice(len(comps), p=freq))
            idx = rng.choice(members[cls_k], cfg.batch)
            n = sum(comps[cls_k])
            progress = step / cfg.train_steps
            if time_budget_s is not None:
                progress = max(progress, (time.monotonic() - t_start) / max(time_budget_s, 1e-9))
            model.train_progress = progress
            sgi = None
            if cfg.spacegroups:             # the group withheld from a share of rows ("not given")
                sgi = torch.as_tensor(np.where(rng.random(len(idx)) < cfg.spacegroup_drop_fraction, 0, SG0[idx]))
            loss, parts = model.loss(torch.as_tensor(feats[idx]), torch.as_tensor(XL[idx]),
                                     torch.as_tensor(F0[idx, :n]), torch.as_tensor(S0[idx, :n]),
                                     torch.as_tensor(M0[idx, :n]), torch.as_tensor(comp_of[idx]), g, sgi)
            for group in opt.param_groups:
                group["lr"] = cfg.lr * learning_rate_factor(model.stage_progress())
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            over = time_budget_s is not None and time.monotonic() - t_start > time_budget_s
            end = over or step == cfg.train_steps - 1
            if log is not None and (step % 50 == 0 or end):
                log({"step": step, **parts, **({"stopped": "time budget" if over else "steps"} if end else {})})
            if checkpoint is not None and (end or (step + 1) % checkpoint_every == 0):
                checkpoint(model, step)
            if over:
                break
        model.eval()
        return model


def _load_init_state(model: CrystalGenerator, state: Mapping[str, Tensor]) -> None:
    """Load warm-start weights into ``model``. A space-group conditioned model may start from
    an unconditioned one's weights: its embedding (absent there) keeps its zero start, so it
    begins as exactly that network; any other missing or unexpected tensor is an error."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    allowed = {"sg_embed.weight"} if model.cfg.spacegroups else set()
    bad = sorted(set(missing) - allowed) + sorted(unexpected)
    if bad:
        raise C2NPInputError(f"init_state does not match this generator's configuration: {', '.join(bad[:5])}")


def _schedule(cfg: GenConfig, n_steps: int) -> tuple[Tensor, Tensor]:
    """Cosine alpha_bar and geometric sigma (float32, (n_steps + 1,) each) on the times
    ``u = k / n_steps``, k = 0..n_steps, of the continuous schedule; sigma(0) = 0."""
    u = torch.arange(n_steps + 1, dtype=torch.float64) / n_steps
    ab = torch.cos((u + 0.008) / 1.008 * math.pi / 2) ** 2
    ab = (ab / ab[0]).clamp(min=1e-5)
    sig = cfg.sigma_min * (cfg.sigma_max / cfg.sigma_min) ** u
    sig[0] = 0.0
    return ab.float(), sig.float()


def min_pair_distance_angstrom(lattice_angstrom: np.ndarray, frac: np.ndarray) -> float:
    """The shortest distance (Å) between two atoms of a periodic cell, periodic images
    included (minimum image over the 27 neighbouring cells after wrapping); lattice (3, 3)
    rows a, b, c; frac (n, 3). ``inf`` for a single atom in a cell whose shortest lattice
    vector is not shorter than the images considered."""
    lat = np.asarray(lattice_angstrom, dtype=np.float64)
    f = np.asarray(frac, dtype=np.float64) % 1.0
    d = f[None, :, :] - f[:, None, :]
    d = d - np.round(d)
    shifts = np.array([(i, j, k) for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)], dtype=np.float64)
    cart = (d[:, :, None, :] + shifts[None, None]) @ lat                     # (n, n, 27, 3)
    r = np.linalg.norm(cart, axis=-1)
    n = len(f)
    r[np.arange(n), np.arange(n), 13] = np.inf                               # an atom and itself
    return float(r.min()) if r.size else float("inf")


@dataclass(frozen=True)
class Candidate:
    """One read-out generated cell of a particle: its composition (atoms per slot), the
    answer read from it (params (6,) Å/deg, space group), its shortest interatomic distance
    (Å), its pair-profile mismatch with the particle (nan when not computed), the count
    head's log-probability of its composition, its cell volume (Å^3), the space group of
    the template it was sampled under (0: none), the generated cell itself (lattice (3, 3)
    rows Å, frac (n, 3), slots (n,)), kept for diagnostics and re-reading, the number of
    symmetry operations of its template's primitive cell (0: none), in a
    :class:`~c2np.models.generator_pool.GeneratorPool` the name of the member that made it,
    and the radius (Å) of the central crop the network was conditioned on (0: the whole
    particle; ``GenConfig.crop_radii_angstrom``)."""

    composition: tuple[int, ...]
    params: np.ndarray
    spacegroup: int
    min_pair_angstrom: float
    mismatch: float
    composition_logprob: float
    volume_angstrom3: float
    template_spacegroup: int = 0
    cell: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    n_operations: int = 0
    generator: str = ""
    view_radius_angstrom: float = 0.0


def choose_candidate(cands: Sequence[Candidate], *, rule: str = "vote", min_pair_angstrom: float = 0.0,
                     symmetric_margin: float = 0.0, symmetric_margin_rel: float = 0.0,
                     symmetric_margin_per_angstrom: float = 0.0, noise_angstrom: float = 0.0
                     ) -> InversePrediction | None:
    """The answer of a particle from its candidates. Only the structurally valid ones
    (shortest distance >= ``min_pair_angstrom``) count; none valid -> all of them.
    ``vote``: :func:`vote` over their answers. ``profile`` (and ``stretch``, ``refine``, whose
    candidates carry the stretched / refined mismatch): the answer of the candidate with the
    smallest pair-profile mismatch (ties: the earlier); with a margin ``symmetric_margin +
    symmetric_margin_rel x best + symmetric_margin_per_angstrom x noise_angstrom`` > 0
    (``best``: the smallest mismatch; ``noise_angstrom``: the particle's estimated noise), of
    the candidates within it of the smallest, the one whose template has the most symmetry
    operations (ties: the smaller mismatch) — of two cells that explain the particle equally
    well, the more symmetric. The noise part widens the margin where noise lets the less
    symmetric cells fit better (docs/inverse_results.md, session 15b). None for no candidates."""
    if rule not in RANK_RULES:
        raise C2NPInputError(f"rank must be one of {list(RANK_RULES)}, got {rule!r}")
    valid = [c for c in cands if c.min_pair_angstrom >= min_pair_angstrom] or list(cands)
    if not valid:
        return None
    if rule == "vote":
        return vote([(c.params, c.spacegroup) for c in valid])
    mis = np.array([c.mismatch for c in valid], dtype=np.float64)
    if np.all(np.isnan(mis)):
        raise C2NPInputError("rank 'profile': no candidate has a pair-profile mismatch")
    best = valid[int(np.nanargmin(mis))]
    margin = (symmetric_margin + symmetric_margin_rel * best.mismatch
              + symmetric_margin_per_angstrom * max(float(noise_angstrom), 0.0))
    if margin > 0:
        near = [c for c in valid if c.mismatch <= best.mismatch + margin]
        best = max(near, key=lambda c: (c.n_operations, -c.mismatch))
    return InversePrediction.from_values([float(x) for x in best.params], int(best.spacegroup))


def vote(answers: Sequence[tuple[np.ndarray, int]], *, length_tol_angstrom: float = 0.25,
         angle_tol_deg: float = 0.5) -> InversePrediction | None:
    """The most frequent (space group, lattice) answer among read-out samples ``(params (6,)
    Å/deg, space group)``: the answer with the most answers of the same group within
    ``length_tol_angstrom`` / ``angle_tol_deg`` of it (ties: the earlier), reported as the
    median parameters of those answers. None for no answers."""
    if not answers:
        return None
    params = np.array([np.asarray(p, dtype=np.float64) for p, _ in answers])
    groups = np.array([int(s) for _, s in answers])
    close = ((groups[:, None] == groups[None, :])
             & (np.abs(params[:, None, :3] - params[None, :, :3]).max(-1) <= length_tol_angstrom)
             & (np.abs(params[:, None, 3:] - params[None, :, 3:]).max(-1) <= angle_tol_deg))
    best = int(np.argmax(close.sum(1)))
    return InversePrediction.from_values(np.median(params[close[best]], axis=0), int(groups[best]))


def learning_rate_factor(progress: float, *, warmup: float = 0.02, floor: float = 0.02) -> float:
    """The learning-rate multiplier at training progress ``progress`` in [0, 1] (the larger
    of the step fraction and the time-budget fraction): linear warm-up, then cosine to
    ``floor``."""
    p = min(max(progress, 0.0), 1.0)
    if p < warmup:
        return max(p / warmup, 1e-3)
    q = (p - warmup) / (1.0 - warmup)
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * q))


def read_cell_to_prediction(lattice_angstrom: np.ndarray, frac: np.ndarray, numbers: np.ndarray, *,
                            sweep_angstrom: Iterable[float] | None = None, rule: str = "plateau",
                            template_spacegroup: int = 0) -> tuple[np.ndarray, int] | None:
    """Space group and conventional lattice parameters of a generated cell by
    :func:`c2np.cells.standardize` under a tolerance sweep (tight to loose; default
    :data:`SYMPREC_SWEEP_ANGSTROM`, or :data:`SYMPREC_FINE_SWEEP_ANGSTROM` for ``longest``).

    ``plateau``: the first tolerance whose group equals the next one's; none -> 0.1 Å (or the
    loosest that works). ``longest``: the group found over the longest run of consecutive
    tolerances (ties: the looser run), read at the run's tightest tolerance — a generated
    cell with errors of ~delta Å and a true distortion of ~Delta Å shows its group over
    (~4 delta, Delta) and P1 below (spglib needs a tolerance of ~4-5x the noise sigma).
    ``tight``: the group at the tightest tolerance spglib reads (for cells that are exactly
    symmetric by construction, :mod:`c2np.models.cell_templates`). ``template``: for a cell
    sampled under a template of group ``template_spacegroup``, that group at the loosest
    tolerance of :data:`SYMPREC_TEMPLATE_LADDER_ANGSTROM` (0.005 Å down to 1e-4 Å) where spglib
    reads it — a cell projected onto the template is exactly symmetric in it, so a read of a
    higher group at 0.005 Å means its distortion from that group is under 0.005 Å, not that it
    lacks the template's symmetry; not found at any (or no template) -> ``tight``. None when
    spglib finds nothing at any tolerance or the lattice is degenerate."""
    if rule not in READ_RULES:
        raise C2NPInputError(f"read-out rule must be one of {list(READ_RULES)}, got {rule!r}")
    if sweep_angstrom is None:
        sweep_angstrom = {"plateau": SYMPREC_SWEEP_ANGSTROM, "template": SYMPREC_TEMPLATE_LADDER_ANGSTROM
                          }.get(rule, SYMPREC_FINE_SWEEP_ANGSTROM)
    lat = np.asarray(lattice_angstrom, dtype=np.float64)
    if not np.all(np.isfinite(lat)) or abs(np.linalg.det(lat)) < 1e-3:
        return None
    cell = (lat, np.asarray(frac, dtype=np.float64) % 1.0, np.asarray(numbers, dtype=np.int64))
    found: list[tuple[float, Any]] = []
    for tol in sweep_angstrom:
        try:
            found.append((float(tol), standardize(cell, symprec_angstrom=float(tol))))
        except C2NPInputError:
            continue
    if not found:
        return None
    pick = found[0][1] if rule in ("tight", "template") else None
    if rule == "template":
        pick = next((s for _, s in found if s.spacegroup == template_spacegroup), pick)
    if rule == "longest":
        best_len, start = 0, 0
        for k in range(len(found) + 1):
            if k == len(found) or found[k][1].spacegroup != found[start][1].spacegroup:
                if k - start >= best_len:      # ties: the looser run
                    best_len, pick = k - start, found[start][1]
                start = k
    elif rule == "plateau":
        for (_, s1), (_, s2) in zip(found, found[1:]):
            if s1.spacegroup == s2.spacegroup:
                pick = s1
                break
    if pick is None:
        near = [s for t, s in found if t <= 0.1]
        pick = near[-1] if near else found[-1][1]
    return pick.parameters.as_array(), int(pick.spacegroup)


def save_generator(model: CrystalGenerator, folder: str | Path, log_rows: Sequence[dict[str, Any]]) -> Path:
    """Write ``model.safetensors``, ``config.json`` and ``train_log.jsonl`` to ``folder``."""
    from safetensors.torch import save_file

    from c2np.fileio import atomic_path, write_text

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    with atomic_path(out / "model.safetensors") as tmp:    # fsync'ed, renamed, mode by the umask
        save_file(tensors, tmp)
    meta = {"config": asdict(model.cfg), "compositions": model.compositions,
            "n_desc": int(model.desc_mean.shape[0]), "kind": "c2np.crystal_gen/1"}
    write_text(out / "config.json", json.dumps(meta, indent=2) + "\n")
    write_text(out / "train_log.jsonl", "".join(json.dumps(r) + "\n" for r in log_rows))
    return out


def load_generator(folder: str | Path) -> CrystalGenerator:
    """A generator written by :func:`save_generator` (with the folder's space-group templates,
    :data:`c2np.models.cell_templates.TEMPLATES_FILE`, when it has them)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    p = Path(folder)
    try:
        meta = json.loads((p / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise C2NPInputError(f"{p}: not a crystal generator folder ({exc})") from exc
    try:
        tensors = load_file(str(p / "model.safetensors"))
    except (SafetensorError, OSError, ValueError) as exc:
        raise C2NPInputError(f"{p / 'model.safetensors'}: not readable weights ({exc})") from exc
    try:
        cfg = GenConfig(**meta["config"])
    except TypeError as exc:          # a field this version does not know
        raise C2NPInputError(f"{p / 'config.json'}: not a configuration of this version ({exc})") from exc
    n = int(meta["n_desc"])
    model = CrystalGenerator(cfg, n, [tuple(c) for c in meta["compositions"]], np.zeros(n), np.ones(n),
                             np.zeros((3, 3)), 1.0)
    try:
        model.load_state_dict(tensors)
    except RuntimeError as exc:         # missing, unexpected or mis-shaped tensors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise C2NPInputError(f"{p / 'model.safetensors'}: the weights do not match config.json ({first})") from exc
    model.templates = load_templates(p) or []
    model.eval()
    return model
