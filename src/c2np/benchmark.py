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

from c2np.baselines import FORWARD_BASELINES, INVERSE_BASELINES, forward_queries
from c2np.errors import C2NPInputError
from c2np.report import (LeaderboardRow, normalise, plot_confusion, plot_id_vs_ood, plot_metric_vs_radius,
                         plot_particles, row_from_results, write_leaderboard,
                         HEADLINE_METRICS, METRIC_LABELS)
from c2np.splits import get_protocol
from c2np.store import DatasetStore

__all__ = ["BenchmarkSummary", "run_benchmark", "HEADLINE", "discover_predictions"]

HEADLINE = {task: list(names) for task, names in HEADLINE_METRICS.items()}
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
        report_index: ``report/index.html``, the offline HTML report (``c2np.site``).
    """

    out_dir: Path
    leaderboard_md: Path
    leaderboard_json: Path
    results: tuple[Path, ...]
    plots: tuple[Path, ...]
    rows: tuple[LeaderboardRow, ...]
    seconds: float
    report_index: Path | None = None


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

    from c2np.evaluation import (evaluate_task, select_rows, write_forward_predictions,
                                 write_inverse_predictions)

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
    documents: list[dict[str, Any]] = []
    rows: list[LeaderboardRow] = []
    per_radius: dict[tuple[str, str], dict[str, dict[int, float]]] = {}
    inverse_preds: dict[tuple[str, str], Path] = {}
    all_splits = list(splits)
    if store.recipes.heldout_materials and "heldout" not in all_splits and "inverse" in tasks:
        all_splits.append("heldout")  # strict protocol: task 2 on held-out materials
    for split in all_splits:
        sel = select_rows(store.recipes, split, subset)
        if len(sel) == 0:
            raise C2NPInputError(f"{store.path}: split {split!r} has no samples")
        split_tasks = ["inverse"] if split == "heldout" else list(tasks)
        if "forward" in split_tasks:
            queries = forward_queries(store, sel)
            for name in fwd:
                say(f"task 1 · {split} · {name}: predicting {len(queries)} particles")
                preds = FORWARD_BASELINES[name](store, queries)
                write_forward_predictions(pred_dir / "forward" / name / f"{split}.extxyz", preds)
        if "inverse" in split_tasks:
            for name in inv:
                say(f"task 2 · {split} · {name}: predicting {len(sel)} lattices")
                preds_inv = INVERSE_BASELINES[name](store, sel)
                write_inverse_predictions(pred_dir / "inverse" / name / f"{split}.csv",
                                          [p.as_row() for p in preds_inv])
        for task in split_tasks:
            for model, path in discover_predictions(pred_dir, task, split).items():
                say(f"evaluating {task} · {split} · {model}")
                res = evaluate_task(task, store, path, split, subset, model=model, seed=seed,
                                    n_resamples=n_resamples, progress=progress, workers=workers)
                rpath = res.write(res_dir / f"{model}__{task}__{store.protocol}__{split}.json")
                results_files.append(rpath)
                documents.append(res.data)
                rows.append(row_from_results(res.data, rpath))
                pr = res.data["metrics"]["per_radius"]
                metric = "f1@0.1" if task == "forward" else "joint_accuracy_paper"
                per_radius.setdefault((task, metric), {}).setdefault(model, {}).update(
                    {int(r): v[metric]["mean"] for r, v in pr.items()})
                if task == "forward":
                    per_radius.setdefault((task, "chamfer"), {}).setdefault(model, {}).update(
                        {int(r): v["chamfer"]["mean"] for r, v in pr.items()})
                else:
                    per_radius.setdefault((task, "spacegroup_accuracy"), {}).setdefault(model, {}).update(
                        {int(r): v["spacegroup_accuracy"]["mean"] for r, v in pr.items()})
                    inverse_preds[(model, split)] = path

    rows = normalise(rows)
    plots = _plots(store, protocol, rows, per_radius, inverse_preds, out / "plots", splits, subset)
    paths = write_leaderboard(rows, out, headline=HEADLINE, extra={
        "store": str(store.path), "fingerprint": store.fingerprint, "protocol": store.protocol,
        "subset": subset, "splits": ",".join(splits)})
    with open(paths["markdown"], "a", encoding="utf-8") as fh:  # plots section, after the atomic write
        fh.write("\n## Plots\n\n" + "\n".join(f"![{p.stem}](plots/{p.name})" for p in plots) + "\n")
    from c2np.site.builder import build_site
    from c2np.site.sources import models_from_results

    site = build_site(models_from_results(documents), out / "report", store=store, log=say)
    return BenchmarkSummary(out, paths["markdown"], paths["json"], tuple(results_files), tuple(plots),
                            tuple(rows), time.perf_counter() - t_start, site.index)


_LABELS = METRIC_LABELS


def _plots(store: DatasetStore, protocol: Any, rows: Sequence[LeaderboardRow],
           per_radius: dict[tuple[str, str], dict[str, dict[int, float]]],
           inverse_preds: dict[tuple[str, str], Path], plot_dir: Path,
           splits: Sequence[str], subset: str) -> list[Path]:
    from c2np.evaluation import inverse_target, read_inverse_predictions, select_rows

    plots: list[Path] = []
    for (task, metric), series in per_radius.items():
        plots.append(plot_metric_vs_radius(series, _LABELS.get(metric, metric), protocol,
                                           plot_dir / f"{task}_{metric.replace('@', '_at_')}_vs_radius.png"))
    for task, metric in (("forward", "f1@0.1"), ("inverse", "joint_accuracy_paper")):
        vals: dict[str, dict[str, float]] = {}
        for r in rows:
            if r.task == task and r.split in ("id", "ood") and r.metrics.get(metric) is not None:
                vals.setdefault(r.model, {})[r.split] = float(r.metrics[metric])
        if vals:
            plots.append(plot_id_vs_ood(vals, _LABELS[metric], plot_dir / f"{task}_id_vs_ood.png"))
    # confusion matrix of the solver (or the first inverse model) on the last split
    for (model, split), path in sorted(inverse_preds.items(), key=lambda kv: (kv[0][0] != "solver", kv[0][1] != "ood")):
        preds = read_inverse_predictions(path)
        sel = select_rows(store.recipes, split, subset)
        ids = store.recipes.sample_ids()
        targets = {m: inverse_target(c).spacegroup for m, c in store.cells.items()}
        true_sg, pred_sg = [], []
        for r in sel:
            sid = ids[r]
            true_sg.append(targets[sid.split("/")[0]])
            p = preds.get(sid)
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
        sid = store.recipes.sample_ids()[row]
        from c2np.evaluation import iter_forward_predictions
        from c2np.particle import Particle

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
            "report": str(summary.report_index) if summary.report_index else None,
            "rows": json.loads(summary.leaderboard_json.read_text())["rows"]}
