"""Training, checkpoints, resume and prediction for the learned models.

A run directory holds ``config.json`` (model, task, config, seed), ``log.csv`` (one row per
epoch: train and validation loss, geometric fidelity, throughput), and ``checkpoint/``:
``model.safetensors`` (weights), ``optim.pt`` + ``rng.pt`` (loaded with
``torch.load(weights_only=True)``) and ``state.json`` (epoch, step, NumPy RNG state).

Training and prediction use only the store interface (``recipes``, ``cells``,
``particle(row)``). Task-1 prediction builds its inputs with
:func:`~c2np.models.data.condition_for_row` and never calls ``particle(row)``.
"""

from __future__ import annotations

import csv
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from c2np.particle import Particle
from c2np.errors import C2NPInputError
from c2np.models import MODEL_NAMES, TASKS
from c2np.models.config import ModelConfig, get_config
from c2np.models.data import condition_for_row, lattice_target, row_sample_id, select_rows
from c2np.models.scoring import atom_f1, chamfer_angstrom, count_error, lattice_errors
from c2np.fileio import atomic_write

__all__ = ["build_model", "train", "predict", "load_run", "TrainResult", "LOG_COLUMNS"]

LOG_COLUMNS = ["epoch", "step", "train_loss", "val_loss", "fidelity_f1_0p5", "fidelity_chamfer_angstrom",
               "fidelity_count_error", "val_lattice_rmse", "val_sg_accuracy", "train_samples_per_s",
               "elapsed_s"]


def build_model(model: str, task: str, cfg: ModelConfig) -> Any:
    """A fresh model of family ``model`` for ``task`` ('forward' or 'inverse')."""
    if model not in MODEL_NAMES:
        raise C2NPInputError(f"unknown model {model!r}; choose one of {list(MODEL_NAMES)}")
    if task not in TASKS:
        raise C2NPInputError(f"unknown task {task!r}; choose one of {list(TASKS)}")
    if task == "forward":
        from c2np.models.generators import GENERATORS

        return GENERATORS[model](cfg)
    from c2np.models.predictors import InversePredictor

    return InversePredictor(model, cfg)


@dataclass(frozen=True)
class TrainResult:
    """Outcome of :func:`train`: run folder, last epoch and step, and the log rows."""

    run_dir: Path
    epoch: int
    step: int
    log: list[dict[str, float]]


def _material(store: Any, row: int) -> str:
    return store.recipes.materials[int(store.recipes.material_index[row])]


def _batch_loss(model: Any, store: Any, rows: np.ndarray, g: Any) -> tuple[Any, dict[str, float]]:
    """Loss on recipe ``rows``: task 1 gets conditions + target particles, task 2 particles +
    lattice targets."""
    particles = [store.particle(int(r)) for r in rows]
    if model.task == "forward":
        conds = [condition_for_row(store, int(r)) for r in rows]
        return model.loss(conds, particles, g)
    targets = [lattice_target(store.cells[_material(store, int(r))]) for r in rows]
    return model.loss(particles, np.stack([t[0] for t in targets]), np.array([t[1] for t in targets]), g)


def _fidelity(model: Any, store: Any, rows: np.ndarray, seed: int, steps: int | None = None) -> dict[str, float]:
    """Geometric fidelity on ``rows``: task 1 atom F1 at 0.5 Å, Chamfer (Å), count error of
    sampled particles; task 2 lattice RMSE and space-group accuracy."""
    import torch

    model.eval()
    try:
        if model.task == "forward":
            g = torch.Generator().manual_seed(seed)
            f1, ch, ce = [], [], []
            for r in rows:
                pred = model.sample([condition_for_row(store, int(r))], g, steps=steps)[0]
                ref = store.particle(int(r))
                f1.append(atom_f1(pred, ref, tol_angstrom=0.5))
                ch.append(chamfer_angstrom(pred, ref))
                ce.append(count_error(pred, ref))
            return {"fidelity_f1_0p5": float(np.mean(f1)), "fidelity_chamfer_angstrom": float(np.mean(ch)),
                    "fidelity_count_error": float(np.mean(ce))}
        lat, sg = model.predict([store.particle(int(r)) for r in rows])
        tg = [lattice_target(store.cells[_material(store, int(r))]) for r in rows]
        e = lattice_errors(lat, np.stack([t[0] for t in tg]), sg, np.array([t[1] for t in tg]))
        return {"val_lattice_rmse": e["lattice_rmse"], "val_sg_accuracy": e["sg_accuracy"]}
    finally:
        model.train()


def _read_log(path: Path) -> list[dict[str, float]]:
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return [{k: float(v) for k, v in row.items() if v != ""} for row in csv.DictReader(fh)]


def _write_log(path: Path, rows: list[dict[str, float]]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=LOG_COLUMNS)
    w.writeheader()
    for r in rows:
        w.writerow({k: (int(r[k]) if k in ("epoch", "step") else f"{r[k]:.6g}") if k in r else ""
                    for k in LOG_COLUMNS})
    with atomic_write(path) as fh:
        fh.write(buf.getvalue())


