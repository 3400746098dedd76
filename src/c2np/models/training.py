"""Training, checkpoints, resume and prediction for the learned models.

A run directory holds ``config.json`` (model, task, config, seed, protocol, dataset
fingerprint, the materials and radii trained and validated on, device), ``log.csv`` (one row
per epoch: train and validation loss, validation fidelity scored by the evaluation harness
with 95 % intervals, learning rate, throughput), ``checkpoint/`` (the last epoch:
``model.safetensors`` live weights, ``ema.safetensors`` their EMA, ``optim.pt`` + ``rng.pt``
loaded with ``torch.load(weights_only=True)``, ``state.json``), ``best/`` (the evaluation
weights — EMA when on — of the epoch with the best validation fidelity, and ``state.json``) and
``reference_fidelity.json`` (the reference baselines scored on the same fidelity rows).

Rows: training and validation rows exclude the protocol's held-out materials, the radius
limit applies to both, and no rows is an error (:func:`~c2np.models.data.training_rows`); the
task-2 normalisation is fitted on the training materials only. Fidelity is the harness's
(:func:`c2np.evaluation.evaluate_forward` / ``evaluate_inverse``): same metrics, same failure
rule, bootstrap intervals. Task-1 prediction builds its inputs with
:func:`~c2np.models.data.condition_for_row` and never calls ``particle(row)``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from c2np.errors import C2NPError, C2NPInputError
from c2np.fileio import atomic_path, atomic_write, read_text_bounded
from c2np.limits import check as check_limit
from c2np.models import MODEL_NAMES, TASKS
from c2np.models.config import ModelConfig, get_config
from c2np.models.data import Condition, condition_for_row, condition_from_query, lattice_target, training_rows
from c2np.models.runfiles import check_model_size, load_weights_into, read_json, read_log, read_torch, read_weights
from c2np.models.schemas import BEST_STATE_SCHEMA, PARTIAL_PREDICTIONS_RECORD_SCHEMA, STATE_SCHEMA
from c2np.particle import Particle
from c2np.sharding import check_shard_set, ids_sha256, shard_positions
from c2np.terminal import clipped, printable

__all__ = ["build_model", "batch_loss", "train", "predict", "load_run", "TrainResult", "LOG_COLUMNS", "DEVICES",
           "CHECKPOINTS", "FIDELITY_METRICS", "SELECTION", "resolve_device", "place", "generator", "fidelity",
           "reference_fidelity", "validation_rows", "query_items", "batch_seed", "batch_shard_positions",
           "merge_predictions", "PARTIAL_PREDICTIONS_SCHEMA", "read_run_meta", "checked_config"]

DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")
CHECKPOINTS: tuple[str, ...] = ("best", "last")
#: harness metrics logged per epoch (mean and 95 % interval), by task
FIDELITY_METRICS: dict[str, tuple[str, ...]] = {
    "forward": ("f1@0.5", "f1@0.1", "chamfer", "count_error"),
    "inverse": ("joint_accuracy_paper", "spacegroup_accuracy", "lattice_rmse_paper", "length_rmse"),
}
#: checkpoint selection: (metric, higher is better) in priority order (later ones break ties)
SELECTION: dict[str, tuple[tuple[str, bool], ...]] = {
    "forward": (("f1@0.5", True), ("chamfer", False)),
    "inverse": (("joint_accuracy_paper", True), ("lattice_rmse_paper", False)),
}
LOG_COLUMNS = (["epoch", "step", "train_loss", "val_loss", "lr"]
               + [f"val_{m}{s}" for t in TASKS for m in FIDELITY_METRICS[t] for s in ("", "_lo", "_hi")]
               + ["n_fidelity", "fidelity_failed", "train_samples_per_s", "elapsed_s"])


def resolve_device(name: str) -> Any:
    """``torch.device`` for 'cpu', 'cuda' or 'auto' (cuda when available, else cpu); 'cuda'
    without a usable GPU is an environment error (:class:`C2NPInputError`)."""
    import torch

    if name not in DEVICES:
        raise C2NPInputError(f"unknown device {name!r}; choose one of {list(DEVICES)}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise C2NPInputError("--device cuda: no CUDA device is available to torch "
                             f"{torch.__version__}; use --device cpu or auto")
    return torch.device(name)


def place(model: Any, device: Any) -> Any:
    """``model`` moved to ``device``; a model whose internals still build tensors on the CPU
    (no ``device_ready`` attribute) is refused on any other device with a clear error."""
    if device.type != "cpu" and not getattr(model, "device_ready", False):
        raise C2NPInputError(f"{type(model).__name__} builds its tensors on the CPU and cannot run on "
                             f"{device} yet; use --device cpu")
    return model.to(device)


def generator(seed: int, model: Any) -> Any:
    """A seeded ``torch.Generator`` on the device of ``model``'s parameters (the models draw
    their noise on the generator's device)."""
    import torch

    return torch.Generator(device=next(model.parameters()).device).manual_seed(int(seed))


