"""The one-particle overfit gate run once per trained model and several samplers.

:func:`train_gate_model` trains a fresh task-1 generator on batches of copies of ONE
(condition, particle) pair, as :func:`c2np.models.overfit.overfit` does (same optimiser,
schedule, EMA); :func:`score_gate_samples` then draws samples of that condition under a
sampler setting (config fields such as ``sample_steps`` / ``corrector_steps``, the trained
weights unchanged) and scores each with the harness's per-sample metric code
(:func:`c2np.metrics.forward_metrics`); :func:`baseline_gate_rows` scores the task-1 reference
baselines (analytic carve, memorisation, random ball) on the same condition.
:func:`summarise` gives the mean with a 95 % bootstrap interval
(:func:`c2np.evaluation.aggregate.bootstrap_mean_ci`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from c2np.carving import Particle
from c2np.evaluation.aggregate import bootstrap_mean_ci
from c2np.metrics import forward_metrics
from c2np.models.config import ModelConfig
from c2np.models.data import Condition

__all__ = ["TrainedGateModel", "train_gate_model", "score_gate_samples", "score_particles", "summarise",
           "baseline_gate_rows"]


@dataclass
class TrainedGateModel:
    """A generator trained on one condition: the model (live weights), its EMA (None when the
    config has none), the loss per step, the steps taken and the training wall-clock seconds."""

    family: str
    cfg: ModelConfig
    model: Any
    ema: Any
    losses: list[float]
    steps: int
    train_seconds: float


def train_gate_model(family: str, cfg: ModelConfig, cond: Condition, target: Particle, *, steps: int,
                     seed: int = 0, batch_size: int | None = None, device: str = "cpu",
                     max_seconds: float | None = None, progress_every: int = 0) -> TrainedGateModel:
    """Train a fresh ``family`` generator for ``steps`` optimiser steps (or until
    ``max_seconds`` of wall clock, checked every step) on batches of ``batch_size`` copies of
    (``cond``, ``target``). The schedule spans ``steps``; ``progress_every`` > 0 prints the
    mean loss every that many steps."""
    import torch

    from c2np.models.optim import build_optimizer, optimizer_step
    from c2np.models.training import build_model, place, resolve_device

    cfg = replace(cfg, epochs=1, steps_per_epoch=int(steps))
    bs = int(batch_size or cfg.batch_size)
    torch.manual_seed(seed)
    model = place(build_model(family, "forward", cfg), resolve_device(device))
    opt, sched, ema = build_optimizer(model, cfg)
    g = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    conds, parts = [cond] * bs, [target] * bs
    losses: list[float] = []
    model.train()
    t0 = time.perf_counter()
    for i in range(int(steps)):
        loss, _ = model.loss(conds, parts, g)
        optimizer_step(model, loss, opt, sched, ema, grad_clip=cfg.grad_clip)
        losses.append(float(loss.detach()))
        if progress_every > 0 and (i + 1) % progress_every == 0:
            print(f"  {family} step {i + 1}/{steps} loss {np.mean(losses[-progress_every:]):.4f} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
        if max_seconds is not None and time.perf_counter() - t0 >= max_seconds:
            break
    return TrainedGateModel(family=family, cfg=cfg, model=model, ema=ema, losses=losses, steps=len(losses),
                            train_seconds=time.perf_counter() - t0)


def score_particles(samples: Sequence[Particle | None], target: Particle, radius_angstrom: float
                    ) -> dict[str, list[float]]:
    """Per-sample F1@0.5, F1@0.1 and count error of ``samples`` against ``target``
    (:func:`c2np.metrics.forward_metrics`; None is a failure, scored as the harness does)."""
    out: dict[str, list[float]] = {"f1@0.5": [], "f1@0.1": [], "count_error": []}
    for p in samples:
        v = forward_metrics(None if p is None else p.numbers, None if p is None else p.positions_angstrom,
                            target.numbers, target.positions_angstrom, radius_angstrom=radius_angstrom).values
        for k in out:
            out[k].append(float(v[k]))
    return out


def score_gate_samples(trained: TrainedGateModel, cond: Condition, target: Particle, *,
                       sampler: dict[str, Any] | None = None, n_samples: int = 8, seed: int = 0,
                       sample_batch: int = 4) -> dict[str, Any]:
    """Draw ``n_samples`` particles of ``cond`` from ``trained`` (EMA weights when present) with
    the config fields ``sampler`` changed for sampling only, and score them
    (:func:`score_particles`); also ``sample_seconds`` and the sampler config used."""
    import torch

    model = trained.model
    live_cfg = model.cfg
    model.cfg = replace(live_cfg, **(sampler or {}))
    model.eval()
    samples: list[Particle] = []
    t0 = time.perf_counter()
    try:
        gs = torch.Generator(device=next(model.parameters()).device).manual_seed(seed + 1)
        with torch.no_grad(), (trained.ema.applied(model) if trained.ema is not None else nullcontext()):
            while len(samples) < n_samples:
                k = min(sample_batch, n_samples - len(samples))
                samples += model.sample([cond] * k, gs)
        used = {k: getattr(model.cfg, k) for k in ("sample_steps", "corrector_steps", "langevin_levels")}
    finally:
        model.cfg = live_cfg
    return {**score_particles(samples, target, cond.radius_angstrom), "sample_seconds": time.perf_counter() - t0,
            "sampler": used}


def summarise(values: Sequence[float], *, seed: int = 0) -> dict[str, float]:
    """Mean and 95 % percentile-bootstrap interval of ``values``."""
    v = np.asarray(values, dtype=np.float64)
    lo, hi = bootstrap_mean_ci(v, seed=seed)[0]
    return {"mean": float(v.mean()), "lo": float(lo), "hi": float(hi)}


def baseline_gate_rows(cond: Condition, target: Particle, *, sample_id: str, n_samples: int = 8,
                       seed: int = 0) -> dict[str, dict[str, list[float]]]:
    """Per-sample scores of the task-1 reference baselines on the gate's condition: the analytic
    carve, memorisation of the one training particle, and ``n_samples`` random balls (seeds
    ``seed``..)."""
    from c2np.baselines import Memorisation, analytic_carve, random_ball
    from c2np.carving import rotate_positions
    from c2np.tasks import ForwardQuery

    q = ForwardQuery(sample_id=sample_id, cell=cond.cell, radius_angstrom=cond.radius_angstrom,
                     quaternion=cond.quaternion, centre_frac=cond.centre_frac)
    qi = np.asarray(cond.quaternion, dtype=np.float64)
    unrot = rotate_positions(target.positions_angstrom, np.array([-qi[0], -qi[1], -qi[2], qi[3]]))
    memo = Memorisation({cond.cell.material_id: {int(round(cond.radius_angstrom)): Particle(target.numbers, unrot)}})
    R = cond.radius_angstrom
    return {"analytic-carve": score_particles([analytic_carve(q)] * n_samples, target, R),
            "memorisation": score_particles([memo(q)] * n_samples, target, R),
            "random-ball": score_particles([random_ball(q, seed=seed + i) for i in range(n_samples)], target, R)}
