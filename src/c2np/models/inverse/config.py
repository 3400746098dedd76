"""The configuration of a task-2 crystal generator (:class:`GenConfig`) and the names its
fields take (torch-free).

``process`` picks the generative process (:data:`PROCESSES`, one class each in
:mod:`c2np.models.inverse.registry`); the other fields size the network, the training run and
the sampler, and say how candidate cells are proposed (``z_candidates``), read out
(``read_rule``), refined and ranked (``rank``) and whether central crops of the particle also
condition the network (``crop_radii_angstrom``).
"""

from __future__ import annotations

from dataclasses import dataclass

from c2np.errors import C2NPInputError

__all__ = ["GenConfig", "PROCESSES", "SAMPLERS", "READ_RULES", "Z_CANDIDATES", "RANK_RULES",
           "CROP_MIN_GAP_ANGSTROM"]

PROCESSES = ("diffcsp", "flowmm", "mattergen", "cdvae", "adit")
SAMPLERS = ("sde", "ode", "pc")
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