def batch_seed(seed: int, batch_index: int) -> int:
    """The seed of batch ``batch_index`` of a sampling run seeded ``seed``: each batch draws its
    own noise stream, so a batch's samples do not depend on the batches before it (and a shard
    of whole batches reproduces its part of one run)."""
    return int(np.random.SeedSequence([int(seed), int(batch_index)]).generate_state(1, np.uint64)[0] >> 1)


def build_model(model: str, task: str, cfg: ModelConfig) -> Any:
    """A fresh model of family ``model`` for ``task`` ('forward' or 'inverse')."""
    if model not in MODEL_NAMES:
        raise C2NPInputError(f"unknown model {model!r}; choose one of {list(MODEL_NAMES)}")
    if task not in TASKS:
        raise C2NPInputError(f"unknown task {task!r}; choose one of {list(TASKS)}")
    if task == "forward":
        from c2np.models.forward import FORWARD_FAMILIES

        return FORWARD_FAMILIES[model](cfg)
    from c2np.models.predictors import InversePredictor

    return InversePredictor(model, cfg)


@dataclass(frozen=True)
class TrainResult:
    """Outcome of :func:`train`: run folder, last epoch and step, the log rows, the data
    description (materials and radii trained / validated on) and the best epoch."""

    run_dir: Path
    epoch: int
    step: int
    log: list[dict[str, float]]
    data: dict[str, Any]
    best: dict[str, Any]


def _material(store: Any, row: int) -> str:
    return store.recipes.materials[int(store.recipes.material_index[row])]


def batch_loss(model: Any, store: Any, rows: np.ndarray, g: Any) -> tuple[Any, dict[str, float]]:
    """Loss on recipe ``rows``: task 1 gets conditions + target particles, task 2 particles +
    lattice targets."""
    particles = [store.particle(int(r)) for r in rows]
    if model.task == "forward":
        conds = [condition_for_row(store, int(r)) for r in rows]
        return model.loss(conds, particles, g)
    targets = [lattice_target(store.cells[_material(store, int(r))]) for r in rows]
    return model.loss(particles, np.stack([t[0] for t in targets]), np.array([t[1] for t in targets]), g)


def _chunks(items: Any, size: int) -> list[Any]:
    size = max(1, int(size))
    return [items[i:i + size] for i in range(0, len(items), size)]


def _sample_forward(model: Any, items: list[tuple[str, Condition]], seed: int, *, steps: int | None,
                    batch: int, batches: list[int] | None = None, progress: bool = False,
                    desc: str = "", ablation: Any = None) -> dict[str, Particle]:
    """{sample id: sampled particle} for (id, task-1 input) pairs; the model sees the inputs only.
    The pairs are cut into batches of ``batch``; batch b draws its noise from
    :func:`batch_seed` (``seed``, b). ``batches``: sample only those batch indices (a shard).
    ``ablation``: a :class:`c2np.models.forward.ablation.Ablation` of the sampler's priors
    (None: as shipped)."""
    from tqdm import tqdm

    chunks = _chunks(items, batch)
    picked = range(len(chunks)) if batches is None else batches
    out: dict[str, Particle] = {}
    for b in tqdm(picked, desc=desc, disable=not progress):
        chunk = chunks[b]
        g = generator(batch_seed(seed, b), model)
        extra = {} if ablation is None else {"ablation": ablation}
        for (sid, _), p in zip(chunk, model.sample([c for _, c in chunk], g, steps=steps, **extra), strict=True):
            out[sid] = p
    return out


def _predict_inverse(model: Any, items: list[tuple[str, Particle]], *, batch: int, progress: bool = False,
                     desc: str = "") -> dict[str, dict[str, float]]:
    """{sample id: {a, b, c, alpha, beta, gamma, spacegroup}} for (id, particle) pairs; the model
    sees the particles only."""
    from tqdm import tqdm

    out: dict[str, dict[str, float]] = {}
    for chunk in tqdm(_chunks(items, batch), desc=desc, disable=not progress):
        lat, sg = model.predict([p for _, p in chunk])
        for (sid, _), lp, s in zip(chunk, lat, sg, strict=True):
            out[sid] = {**dict(zip(("a", "b", "c", "alpha", "beta", "gamma"), map(float, lp), strict=True)),
                        "spacegroup": int(s)}
    return out


def _fidelity_rows(store: Any, rows: np.ndarray) -> tuple[np.ndarray, str]:
    rows = np.unique(np.asarray(rows, dtype=np.int64))
    names = store.recipes.split_names()[rows] if len(rows) else np.zeros(0)
    if len(rows) == 0 or not np.all(names == names[0]):
        raise C2NPInputError("fidelity rows must be non-empty and come from one split")
    return rows, str(names[0])


