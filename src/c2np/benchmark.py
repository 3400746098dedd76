"""Run every baseline (and every model with predictions on disk) on a store, evaluate them
with the harness and write the leaderboard and its plots.

Prediction files live in ``{predictions_dir}/{task}/{model}/{split}.{extxyz|h5|csv}``; the
baselines are written there too, so a trained model's files (from ``c2np predict``) dropped
into the same layout are picked up and ranked beside them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from c2np.baselines import FORWARD_BASELINES, INVERSE_BASELINES, predict
from c2np.errors import C2NPInputError
from c2np.metrics import HEADLINE, PRIMARY, Metric
from c2np.particle import Particle
from c2np.predictions import (iter_forward_predictions, read_inverse_predictions, write_forward_predictions,
                              write_inverse_predictions)
from c2np.report import (LeaderboardRow, normalise, plot_confusion, plot_id_vs_ood, plot_metric_vs_radius,
                         plot_particles, write_leaderboard)
from c2np.splits import get_protocol
from c2np.store import DatasetStore
from c2np.tasks import ForwardTask, InverseTask, inverse_target, opaque_sample_id, open_task, select_rows

__all__ = ["BenchmarkSummary", "run_benchmark", "discover_predictions"]

#: Per-radius plots: the primary metric of each task and one more.
_RADIUS_PLOTS = {"forward": (PRIMARY["forward"], Metric.CHAMFER),
                 "inverse": (PRIMARY["inverse"], Metric.SPACEGROUP_ACCURACY)}
_EXT = {"forward": (".extxyz", ".h5"), "inverse": (".csv",)}


@dataclass(frozen=True)
class BenchmarkSummary:
    """What a benchmark run wrote.

    Attributes:
        out_dir: root folder.
        leaderboard_md, leaderboard_json: the tables.
        results: results JSON files, one per (model, task, split).
        plots: PNG files.
        rows: the leaderboard rows (normalised scores included).
        seconds: wall time.
    """

    out_dir: Path
    leaderboard_md: Path
    leaderboard_json: Path
    results: tuple[Path, ...]
    plots: tuple[Path, ...]
    rows: tuple[LeaderboardRow, ...]
    seconds: float


def discover_predictions(pred_dir: Path, task: str, split: str) -> dict[str, Path]:
    """Model name -> prediction file for (task, split) under ``pred_dir``."""
    out: dict[str, Path] = {}
    root = pred_dir / task
    if not root.is_dir():
        return out
    for model_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for ext in _EXT[task]:
            f = model_dir / f"{split}{ext}"
            if f.is_file():
                out[model_dir.name] = f
                break
    return out


def _row_from_results(data: dict[str, Any], path: Path) -> LeaderboardRow:
    overall = data["metrics"]["overall"]
    info = data.get("metric_info", {})
    return LeaderboardRow(
        model=data["model"], task=data["task"], split=data["split"], protocol=data["protocol"],
        metrics={k: v["mean"] for k, v in overall.items()},
        higher_is_better={k: m.get("better") == "higher" for k, m in info.items() if m.get("better") in ("higher", "lower")},
        n_samples=int(data["n_samples"]), n_failed=int(data["n_failed"]), results_file=str(path))


def run_benchmark(store_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                  splits: Sequence[str] = ("id", "ood"), subset: str = "eval",
                  tasks: Sequence[str] = ("forward", "inverse"),
                  forward_models: Sequence[str] | None = None,
                  inverse_models: Sequence[str] | None = None,
                  seed: int = 0, n_resamples: int = 1000, progress: bool = True,
                  log: Callable[[str], None] | None = None, workers: int = 1) -> BenchmarkSummary:
    """Predict with the baselines, evaluate everything found, write leaderboard and plots.
    ``workers`` processes score task-1 samples (results do not depend on it)."""
    import time

    t_start = time.perf_counter()
    say = log or (lambda _msg: None)
    out = Path(out_dir)
    store = DatasetStore.open(store_path)
    protocol = get_protocol(store.protocol)
    pred_dir = out / "predictions"
    res_dir = out / "results"
    fwd = list(FORWARD_BASELINES) if forward_models is None else list(forward_models)
    inv = list(INVERSE_BASELINES) if inverse_models is None else list(inverse_models)
    for name in fwd:
        if name not in FORWARD_BASELINES:
            raise C2NPInputError(f"unknown task-1 baseline {name!r}; choose from {sorted(FORWARD_BASELINES)}")
    for name in inv:
        if name not in INVERSE_BASELINES:
            raise C2NPInputError(f"unknown task-2 baseline {name!r}; choose from {sorted(INVERSE_BASELINES)}")

    results_files: list[Path] = []
    rows: list[LeaderboardRow] = []
    per_radius: dict[tuple[str, str], dict[str, dict[int, float]]] = {}
    inverse_preds: dict[tuple[str, str], Path] = {}
    all_splits = list(splits)
    if store.recipes.heldout_materials and "heldout" not in all_splits and "inverse" in tasks:
        all_splits.append("heldout")  # strict protocol: task 2 on held-out materials
    for split in all_splits:
        split_tasks = ["inverse"] if split == "heldout" else list(tasks)
        for task_name in split_tasks:
            task = open_task(task_name, store, split, subset)
            if isinstance(task, ForwardTask):
                for name in fwd:
                    say(f"task 1 · {split} · {name}: predicting {len(task)} particles")
                    preds = predict(task, FORWARD_BASELINES[name](task))
                    write_forward_predictions(pred_dir / "forward" / name / f"{split}.extxyz", preds)
            else:
                for name in inv:
                    say(f"task 2 · {split} · {name}: predicting {len(task)} lattices")
                    preds_inv = predict(task, INVERSE_BASELINES[name](task))
                    write_inverse_predictions(pred_dir / "inverse" / name / f"{split}.csv", preds_inv)
            for model, path in discover_predictions(pred_dir, task_name, split).items():
                say(f"evaluating {task_name} · {split} · {model}")
                if isinstance(task, ForwardTask):
                    res = task.evaluate(path, model=model, seed=seed, n_resamples=n_resamples,
                                        progress=progress, workers=workers)
                else:
                    res = task.evaluate(path, model=model, seed=seed, n_resamples=n_resamples,
                                        progress=progress)
                rpath = res.write(res_dir / f"{model}__{task_name}__{store.protocol}__{split}.json")
                results_files.append(rpath)
                rows.append(_row_from_results(res.data, rpath))
                pr = res.data["metrics"]["per_radius"]
                for metric in _RADIUS_PLOTS[task_name]:
                    per_radius.setdefault((task_name, metric.value), {}).setdefault(model, {}).update(
                        {int(r): v[metric.value]["mean"] for r, v in pr.items()})
                if isinstance(task, InverseTask):
                    inverse_preds[(model, split)] = path

    rows = normalise(rows)
    plots = _plots(store, protocol, rows, per_radius, inverse_preds, out / "plots", splits, subset)
    headline = {task: [m.value for m in names] for task, names in HEADLINE.items()}
    paths = write_leaderboard(rows, out, headline=headline, extra={
        "store": str(store.path), "fingerprint": store.fingerprint, "protocol": store.protocol,
        "subset": subset, "splits": ",".join(splits)},
        footer="## Plots\n\n" + "\n".join(f"![{p.stem}](plots/{p.name})" for p in plots))
    return BenchmarkSummary(out, paths["markdown"], paths["json"], tuple(results_files), tuple(plots),
                            tuple(rows), time.perf_counter() - t_start)


_LABELS = {Metric.F1_0_1.value: "atom F1 at 0.1 Å", Metric.CHAMFER.value: "mean Chamfer distance (Å)",
           Metric.JOINT_ACCURACY_PAPER.value: "joint accuracy (paper tolerance)",
           Metric.SPACEGROUP_ACCURACY.value: "space-group accuracy"}


def _plots(store: DatasetStore, protocol: Any, rows: Sequence[LeaderboardRow],
           per_radius: dict[tuple[str, str], dict[str, dict[int, float]]],
           inverse_preds: dict[tuple[str, str], Path], plot_dir: Path,
           splits: Sequence[str], subset: str) -> list[Path]:
    plots: list[Path] = []
    for (task, metric), series in per_radius.items():
        plots.append(plot_metric_vs_radius(series, _LABELS.get(metric, metric), protocol,
                                           plot_dir / f"{task}_{metric.replace('@', '_at_')}_vs_radius.png"))
    for task, metric in PRIMARY.items():
        vals: dict[str, dict[str, float]] = {}
        for r in rows:
            if r.task == task and r.split in ("id", "ood") and r.metrics.get(metric.value) is not None:
                vals.setdefault(r.model, {})[r.split] = float(r.metrics[metric.value])
        if vals:
            plots.append(plot_id_vs_ood(vals, _LABELS[metric.value], plot_dir / f"{task}_id_vs_ood.png"))
    # confusion matrix of the solver (or the first inverse model) on the last split
    for (model, split), path in sorted(inverse_preds.items(), key=lambda kv: (kv[0][0] != "solver", kv[0][1] != "ood")):
        preds = read_inverse_predictions(path)
        sel = select_rows(store.recipes, split, subset)
        t = store.recipes
        true_sg, pred_sg = [], []
        for r in sel:
            sid = t.sample_id(int(r))
            true_sg.append(inverse_target(store.cells[t.materials[int(t.material_index[r])]]).spacegroup)
            p = preds.get(sid, preds.get(opaque_sample_id(store.fingerprint, sid)))
            pred_sg.append(int(p.spacegroup) if p is not None and np.isfinite(p.spacegroup) else None)
        plots.append(plot_confusion(true_sg, pred_sg, plot_dir / f"inverse_confusion_{model}_{split}.png",
                                    title=f"space-group confusion: {model}, {split}"))
        break
    # a predicted particle beside the true one: the largest OOD particle, memorisation if run
    fwd_dir = plot_dir.parent / "predictions" / "forward"
    split = "ood" if "ood" in splits else splits[-1]
    sel = select_rows(store.recipes, split, subset)
    if len(sel) and fwd_dir.is_dir():
        row = int(sel[np.argmax(store.recipes.radius_angstrom[sel])])
        sid = store.recipes.sample_id(row)
        for model in ("memorisation", "random-ball"):
            f = fwd_dir / model / f"{split}.extxyz"
            if not f.is_file():
                continue
            for _, pid, nums, pos in iter_forward_predictions(f):
                if pid == sid:
                    plots.append(plot_particles(Particle(nums, pos), store.particle(row),
                                                plot_dir / f"forward_particle_{model}.png",
                                                title=f"{sid}: {model} vs truth"))
                    break
    return plots


def summary_json(summary: BenchmarkSummary) -> dict[str, Any]:
    """JSON-ready summary of a run."""
    return {"out_dir": str(summary.out_dir), "leaderboard_md": str(summary.leaderboard_md),
            "leaderboard_json": str(summary.leaderboard_json),
            "results": [str(p) for p in summary.results], "plots": [str(p) for p in summary.plots],
            "seconds": round(summary.seconds, 2),
            "rows": json.loads(summary.leaderboard_json.read_text())["rows"]}
