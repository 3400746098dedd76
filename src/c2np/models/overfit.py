"""The overfit gate: can a task-1 generator reproduce the one particle it was trained on?

:func:`overfit` trains a fresh generator on a single (cell, R, rotation) condition and its
particle (a batch of copies of that one sample), then draws ``n_samples`` particles of the
same condition from its generative process and scores each with the harness's per-sample
metric code (:func:`c2np.metrics.forward_metrics`). A family that cannot pass this gate
(F1@0.5 >= 0.9) is not trained at scale: its low benchmark scores would say "not trained",
not "cannot model the crystal -> particle map".

The target particle is data (carved here, outside the generator); the generator only ever
receives the :class:`~c2np.models.data.Condition`.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from c2np.carving import Particle, carve
from c2np.cells import UnitCell
from c2np.metrics import forward_metrics
from c2np.models.config import ModelConfig
from c2np.models.data import Condition
from c2np.orientations import draw_paper_quaternion

__all__ = ["OverfitResult", "gate_condition", "gate_config", "gate_steps", "overfit", "GATE_F1"]

GATE_F1 = 0.9  # F1@0.5 a family must reach on its training particle

# optimiser steps the gate gives each family (ADiT's steps are cheap: a transformer on latents,
# the first ae_fraction of them train the autoencoder)
GATE_STEPS: dict[str, int] = {"cdvae": 3000, "diffcsp": 3000, "flowmm": 3000, "mattergen": 3000, "adit": 8000}

# per-family sampler settings of the gate: CDVAE's annealed Langevin needs >= 30 steps per noise
# level (the reference runs 100 per level); ADiT's DiT gets 6 blocks; MatterGen samples in 100
# steps with 30 Sinkhorn rounds of the site assignment (10 in training)
GATE_FAMILY_OVERRIDES: dict[str, dict[str, object]] = {"cdvae": {"sample_steps": 600},
                                                      "mattergen": {"sample_steps": 100,
                                                                    "sample_exclusion_iters": 30},
                                                      "adit": {"dit_layers": 6, "ae_fraction": 0.15}}


@dataclass(frozen=True)
class OverfitResult:
    """Outcome of :func:`overfit`.

    ``f1`` (n_samples,) F1@0.5 of each sampled particle against the training particle,
    ``f1_0p1`` the same at 0.1 Å, ``count_error`` per sample; ``losses`` the training loss per
    step; ``train_seconds`` / ``sample_seconds`` wall-clock times; ``n_atoms`` of the target.
    """

    model: str
    steps: int
    n_atoms: int
    f1: tuple[float, ...]
    f1_0p1: tuple[float, ...]
    count_error: tuple[float, ...]
    losses: tuple[float, ...]
    train_seconds: float
    sample_seconds: float

    @property
    def f1_mean(self) -> float:
        """Mean F1@0.5 over the samples."""
        return float(np.mean(self.f1))

    @property
    def f1_std(self) -> float:
        """Standard deviation of F1@0.5 over the samples."""
        return float(np.std(self.f1))


def gate_condition(cell: UnitCell, radius_angstrom: float, *, seed: int = 0,
                   centre_frac: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> tuple[Condition, Particle]:
    """The gate's training sample: a seeded paper-protocol rotation of ``cell`` at R (Å), as a
    generator condition and the carved particle (the data, never a generator input)."""
    q = draw_paper_quaternion(np.random.default_rng(seed))
    cond = Condition(cell=cell, radius_angstrom=float(radius_angstrom), quaternion=np.asarray(q, float),
                     centre_frac=centre_frac)
    return cond, carve(cell, float(radius_angstrom), centre_frac=centre_frac, quaternion=q).particle


def gate_config(model_name: str, base: str = "small", **overrides: object) -> ModelConfig:
    """The configuration the gate trains ``model_name`` with: the ``base`` preset (whose
    architecture, schedule, EMA and sampler are the ones used at scale), batches of 8, the
    family's :data:`GATE_FAMILY_OVERRIDES`, then ``overrides``."""
    from c2np.models.config import get_config

    return get_config(base, **{"batch_size": 8, **GATE_FAMILY_OVERRIDES.get(model_name, {}), **overrides})


def gate_steps(model_name: str) -> int:
    """Optimiser steps the gate gives a family."""
    return GATE_STEPS[model_name]


def overfit(model_name: str, cfg: ModelConfig, cond: Condition, target: Particle, *, steps: int,
            batch_size: int | None = None, n_samples: int = 8, sample_steps: int | None = None,
            seed: int = 0, sample_batch: int = 4) -> OverfitResult:
    """Train a fresh ``model_name`` generator for ``steps`` optimiser steps on batches of
    ``batch_size`` copies of (``cond``, ``target``) with the config's optimiser, schedule and
    EMA (:mod:`c2np.models.optim`), then score ``n_samples`` samples of ``cond`` (EMA weights
    when the config has an EMA) with :func:`c2np.metrics.forward_metrics`."""
    import torch

    from c2np.models.faithful_gate import train_gate_model

    trained = train_gate_model(model_name, cfg, cond, target, steps=steps, seed=seed, batch_size=batch_size)
    model, ema, losses, train_s = trained.model, trained.ema, trained.losses, trained.train_seconds
    model.eval()
    f1, f1_01, ce = [], [], []
    t0 = time.perf_counter()
    gs = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        samples: list[Particle] = []
        ctx = ema.applied(model) if ema is not None else nullcontext()
        with ctx:
            while len(samples) < n_samples:
                k = min(sample_batch, n_samples - len(samples))
                samples += model.sample([cond] * k, gs, steps=sample_steps)
    sample_s = time.perf_counter() - t0
    for p in samples:
        v = forward_metrics(p.numbers, p.positions_angstrom, target.numbers, target.positions_angstrom,
                            radius_angstrom=cond.radius_angstrom).values
        f1.append(float(v["f1@0.5"]))
        f1_01.append(float(v["f1@0.1"]))
        ce.append(float(v["count_error"]))
    return OverfitResult(model=model_name, steps=int(steps), n_atoms=target.n_atoms, f1=tuple(f1),
                         f1_0p1=tuple(f1_01), count_error=tuple(ce), losses=tuple(losses),
                         train_seconds=train_s, sample_seconds=sample_s)