def _score_rows(task: str, store: Any, rows: np.ndarray, split: str, preds: Any, *, model: str,
                n_resamples: int, id_index: dict[str, int] | None = None) -> dict[str, float]:
    """Harness scores (:func:`c2np.evaluation.harness.score_forward` / ``score_inverse``, the
    loop of ``c2np evaluate``) of ``preds`` on ``rows``, as ``val_{metric}`` with ``_lo``/``_hi``
    (95 % bootstrap interval), ``n_fidelity`` and ``fidelity_failed``."""
    from c2np.evaluation.harness import score_forward, score_inverse
    from c2np.evaluation.results import Results
    from c2np.tasks import inverse_target

    rec = store.recipes
    common: dict[str, Any] = {"id_index": id_index or {rec.sample_id(int(r)): int(r) for r in rows}, "split": split,
              "subset": "fidelity", "subset_definition": {"rows": "validation rows of a training run"},
              "model": model, "n_resamples": n_resamples}
    if task == "forward":
        res = score_forward(store, rows, preds, **common)
    else:
        mats = {rec.materials[int(m)] for m in rec.material_index[rows]}
        res = score_inverse(store, rows, preds, targets={m: inverse_target(store.cells[m]) for m in mats},
                            **common)
    assert isinstance(res, Results)  # no shard was asked for, so never PartialResults
    out: dict[str, float] = {"n_fidelity": float(len(rows)), "fidelity_failed": float(res.n_failed)}
    for m in FIDELITY_METRICS[task]:
        r = res.overall[m]
        out[f"val_{m}"], (out[f"val_{m}_lo"], out[f"val_{m}_hi"]) = float(r["mean"]), map(float, r["ci95"])
    return out


def fidelity(model: Any, store: Any, rows: np.ndarray, *, seed: int, steps: int | None = None,
             n_resamples: int = 1000) -> dict[str, float]:
    """Validation fidelity of ``model`` on recipe ``rows`` (one split) scored by the evaluation
    harness: ``val_{metric}`` (failure-penalised mean) with ``_lo``/``_hi`` (95 % bootstrap
    interval) for :data:`FIDELITY_METRICS` of the model's task, ``n_fidelity`` and
    ``fidelity_failed``."""
    import torch

    rows, split = _fidelity_rows(store, rows)
    rec = store.recipes
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            if model.task == "forward":
                items = [(rec.sample_id(int(r)), condition_for_row(store, int(r))) for r in rows]
                preds: Any = _sample_forward(model, items, seed, steps=steps, batch=model.cfg.batch_size)
            else:
                preds = _predict_inverse(model, [(rec.sample_id(int(r)), store.particle(int(r))) for r in rows],
                                         batch=model.cfg.batch_size)
    finally:
        model.train(was_training)
    return _score_rows(model.task, store, rows, split, preds, model="fidelity", n_resamples=n_resamples)


def reference_fidelity(store: Any, task: str, rows: np.ndarray, *,
                       n_resamples: int = 1000) -> dict[str, dict[str, float]]:
    """The reference baselines (task 1: analytic carve, memorisation, random ball; task 2:
    solver, composition lookup, majority class; :mod:`c2np.baselines`, fitted on the task's
    training examples) scored like :func:`fidelity` on the same ``rows``: {name: values}.
    A baseline with nothing to answer (memorisation of an unseen material) leaves the sample
    missing, i.e. a failure."""
    from c2np.baselines import FORWARD_BASELINES, INVERSE_BASELINES
    from c2np.tasks import ForwardQuery, ForwardTask, InverseQuery, InverseTask, opaque_sample_id

    rows, split = _fidelity_rows(store, rows)
    rec = store.recipes
    out: dict[str, dict[str, float]] = {}
    if task == "forward":
        ftask = ForwardTask(store, split, "full")
        queries = [ForwardQuery(rec.sample_id(int(r)), c.cell, c.radius_angstrom, c.quaternion, c.centre_frac)
                   for r in rows for c in [condition_for_row(store, int(r))]]
        for name, fit in FORWARD_BASELINES.items():
            base = fit(ftask)
            preds = {q.sample_id: p for q in queries if (p := _answer(base, q)) is not None}
            out[name] = _score_rows(task, store, rows, split, preds, model=name, n_resamples=n_resamples)
        return out
    itask = InverseTask(store, split, "full")
    ids = {opaque_sample_id(str(store.fingerprint), rec.sample_id(int(r))): int(r) for r in rows}
    iqueries = [InverseQuery(sid, store.particle(r)) for sid, r in ids.items()]
    for name, ifit in INVERSE_BASELINES.items():
        ibase = ifit(itask)
        preds = {q.sample_id: p for q in iqueries if (p := _answer(ibase, q)) is not None}
        out[name] = _score_rows(task, store, rows, split, preds, model=name, n_resamples=n_resamples,
                                id_index=ids)
    return out


def _answer(model: Any, query: Any) -> Any:
    """``model(query)``, or None (a missing prediction) where the model has nothing to say."""
    try:
        return model(query)
    except C2NPInputError:
        return None