def _save_checkpoint(run: Path, model: Any, opt: Any, g: Any, rng: np.random.Generator,
                     epoch: int, step: int) -> None:
    import torch
    from safetensors.torch import save_file

    ck = run / "checkpoint"
    ck.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    save_file(tensors, str(ck / "model.safetensors.tmp"))
    (ck / "model.safetensors.tmp").replace(ck / "model.safetensors")
    torch.save(opt.state_dict(), ck / "optim.pt.tmp")
    (ck / "optim.pt.tmp").replace(ck / "optim.pt")
    torch.save({"torch_generator": g.get_state()}, ck / "rng.pt.tmp")
    (ck / "rng.pt.tmp").replace(ck / "rng.pt")
    with atomic_write(ck / "state.json") as fh:
        json.dump({"epoch": epoch, "step": step, "numpy_rng": rng.bit_generator.state}, fh)


def load_weights(model: Any, run_dir: str | Path) -> None:
    """Load ``checkpoint/model.safetensors`` of a run into ``model`` (strict)."""
    from safetensors.torch import load_file

    path = Path(run_dir) / "checkpoint" / "model.safetensors"
    if not path.is_file():
        raise C2NPInputError(f"{path}: no checkpoint in run folder {run_dir}")
    model.load_state_dict(load_file(str(path)), strict=True)


def load_run(run_dir: str | Path) -> tuple[Any, dict[str, Any]]:
    """(model with the saved weights, run metadata) of a run folder."""
    run = Path(run_dir)
    meta_path = run / "config.json"
    if not meta_path.is_file():
        raise C2NPInputError(f"{meta_path}: not a run folder (no config.json)")
    try:
        meta = json.loads(meta_path.read_text())
        cfg = ModelConfig.from_dict(meta["config"])
        model = build_model(meta["model"], meta["task"], cfg)
    except (KeyError, json.JSONDecodeError, TypeError) as exc:
        raise C2NPInputError(f"{meta_path}: malformed run metadata ({exc})") from exc
    load_weights(model, run)
    model.eval()
    return model, meta


def train(store: Any, model_name: str, task: str, cfg: ModelConfig | str, out_dir: str | Path, *,
          seed: int = 0, resume: bool = False, progress: bool = True,
          epochs: int | None = None) -> TrainResult:
    """Train ``model_name`` on ``task`` from the store's train split; validate on its val split.

    ``epochs`` overrides the config's total (used to extend a run when resuming). Writes the
    run folder (see module docstring) and returns the final epoch, step and log.
    """
    import torch
    from tqdm import tqdm

    if isinstance(cfg, str):
        cfg = get_config(cfg)
    run = Path(out_dir)
    meta_path = run / "config.json"
    state_path = run / "checkpoint" / "state.json"
    meta = {"model": model_name, "task": task, "config": cfg.to_dict(), "seed": int(seed),
            "protocol": store.recipes.protocol, "fingerprint": str(getattr(store, "fingerprint", ""))}
    if resume:
        if not state_path.is_file():
            raise C2NPInputError(f"{run}: nothing to resume (no checkpoint/state.json)")
        old = json.loads(meta_path.read_text())
        if (old["model"], old["task"]) != (model_name, task):
            raise C2NPInputError(f"{run}: run is {old['model']}/{old['task']}, not {model_name}/{task}")
        cfg = ModelConfig.from_dict(old["config"])
        seed = int(old["seed"])
        meta = old
    elif state_path.is_file():
        raise C2NPInputError(f"{run}: already holds a trained run; pass --resume or choose another --out")
    total_epochs = int(epochs if epochs is not None else cfg.epochs)

    torch.manual_seed(seed)
    model = build_model(model_name, task, cfg)
    train_rows = select_rows(store, "train", max_radius_angstrom=cfg.max_train_radius_angstrom)
    if len(train_rows) == 0:
        raise C2NPInputError("the store has no training rows")
    val_all = select_rows(store, "val", max_radius_angstrom=cfg.max_train_radius_angstrom)
    if len(val_all) == 0:
        val_all = train_rows
    val_rows = np.sort(np.random.default_rng(seed + 1).choice(val_all, size=min(cfg.n_val, len(val_all)),
                                                              replace=False))
    fid_rows = val_rows[:cfg.n_fidelity] if task == "forward" else val_rows
    if task == "inverse":
        mats = sorted({_material(store, int(r)) for r in train_rows})
        model.set_normalisation(np.stack([lattice_target(store.cells[m])[0] for m in mats]))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    g = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    epoch, step = 0, 0
    log: list[dict[str, float]] = []
    if resume:
        st = json.loads(state_path.read_text())
        load_weights(model, run)  # includes normalisation buffers
        opt.load_state_dict(torch.load(run / "checkpoint" / "optim.pt", weights_only=True))
        g.set_state(torch.load(run / "checkpoint" / "rng.pt", weights_only=True)["torch_generator"])
        rng.bit_generator.state = st["numpy_rng"]
        epoch, step = int(st["epoch"]), int(st["step"])
        log = [r for r in _read_log(run / "log.csv") if r["epoch"] <= epoch]
    else:
        run.mkdir(parents=True, exist_ok=True)
        with atomic_write(meta_path) as fh:
            json.dump(meta, fh, indent=2)
    model.train()
    t_start = time.perf_counter()
    while epoch < total_epochs:
        losses = []
        t0 = time.perf_counter()
        bar = tqdm(range(cfg.steps_per_epoch), desc=f"{model_name}/{task} epoch {epoch + 1}/{total_epochs}",
                   disable=not progress, leave=False)
        for _ in bar:
            rows = rng.choice(train_rows, size=cfg.batch_size, replace=len(train_rows) < cfg.batch_size)
            loss, _ = _batch_loss(model, store, rows, g)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"{model_name}/{task}: non-finite loss at step {step}")
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            losses.append(float(loss.item()))
            step += 1
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
        dt = time.perf_counter() - t0
        epoch += 1
        with torch.no_grad():
            vg = torch.Generator().manual_seed(seed + 12345)
            model.eval()
            val = [float(_batch_loss(model, store, val_rows[i:i + cfg.batch_size], vg)[0].item())
                   for i in range(0, len(val_rows), cfg.batch_size)]
            model.train()
        row = {"epoch": epoch, "step": step, "train_loss": float(np.mean(losses)),
               "val_loss": float(np.mean(val)),
               "train_samples_per_s": cfg.steps_per_epoch * cfg.batch_size / max(dt, 1e-9),
               "elapsed_s": time.perf_counter() - t_start}
        row.update(_fidelity(model, store, fid_rows, seed + 999))
        log.append(row)
        _write_log(run / "log.csv", log)
        _save_checkpoint(run, model, opt, g, rng, epoch, step)
    return TrainResult(run_dir=run, epoch=epoch, step=step, log=log)


