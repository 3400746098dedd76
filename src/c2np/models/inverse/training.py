"""Training a task-2 crystal generator (:func:`fit_generator`) on its training pairs
(:func:`~c2np.models.inverse.examples.training_pairs`): batches of one composition, AdamW,
warm-up then cosine learning rate (:func:`learning_rate_factor`), gradient clipping, an
optional wall-clock budget and checkpoints."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from c2np.errors import C2NPInputError
from c2np.models.inverse.config import GenConfig
from c2np.models.inverse.examples import CellExample, composition_key
from c2np.models.inverse.generator import CrystalGenerator
from c2np.models.inverse.registry import process_for

__all__ = ["fit_generator", "load_init_state", "learning_rate_factor"]


def fit_generator(examples: Sequence[CellExample], cfg: GenConfig, *, log: Any = None,
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
    feats = CrystalGenerator.features([e.descriptor for e in examples])
    process = process_for(cfg)
    lat_n, stats = process.training_lattices(
        np.stack([e.lattice_angstrom / e.descriptor.scale_angstrom for e in examples]),
        np.array([len(e.slots) for e in examples]))
    if process.standardised_lattice:
        lat_mean = lat_n.mean(axis=0)
        lat_std = float(np.std(lat_n - lat_mean)) + 1e-3
    else:                               # the lattice in units of s, O(1), as theirs in Å
        lat_mean, lat_std = np.zeros((3, 3)), 1.0
    comps = sorted({composition_key(e.slots) for e in examples})
    model = CrystalGenerator(cfg, feats.shape[1], comps, feats.mean(0), feats.std(0) + 1e-3, lat_mean, lat_std,
                             **stats)
    if init_state is not None:
        load_init_state(model, init_state)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=1e-4)
    comp_of = np.array([comps.index(composition_key(e.slots)) for e in examples])
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


def load_init_state(model: CrystalGenerator, state: Mapping[str, Tensor]) -> None:
    """Load warm-start weights into ``model``. A space-group conditioned model may start from
    an unconditioned one's weights: its embedding (absent there) keeps its zero start, so it
    begins as exactly that network; any other missing or unexpected tensor is an error."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    allowed = {"sg_embed.weight"} if model.cfg.spacegroups else set()
    bad = sorted(set(missing) - allowed) + sorted(unexpected)
    if bad:
        raise C2NPInputError(f"init_state does not match this generator's configuration: {', '.join(bad[:5])}")


def learning_rate_factor(progress: float, *, warmup: float = 0.02, floor: float = 0.02) -> float:
    """The learning-rate multiplier at training progress ``progress`` in [0, 1] (the larger
    of the step fraction and the time-budget fraction): linear warm-up, then cosine to
    ``floor``."""
    p = min(max(progress, 0.0), 1.0)
    if p < warmup:
        return max(p / warmup, 1e-3)
    q = (p - warmup) / (1.0 - warmup)
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * q))