def validation_rows(data: Any, cfg: ModelConfig, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(validation-loss rows, fidelity rows) of a run: seeded choices (``seed + 1``) of
    ``cfg.n_val`` and ``cfg.n_fidelity`` rows among the validation rows of ``data``
    (:class:`~c2np.models.data.TrainingRows`), sorted; the same every epoch."""
    pick = np.random.default_rng(seed + 1)
    val = np.sort(pick.choice(data.val, size=min(cfg.n_val, len(data.val)), replace=False))
    fid = np.sort(pick.choice(data.val, size=min(cfg.n_fidelity, len(data.val)), replace=False))
    return val, fid


def _selection_key(task: str, row: dict[str, float]) -> tuple[float, ...]:
    """Larger is better: the selection metrics of ``row`` signed by their direction."""
    return tuple(row[f"val_{m}"] * (1.0 if higher else -1.0) for m, higher in SELECTION[task])


def _read_log(path: Path) -> list[dict[str, float]]:
    return read_log(path, columns=tuple(LOG_COLUMNS), folder=path.parent)


def _write_log(path: Path, rows: list[dict[str, float]]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=LOG_COLUMNS)
    w.writeheader()
    for r in rows:
        w.writerow({k: (int(r[k]) if k in ("epoch", "step") else f"{r[k]:.6g}") if k in r else ""
                    for k in LOG_COLUMNS})
    with atomic_write(path) as fh:
        fh.write(buf.getvalue())


def _save_tensors(tensors: dict[str, Any], path: Path) -> None:
    """Write a safetensors file atomically (CPU copies)."""
    from safetensors.torch import save_file

    with atomic_path(path) as tmp:
        save_file({k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}, tmp)


def _torch_save(obj: Any, path: Path) -> None:
    import torch

    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def _eval_weights(model: Any, ema: Any) -> dict[str, Any]:
    """The weights used for evaluation and sampling: the EMA when on, else the live ones."""
    return ema.state_dict() if ema is not None else model.state_dict()


@contextlib.contextmanager
def _evaluation_weights(model: Any, ema: Any) -> Iterator[Any]:
    if ema is None:
        yield model
    else:
        with ema.applied(model):
            yield model


def _load_tensors(path: Path, device: Any, run: Path) -> dict[str, Any]:
    return read_weights(path, device=str(device), folder=run)


def read_run_meta(run: Path, *, keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """A run folder's ``config.json``, read by the guarded reader against
    :data:`~c2np.models.schemas.RUN_META_SCHEMA`, with the sizes it declares checked against
    the limits ``model_layers`` and ``weights_bytes`` before any network is built."""
    meta_path = run / "config.json"
    from c2np.models.schemas import RUN_META_SCHEMA

    meta = read_json(meta_path, what="run metadata", folder=run, schema=RUN_META_SCHEMA, keys=keys)
    try:
        cfg = ModelConfig.from_dict(meta["config"])
    except C2NPInputError as exc:
        raise C2NPInputError(f"{printable(meta_path)}: config: {exc}") from None
    checked_config(cfg, meta["model"], meta["task"], source=f"{printable(meta_path)}: config")
    return meta


def checked_config(cfg: ModelConfig, model_name: str, task: str, *, source: str) -> None:
    """Check the sizes ``cfg`` declares (``source`` names where it comes from) against the
    limits before the network is built: ``layers`` and ``dit_layers`` within ``model_layers``,
    the network's parameters (counted on the ``meta`` device) within ``weights_bytes``."""
    for name in ("layers", "dit_layers"):
        check_limit("model_layers", getattr(cfg, name), what=f"{source}.{name}")
    check_model_size(lambda: build_model(model_name, task, cfg), source=source)


def load_run(run_dir: str | Path, *, checkpoint: str = "best", device: str = "cpu") -> tuple[Any, dict[str, Any]]:
    """(model on ``device`` with the run's evaluation weights, run metadata). ``checkpoint``:
    'best' (the epoch with the best validation fidelity) or 'last' (the final epoch; its EMA
    weights when the run used EMA). ``meta["checkpoint"]`` records which epoch was loaded."""
    if checkpoint not in CHECKPOINTS:
        raise C2NPInputError(f"unknown checkpoint {checkpoint!r}; choose one of {list(CHECKPOINTS)}")
    run = Path(run_dir)
    meta_path = run / "config.json"
    if not os.path.lexists(meta_path):
        raise C2NPInputError(f"{printable(meta_path)}: not a run folder (no config.json)")
    meta = read_run_meta(run)
    cfg = ModelConfig.from_dict(meta["config"])
    model = build_model(meta["model"], meta["task"], cfg)
    dev = resolve_device(device)
    place(model, dev)
    folder = run / ("best" if checkpoint == "best" else "checkpoint")
    state_path = folder / "state.json"
    if not os.path.lexists(state_path):
        raise C2NPInputError(f"{printable(run)}: no {checkpoint!r} checkpoint ({printable(state_path)} missing); "
                             "train the run first")
    state = read_json(state_path, what="checkpoint state", folder=run, finite=False,
                      schema=BEST_STATE_SCHEMA if checkpoint == "best" else STATE_SCHEMA)
    if checkpoint == "best":
        weights = folder / "model.safetensors"
    else:
        weights = folder / ("ema.safetensors" if os.path.lexists(folder / "ema.safetensors") else "model.safetensors")
    load_weights_into(model, _load_tensors(weights, dev, run), source=weights)
    model.eval()
    meta = {**meta, "checkpoint": {"name": checkpoint, "epoch": int(state["epoch"]), "step": int(state["step"]),
                                   "weights": weights.name}}
    return model, meta


def _check_resume(run: Path, model_name: str, task: str) -> dict[str, Any]:
    state_path = run / "checkpoint" / "state.json"
    if not os.path.lexists(state_path):
        raise C2NPInputError(f"{printable(run)}: nothing to resume (no checkpoint/state.json)")
    old = read_run_meta(run, keys=("seed", "data"))
    if (old["model"], old["task"]) != (model_name, task):
        raise C2NPInputError(f"{run}: run is {old['model']}/{old['task']}, not {model_name}/{task}")
    return old


def _check_store(meta: dict[str, Any], store: Any, *, what: str) -> dict[str, Any]:
    """Compare a run's protocol and fingerprint with ``store``'s; returns the comparison."""
    return {"run_protocol": meta.get("protocol"), "store_protocol": store.recipes.protocol,
            "run_fingerprint": meta.get("fingerprint"), "store_fingerprint": str(store.fingerprint),
            "matches": (meta.get("protocol") == store.recipes.protocol
                        and meta.get("fingerprint") == str(store.fingerprint)), "checked_by": what}


def train(store: Any, model_name: str, task: str, cfg: ModelConfig | str, out_dir: str | Path, *,
          seed: int = 0, resume: bool = False, progress: bool = True,
          epochs: int | None = None, device: str = "cpu") -> TrainResult:
    """Train ``model_name`` on ``task`` from the store's train split; validate on its val split.

    ``epochs`` overrides the config's total (used to extend a run when resuming; the learning
    rate schedule spans the total). Writes the run folder (see module docstring) and returns
    the final epoch, step, log, data description and best epoch. Resuming checks that the
    store is the one the run started on.
    """
    import torch

    if isinstance(cfg, str):
        cfg = get_config(cfg)
    run = Path(out_dir)
    meta_path = run / "config.json"
    state_path = run / "checkpoint" / "state.json"
    dev = resolve_device(device)
    if resume:
        meta = _check_resume(run, model_name, task)
        check = _check_store(meta, store, what="resume")
        if not check["matches"]:
            raise C2NPInputError(f"{run}: resuming on another store (run: protocol {check['run_protocol']!r}, "
                                 f"fingerprint {str(check['run_fingerprint'])[:12]}; store: protocol "
                                 f"{check['store_protocol']!r}, fingerprint {check['store_fingerprint'][:12]})")
        cfg = ModelConfig.from_dict(meta["config"])
        seed = int(meta["seed"])
    elif state_path.is_file():
        raise C2NPInputError(f"{run}: already holds a trained run; pass --resume or choose another --out")
    if model_name not in MODEL_NAMES or task not in TASKS:
        build_model(model_name, task, cfg)  # raises the clear error
    if not resume:  # a resumed run's config was checked as its config.json was read
        checked_config(cfg, model_name, task, source="model config")
    if cfg.n_val < 1 or cfg.n_fidelity < 1:
        raise C2NPInputError(f"n_val and n_fidelity must be >= 1 (got {cfg.n_val}, {cfg.n_fidelity})")
    data = training_rows(store, max_radius_angstrom=cfg.max_train_radius_angstrom)
    if not resume:
        meta = {"model": model_name, "task": task, "config": cfg.to_dict(), "seed": int(seed),
                "protocol": store.recipes.protocol, "fingerprint": str(store.fingerprint),
                "data": data.summary(), "device": str(dev)}
    total_epochs = int(epochs if epochs is not None else cfg.epochs)

    torch.manual_seed(seed)
    model = build_model(model_name, task, cfg)
    val_rows, fid_rows = validation_rows(data, cfg, seed)
    if task == "inverse":  # normalisation fitted on the training materials only
        model.set_normalisation(np.stack([lattice_target(store.cells[m])[0] for m in data.train_materials]))
    place(model, dev)
    from c2np.models.optim import build_optimizer, optimizer_step

    total_steps = total_epochs * cfg.steps_per_epoch
    opt, sched, ema = build_optimizer(model, cfg, total=total_steps)
    g = generator(seed, model)
    rng = np.random.default_rng(seed)
    epoch, step = 0, 0
    best: dict[str, Any] = {}
    log: list[dict[str, float]] = []
    ck = run / "checkpoint"
    if resume:
        st = read_json(state_path, what="training state", keys=("epoch", "step", "numpy_rng"), folder=run,
                       schema=STATE_SCHEMA, finite=False)
        load_weights_into(model, _load_tensors(ck / "model.safetensors", dev, run), source=ck / "model.safetensors")
        try:
            saved = read_torch(ck / "optim.pt", what="optimizer state", folder=run)
            opt.load_state_dict(saved["optimizer"])
            sched.load_state_dict(saved["scheduler"])
            if ema is not None:
                ema.load_state_dict(_load_tensors(ck / "ema.safetensors", dev, run), int(st["ema_updates"]))
            g.set_state(read_torch(ck / "rng.pt", what="random state", folder=run)["torch_generator"])
            rng.bit_generator.state = st["numpy_rng"]
            epoch, step = int(st["epoch"]), int(st["step"])
        except C2NPInputError:
            raise
        except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as exc:
            raise C2NPInputError(f"{printable(ck)}: optimizer, random or training state does not fit this run "
                                 f"({type(exc).__name__}: {clipped(str(exc), 200)})") from None
        best = dict(st.get("best") or {})
        log = [r for r in _read_log(run / "log.csv") if r["epoch"] <= epoch]
    else:
        run.mkdir(parents=True, exist_ok=True)
        with atomic_write(meta_path) as fh:
            json.dump(meta, fh, indent=2)
    if not (run / "reference_fidelity.json").is_file():
        refs = {"sample_ids": [store.recipes.sample_id(int(r)) for r in fid_rows],
                "baselines": reference_fidelity(store, task, fid_rows)}
        with atomic_write(run / "reference_fidelity.json") as fh:
            json.dump(refs, fh, indent=2)
    set_progress = getattr(model, "set_progress", None)
    model.train()
    t_start = time.perf_counter()
    from tqdm import tqdm

    while epoch < total_epochs:
        losses, lr = [], float("nan")
        t0 = time.perf_counter()
        bar = tqdm(range(cfg.steps_per_epoch), desc=f"{model_name}/{task} epoch {epoch + 1}/{total_epochs}",
                   disable=not progress, leave=False)
        for _ in bar:
            rows = rng.choice(data.train, size=cfg.batch_size, replace=len(data.train) < cfg.batch_size)
            if set_progress is not None:
                set_progress(step, total_steps)
            loss, _ = batch_loss(model, store, rows, g)
            try:
                info = optimizer_step(model, loss, opt, sched, ema, grad_clip=cfg.grad_clip)
            except FloatingPointError as exc:
                raise C2NPError(f"{model_name}/{task}: training diverged at step {step} ({exc})") from exc
            lr = info["lr"]
            losses.append(float(loss.item()))
            step += 1
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
        dt = time.perf_counter() - t0
        epoch += 1
        with _evaluation_weights(model, ema):
            model.eval()
            with torch.no_grad():
                vg = generator(seed + 12345, model)
                val = [float(batch_loss(model, store, chunk, vg)[0].item())
                       for chunk in _chunks(val_rows, cfg.batch_size)]
            fid = fidelity(model, store, fid_rows, seed=seed + 999)
            model.train()
            row = {"epoch": epoch, "step": step, "train_loss": float(np.mean(losses)),
                   "val_loss": float(np.mean(val)), "lr": lr, **fid,
                   "train_samples_per_s": cfg.steps_per_epoch * cfg.batch_size / max(dt, 1e-9),
                   "elapsed_s": time.perf_counter() - t_start}
            if not best or _selection_key(task, row) > tuple(best["key"]):
                best = {"epoch": epoch, "step": step, "key": list(_selection_key(task, row)),
                        "selection": [m for m, _ in SELECTION[task]],
                        **{m: row[f"val_{m}"] for m, _ in SELECTION[task]}}
                (run / "best").mkdir(parents=True, exist_ok=True)
                _save_tensors(_eval_weights(model, ema), run / "best" / "model.safetensors")
                with atomic_write(run / "best" / "state.json") as fh:
                    json.dump(best, fh, indent=2)
        log.append(row)
        _write_log(run / "log.csv", log)
        ck.mkdir(parents=True, exist_ok=True)
        _save_tensors(model.state_dict(), ck / "model.safetensors")
        if ema is not None:
            _save_tensors(ema.state_dict(), ck / "ema.safetensors")
        _torch_save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict()}, ck / "optim.pt")
        _torch_save({"torch_generator": g.get_state()}, ck / "rng.pt")
        with atomic_write(ck / "state.json") as fh:
            json.dump({"epoch": epoch, "step": step, "numpy_rng": rng.bit_generator.state,
                       "ema_updates": ema.num_updates if ema is not None else 0, "best": best}, fh)
        if cfg.max_train_seconds is not None and time.perf_counter() - t_start >= cfg.max_train_seconds:
            break  # wall-clock budget spent (checked after a complete, saved epoch)
    return TrainResult(run_dir=run, epoch=epoch, step=step, log=log, data=dict(meta["data"]), best=best)