def predict(run_dir: str | Path, store: Any, split: str, out: str | Path, *, subset: str = "eval",
            seed: int = 0, progress: bool = True, steps: int | None = None,
            per_group: int | None = None) -> dict[str, Any]:
    """Write predictions of a trained run for ``split`` (task 1: extxyz with
    ``info["sample_id"]``; task 2: CSV ``sample_id,a,b,c,alpha,beta,gamma,spacegroup``).

    The rows are exactly those ``c2np evaluate`` scores (``c2np.tasks.select_rows``):
    ``subset`` 'eval' = the harness's fixed, seeded rotations per (material, R) (``per_group``
    of them, default the harness's 8), 'full' = every row. Splits: train, val, id, ood, test
    (id + ood), heldout. Returns a summary with the number of samples and the throughput.
    """
    import torch
    from tqdm import tqdm

    from c2np.tasks import EVAL_ROTATIONS_PER_GROUP
    from c2np.tasks import select_rows as eval_rows

    model, meta = load_run(run_dir)
    cfg = model.cfg
    rows = eval_rows(store.recipes, split, subset,
                     per_group=EVAL_ROTATIONS_PER_GROUP if per_group is None else int(per_group))
    if len(rows) == 0:
        raise C2NPInputError(f"split {split!r} has no samples in this store")
    out = Path(out)
    t0 = time.perf_counter()
    bs = max(1, cfg.batch_size)
    chunks = [rows[i:i + bs] for i in range(0, len(rows), bs)]
    if model.task == "forward":
        g = torch.Generator().manual_seed(seed)
        frames: list[tuple[Particle, dict[str, Any]]] = []
        for chunk in tqdm(chunks, desc=f"sampling {meta['model']}", disable=not progress):
            conds = [condition_for_row(store, int(r)) for r in chunk]
            for r, p in zip(chunk, model.sample(conds, g, steps=steps)):
                frames.append((p, {"sample_id": row_sample_id(store, int(r)), "model": meta["model"]}))
        from c2np.particle_io import write_extxyz

        write_extxyz(out, frames)
    else:
        lines = ["sample_id,a,b,c,alpha,beta,gamma,spacegroup"]
        for chunk in tqdm(chunks, desc=f"predicting {meta['model']}", disable=not progress):
            lat, sg = model.predict([store.particle(int(r)) for r in chunk])
            for r, l, s in zip(chunk, lat, sg):
                lines.append(",".join([row_sample_id(store, int(r))] + [f"{x:.6f}" for x in l] + [str(int(s))]))
        with atomic_write(out) as fh:
            fh.write("\n".join(lines) + "\n")
    dt = time.perf_counter() - t0
    return {"file": str(out), "model": meta["model"], "task": meta["task"], "split": split,
            "subset": subset, "n_samples": int(len(rows)), "seconds": dt,
            "samples_per_s": len(rows) / max(dt, 1e-9)}