def predict(run_dir: str | Path, store: Any, split: str, out: str | Path, *, subset: str = "eval",
            seed: int = 0, progress: bool = True, steps: int | None = None,
            per_group: int | None = None, checkpoint: str = "best", device: str = "cpu",
            allow_other_store: bool = False, shard: tuple[int, int] | None = None,
            ablation: Any = None) -> dict[str, Any]:
    """Write predictions of a trained run for ``split`` (task 1: extxyz with
    ``info["sample_id"]``; task 2: CSV ``sample_id,a,b,c,alpha,beta,gamma,spacegroup``) and a
    provenance record ``{out}.json`` (the returned summary).

    Inputs come from the task queries (:class:`c2np.tasks.ForwardTask` / ``InverseTask``): a
    task-1 model sees the query's cell, radius, rotation and centre; a task-2 model the particle,
    written back under the query's opaque id. The rows are exactly those ``c2np evaluate``
    scores (``c2np.tasks.select_rows``):
    ``subset`` 'eval' = the harness's fixed, seeded rotations per (material, R) (``per_group``
    of them, default the harness's 8), 'full' = every row. Splits: train, val, id, ood, test
    (id + ood), heldout. ``checkpoint`` 'best' (default) or 'last'. A store whose protocol or
    fingerprint differs from the run's is refused unless ``allow_other_store`` (then the
    summary records it). Returns the number of samples, the throughput and the store check.

    ``shard = (i, n)``: only the batches b (of the config's batch size, in the run's order)
    with b % n == i; each batch draws its own noise (:func:`batch_seed`), so a shard's samples
    are exactly the one run's. The provenance record is then a partial record
    (:data:`PARTIAL_PREDICTIONS_SCHEMA`) and :func:`merge_predictions` combines the n parts into
    the one run's file.

    ``ablation`` (task 1 only): a :class:`c2np.models.forward.ablation.Ablation` of the
    sampler's analytic priors (None: as shipped); recorded in the provenance record.
    """
    import dataclasses

    import torch

    from c2np.predictions import write_forward_predictions, write_inverse_predictions

    model, meta = load_run(run_dir, checkpoint=checkpoint, device=device)
    check = _check_store(meta, store, what="predict")
    if not check["matches"] and not allow_other_store:
        raise C2NPInputError(
            f"{run_dir}: the run was trained on protocol {check['run_protocol']!r}, fingerprint "
            f"{str(check['run_fingerprint'])[:16]}..., this store is protocol {check['store_protocol']!r}, "
            f"fingerprint {check['store_fingerprint'][:16]}...; pass --allow-other-store to predict anyway")
    check["allow_other_store"] = bool(allow_other_store)
    forward = model.task == "forward"
    if ablation is not None and not forward:
        raise C2NPInputError(f"{run_dir}: ablations apply to task-1 runs only")
    out = Path(out)
    t0 = time.perf_counter()
    size = int(model.cfg.batch_size)
    with torch.no_grad():
        items = query_items(store, split, subset=subset, per_group=per_group, forward=forward)
        part_record: dict[str, Any] = {}
        batches: list[int] | None = None
        if shard is not None:
            batches = [int(b) for b in shard_positions(-(-len(items) // size), *shard)]
            part_record = {
                "schema": PARTIAL_PREDICTIONS_SCHEMA,
                "run": {"run": str(run_dir), "model": meta["model"], "task": meta["task"], "split": split,
                        "subset": subset, "per_group": per_group, "checkpoint": meta["checkpoint"],
                        "seed": seed, "steps": steps, "batch": size, "store_fingerprint": str(store.fingerprint)},
                "shard": {"index": int(shard[0]), "count": int(shard[1])}, "n_rows": len(items),
                "sample_ids_sha256": ids_sha256([sid for sid, _ in items]),
                "positions": batch_shard_positions(len(items), size, shard)}
        if forward:
            preds = _sample_forward(model, items, seed, steps=steps, batch=size, batches=batches,
                                    progress=progress, desc=f"sampling {meta['model']}", ablation=ablation)
            write_forward_predictions(out, preds)
            n = len(preds)
        else:
            if batches is not None:
                items = [items[k] for k in part_record["positions"]]
            inv = _predict_inverse(model, items, batch=size, progress=progress, desc=f"predicting {meta['model']}")
            write_inverse_predictions(out, inv)
            n = len(inv)
    dt = time.perf_counter() - t0
    summary = {"file": str(out), "run": str(run_dir), "model": meta["model"], "task": meta["task"],
               "split": split, "subset": subset, "per_group": per_group, "checkpoint": meta["checkpoint"],
               "device": str(next(model.parameters()).device),
               "sample_ids": "store ids" if forward else "opaque task-2 ids (c2np.tasks.opaque_sample_id)",
               "n_samples": int(n), "seconds": dt, "samples_per_s": n / max(dt, 1e-9), "store_check": check}
    if ablation is not None:
        summary["ablation"] = dataclasses.asdict(ablation)
    summary.update(part_record)
    with atomic_write(out.with_name(out.name + ".json")) as fh:
        json.dump(summary, fh, indent=2)
    return summary


def query_items(store: Any, split: str, *, subset: str = "eval", per_group: int | None = None,
                forward: bool) -> list[tuple[str, Any]]:
    """The rows ``c2np evaluate`` scores for ``split`` / ``subset`` (``per_group`` rotations per
    (material, R) of the eval subset; None: the harness's), as the model may see them: task 1
    (store id, :class:`Condition` of the query), task 2 (opaque id, the query's particle)."""
    from c2np.tasks import ForwardTask, InverseTask, opaque_sample_id, select_rows

    task_cls = ForwardTask if forward else InverseTask
    keep: set[str] | None = None
    if per_group is not None and subset == "eval":  # fewer rotations than the harness's subset
        rec = store.recipes
        ids = [rec.sample_id(int(r)) for r in select_rows(rec, split, "eval", per_group=int(per_group))]
        keep = set(ids) if forward else {opaque_sample_id(str(store.fingerprint), i) for i in ids}
        task = task_cls(store, split, "full")
    else:
        task = task_cls(store, split, subset)
    if forward:
        return [(q.sample_id, condition_from_query(q)) for q in task.queries() if keep is None or q.sample_id in keep]
    assert isinstance(task, InverseTask)
    return [(q.sample_id, q.particle) for q in task.queries() if keep is None or q.sample_id in keep]


#: Schema of the provenance record of ``predict --shard I/N`` (a partial prediction file).
PARTIAL_PREDICTIONS_SCHEMA = "c2np.partial-predictions/1"


def batch_shard_positions(n_rows: int, batch: int, shard: tuple[int, int]) -> list[int]:
    """Positions of shard (i, n) when whole batches of ``batch`` rows are dealt round robin."""
    picked = shard_positions(-(-n_rows // batch), *shard)
    return [k for b in picked for k in range(int(b) * batch, min((int(b) + 1) * batch, n_rows))]


def _prediction_units(path: str, task: str) -> tuple[str, list[str], list[str]]:
    """(header, units, sample ids) of a prediction file written by :func:`predict`: task 2 the
    CSV header and one unit per row; task 1 no header and one unit per extxyz frame (its text
    exactly as written). The file is validated by the readers of :mod:`c2np.predictions`."""
    from c2np.particle_io import iter_xyz_frames
    from c2np.predictions import read_inverse_predictions

    text = read_text_bounded(path).splitlines(keepends=True)
    if task == "inverse":
        return text[0] if text else "", text[1:], list(read_inverse_predictions(path))
    frames = list(iter_xyz_frames(path))
    starts = [fr.line - 1 for fr in frames] + [len(text)]
    ids = [str(fr.info.get("sample_id", "")) for fr in frames]
    return "", ["".join(text[a:b]) for a, b in zip(starts[:-1], starts[1:])], ids


def merge_predictions(parts: list[str | Path], out: str | Path) -> dict[str, Any]:
    """Combine the prediction files of all shards of one ``predict`` run (each with its
    ``PART.json`` record; task-1 extxyz or task-2 CSV) into ``out`` (and ``out.json``): the
    samples in the one run's order, the same bytes per sample, so the file equals one run's.
    Parts of another run, a shard given twice or a missing shard are bad input
    (:func:`c2np.evaluation.shards.check_shard_set`)."""
    from c2np.models.runfiles import member

    docs = []
    for p in map(Path, parts):
        member(p.parent, p, what="prediction file")
        rec = read_json(p.with_name(p.name + ".json"), what="partial predictions record",
                        keys=("schema", "run", "shard", "n_rows", "sample_ids_sha256", "positions"))
        if rec["schema"] != PARTIAL_PREDICTIONS_SCHEMA:
            raise C2NPInputError(f"{printable(p)}.json: not a partial predictions record "
                                 f"({PARTIAL_PREDICTIONS_SCHEMA!r})")
        from c2np.structured import validate

        validate(rec, PARTIAL_PREDICTIONS_RECORD_SCHEMA, source=f"{printable(p)}.json")
        docs.append((str(p), rec))
    check_shard_set(docs, keys=("schema", "run", "n_rows", "sample_ids_sha256"), what="merge-predictions")
    n_rows, size = int(docs[0][1]["n_rows"]), int(docs[0][1]["run"]["batch"])
    held = sum(len(rec["positions"]) for _, rec in docs)
    if held != n_rows:  # before anything of size n_rows is allocated
        raise C2NPInputError(f"merge-predictions: the parts hold {held:,} samples, but their run has "
                             f"n_rows = {n_rows:,}")
    task = str(docs[0][1]["run"]["task"])
    units: list[str | None] = [None] * n_rows
    ids: list[str | None] = [None] * n_rows
    header = ""
    seconds = 0.0
    for path, rec in docs:
        idx, cnt = int(rec["shard"]["index"]), int(rec["shard"]["count"])
        expected = batch_shard_positions(n_rows, size, (idx, cnt))
        if list(rec["positions"]) != expected:
            raise C2NPInputError(f"merge-predictions: {printable(path)}: its rows are not those of shard {idx}/{cnt}")
        header, body, body_ids = _prediction_units(path, task)
        if len(body) != len(expected) or len(body_ids) != len(expected):
            raise C2NPInputError(f"merge-predictions: {printable(path)}: {len(body)} samples, its record says "
                                 f"{len(expected)}")
        for k, unit, sid in zip(expected, body, body_ids, strict=True):
            units[k], ids[k] = unit, sid
        seconds += float(rec.get("seconds", 0.0))
    if ids_sha256([str(i) for i in ids]) != docs[0][1]["sample_ids_sha256"]:
        raise C2NPInputError("merge-predictions: the parts' sample ids are not the run's")
    out = Path(out)
    want = (".extxyz", ".xyz") if task == "forward" else (".csv",)
    if out.suffix.lower() not in want:
        raise C2NPInputError(f"merge-predictions: {out}: the parts are task-{1 if task == 'forward' else 2} "
                             f"predictions, so the output must end in {' or '.join(want)}")
    with atomic_write(out) as fh:
        fh.write(header + "".join(u for u in units if u is not None))
    summary = {k: v for k, v in docs[0][1].items()
               if k not in ("schema", "shard", "n_rows", "sample_ids_sha256", "positions", "run")}
    summary.update({"file": str(out), "n_samples": n_rows, "seconds": seconds,
                    "samples_per_s": n_rows / max(seconds, 1e-9), "merged_from": [p for p, _ in docs]})
    with atomic_write(out.with_name(out.name + ".json")) as fh:
        json.dump(summary, fh, indent=2)
    return summary
