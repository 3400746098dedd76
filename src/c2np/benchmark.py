"""Run every baseline on a store, write each as a submission, and rebuild the leaderboard
from the submission folders (:func:`c2np.leaderboard.build_leaderboard`): results, Markdown /
JSON tables, PNG plots and the offline report site.

The baselines are written to ``{out}/submissions/<baseline>/`` (``model.yml`` + prediction
files, docs/reference/submissions.md); a trained model's submission folder placed there is checked,
scored and ranked beside them.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from c2np.baselines import FORWARD_BASELINES, HELDOUT_BASELINES, INVERSE_BASELINES, predict
from c2np.categories import ANALYTIC
from c2np.errors import C2NPInputError
from c2np.executor import Executor
from c2np.metrics import HEADLINE, PRIMARY
from c2np.particle import Particle
from c2np.predictions import (
    iter_forward_predictions,
    read_inverse_predictions,
    write_forward_predictions,
    write_inverse_predictions,
)
from c2np.report import (
    METRIC_LABELS,
    RADIUS_PLOTS,
    LeaderboardRow,
    plot_confusion,
    plot_id_vs_ood,
    plot_metric_vs_radius,
    plot_particles,
    write_leaderboard,
)
from c2np.sealed import HELDOUT_SPLITS
from c2np.splits import SPLITS, get_protocol
from c2np.store import DatasetStore
from c2np.tasks import (
    EVAL_ROTATIONS_PER_GROUP,
    ForwardTask,
    inverse_target,
    opaque_sample_id,
    open_task,
    select_rows,
)

__all__ = ["BenchmarkSummary", "run_benchmark", "baseline_model_yml", "summary_json"]

_BASELINE_INFO = {
    "analytic-carve": ("Analytic carve (ceiling)",
                       "carves the sphere from the unit cell exactly (c2np.carving): the ceiling"),
    "memorisation": ("Nearest-training-sample memorisation",
                     "the training particle of the same material at the nearest train radius, rotated, "
                     "cropped to R"),
    "random-ball": ("Uniform random ball (floor)",
                    "the right number of atoms, uniform in the ball, with the cell's composition: the floor"),
    "solver": ("Crystallographic solver",
               "finds the lattice translations inside the particle, folds, detects symmetry (c2np.solver)"),
    "composition-lookup": ("Composition lookup (memorisation)",
                           "the target of the training material with the nearest composition"),
    "descriptor-neighbour": ("Descriptor nearest neighbour (memorisation)",
                             "the training example with the nearest particle-descriptor histograms: its "
                             "space group and its lattice scaled by the descriptor-scale ratio"),
    "descriptor-neighbour-noisy": ("Descriptor nearest neighbour, noise-augmented (memorisation)",
                                   "the descriptor nearest neighbour fitted also on copies of the training "
                                   "particles with 0.02 and 0.05 Å Gaussian noise"),
    "majority-class": ("Majority class (floor)",
                       "the most common space group and the mean lattice of the training examples"),
}

#: Task-2 baselines the benchmark can write: the reference ones, and on a store with held-out
#: materials (protocol strict) by default also the descriptor-neighbour memorisation floors.
_INVERSE_TABLE = {**INVERSE_BASELINES, **HELDOUT_BASELINES}


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
        submissions_dir: the submission folders the leaderboard was built from.
    """

    out_dir: Path
    leaderboard_md: Path
    leaderboard_json: Path
    results: tuple[Path, ...]
    plots: tuple[Path, ...]
    rows: tuple[LeaderboardRow, ...]
    seconds: float
    report_index: Path | None = None
    submissions_dir: Path | None = None


def baseline_model_yml(name: str, task: str, store: DatasetStore, *, inference_seconds: float,
                       subset: str, per_group: int = EVAL_ROTATIONS_PER_GROUP) -> str:
    """The ``model.yml`` of a built-in baseline as a submission (schema ``c2np.submission/1``)."""
    import yaml

    from c2np.version import __version__

    title, what = _BASELINE_INFO[name]
    doc: dict[str, Any] = {
        "schema": "c2np.submission/1",
        "model": {"id": name, "name": title, "version": __version__, "family": "baseline", "category": ANALYTIC,
                  "authors": ["c2np"], "repository": f"c2np {__version__} (c2np.baselines)", "license": "MIT",
                  "description": what},
        "training": {"protocol": store.recipes.protocol, "store_fingerprint": store.fingerprint,
                     "data": "none (no fitting)" if name in ("analytic-carve", "random-ball", "solver")
                     else "the train split of the store"},
        "hardware": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "wall_time_seconds": {"training": 0.0, "inference": round(float(inference_seconds), 3)},
        "c2np_version": __version__,
        "date": _dt.date.today().isoformat(),
        "tasks": [task],
        "subset": subset,
    }
    if subset == "eval" and per_group != EVAL_ROTATIONS_PER_GROUP:
        doc["rotations_per_material_radius"] = int(per_group)
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def _write_baseline_predictions(store: DatasetStore, sub_dir: Path, names: Sequence[str], tasks: Sequence[str],
                                splits: Sequence[str], subset: str, say: Callable[[str], None],
                                executor: Executor | None = None,
                                per_group: int = EVAL_ROTATIONS_PER_GROUP) -> dict[str, float]:
    """Predict with every baseline and write ``sub_dir/<name>/<task>/<split>.*``; a sample a
    baseline does not answer gets an explicit unusable entry (an empty particle / NaN row),
    so every id is present and the harness scores it as a failure. ``executor`` runs the
    predictions (:func:`c2np.baselines.predict`; default: this process). Returns seconds per
    baseline."""
    seconds = {n: 0.0 for n in names}
    inverse_fitted: dict[str, Any] = {}  # a task-2 baseline learns from the train split only: fit once
    for split in splits:
        for task_name in tasks:
            if split in HELDOUT_SPLITS and task_name == "forward":
                continue
            task = open_task(task_name, store, split, subset, per_group=per_group)
            ids = [q.sample_id for q in task.queries()]
            table: Mapping[str, Callable[[Any], Callable[[Any], Any]]] = (
                FORWARD_BASELINES if isinstance(task, ForwardTask) else _INVERSE_TABLE)
            for name in names:
                if name not in table:
                    continue
                say(f"{task_name} · {split} · {name}: predicting {len(task)} samples")
                t0 = time.perf_counter()
                if isinstance(task, ForwardTask):
                    model = table[name](task)
                else:
                    if name not in inverse_fitted:
                        inverse_fitted[name] = table[name](task)
                    model = inverse_fitted[name]
                preds = predict(task, model, executor=executor)
                seconds[name] += time.perf_counter() - t0
                if isinstance(task, ForwardTask):
                    empty = Particle(np.zeros(0, dtype=np.int64), np.zeros((0, 3)))
                    write_forward_predictions(sub_dir / name / "forward" / f"{split}.extxyz",
                                              {sid: preds.get(sid, empty) for sid in ids})
                else:
                    nan = (float("nan"),) * 7
                    write_inverse_predictions(sub_dir / name / "inverse" / f"{split}.csv",
                                              {sid: preds.get(sid, nan) for sid in ids})
    return seconds


def run_benchmark(store_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                  splits: Sequence[str] = ("id", "ood"), subset: str = "eval",
                  tasks: Sequence[str] = ("forward", "inverse"),
                  forward_models: Sequence[str] | None = None,
                  inverse_models: Sequence[str] | None = None,
                  seed: int = 0, n_resamples: int = 1000, progress: bool = True,
                  log: Callable[[str], None] | None = None, workers: int = 1,
                  executor: Executor | None = None,
                  per_group: int = EVAL_ROTATIONS_PER_GROUP) -> BenchmarkSummary:
    """Predict with the baselines, write them as submissions under ``out/submissions``,
    then build the leaderboard (results, tables, plots, report site) from every submission
    there; ``per_group`` rotations per (material, R) of the ``eval`` subset (every submission
    there must cover the same). ``workers`` processes score task-1 samples; ``executor`` runs the baselines'
    predictions (e.g. the solver's sweeps; default: this process). Results depend on neither."""
    from c2np.leaderboard import build_leaderboard
    from c2np.submissions import prediction_file

    t_start = time.perf_counter()
    say = log or (lambda _msg: None)
    out = Path(out_dir)
    unknown_tasks = [t for t in tasks if t not in ("forward", "inverse")]
    if unknown_tasks or not tasks:
        raise C2NPInputError(f"--tasks: unknown task(s) {unknown_tasks or '(none given)'}; choose from "
                             "forward, inverse")
    unknown_splits = [s for s in splits if s not in SPLITS]
    if unknown_splits or not splits:
        raise C2NPInputError(f"--splits: unknown split(s) {unknown_splits or '(none given)'}; choose from "
                             f"{', '.join(SPLITS)}")
    if subset not in ("eval", "full"):
        raise C2NPInputError(f"--subset: unknown subset {subset!r}; choose eval or full")
    if per_group < 1:
        raise C2NPInputError(f"--per-group must be >= 1, got {per_group}")
    store = DatasetStore.open(store_path)
    protocol = get_protocol(store.protocol)
    fwd = list(FORWARD_BASELINES) if forward_models is None else list(forward_models)
    heldout = bool(store.recipes.heldout_materials)
    inv = (list(INVERSE_BASELINES) + (list(HELDOUT_BASELINES) if heldout else [])
           if inverse_models is None else list(inverse_models))
    for name in fwd:
        if name not in FORWARD_BASELINES:
            raise C2NPInputError(f"unknown task-1 baseline {name!r}; choose from {sorted(FORWARD_BASELINES)}")
    for name in inv:
        if name not in _INVERSE_TABLE:
            raise C2NPInputError(f"unknown task-2 baseline {name!r}; choose from {sorted(_INVERSE_TABLE)}")
    names = [n for n in fwd if "forward" in tasks] + [n for n in inv if "inverse" in tasks]
    all_splits = list(splits)
    if store.recipes.heldout_materials and "heldout" not in all_splits and "inverse" in tasks:
        all_splits.append("heldout")  # strict protocol: task 2 on held-out materials
    sub_dir = out / "submissions"
    seconds = _write_baseline_predictions(store, sub_dir, names, tasks, all_splits, subset, say,
                                          executor=executor, per_group=per_group)
    from c2np.fileio import write_text

    for name in names:
        task = "forward" if name in FORWARD_BASELINES else "inverse"
        write_text(sub_dir / name / "model.yml",
                   baseline_model_yml(name, task, store, inference_seconds=seconds[name], subset=subset,
                                      per_group=per_group))
    lb = build_leaderboard(sub_dir, store, results_dir=out / "results", leaderboard_dir=out,
                           site_dir=out / "report", tasks=tasks, splits=splits, n_resamples=n_resamples,
                           seed=seed, workers=workers, progress=progress, log=say, per_group=per_group)
    # per (task, metric, rows): the held-out materials' split is plotted on its own (its radii
    # are those of every split; merged with ID / OOD it would mix material sets per radius)
    per_radius: dict[tuple[str, str, str], dict[str, dict[int, float]]] = {}
    inverse_preds: dict[tuple[str, str], Path] = {}
    forward_preds: dict[tuple[str, str], Path] = {}
    for d in lb.documents:
        task_name, model, split = d["task"], d["model"], d["split"]
        for metric in RADIUS_PLOTS[task_name]:
            rows_key = split if split in HELDOUT_SPLITS else "test"
            per_radius.setdefault((task_name, metric.value, rows_key), {}).setdefault(model, {}).update(
                {int(r): v[metric.value]["mean"] for r, v in d["metrics"]["per_radius"].items()})
        path, _ = prediction_file(sub_dir / model, task_name, split)
        if path is not None:
            (forward_preds if task_name == "forward" else inverse_preds)[(model, split)] = path
    plots = _plots(store, protocol, lb.rows, per_radius, inverse_preds, forward_preds, out / "plots", splits,
                   subset, per_group)
    footer = ("## Plots\n\n" + "\n".join(f"![{p.stem}](plots/{p.name})" for p in plots)
              + "\n\nInteractive report (tables with intervals, plots, 3D particle viewer): "
                "[report/index.html](report/index.html)")
    write_leaderboard(lb.rows, out, headline={t: [m.value for m in ms] for t, ms in HEADLINE.items()},
                      extra=lb.extra, footer=footer)  # the same tables, now with the plots
    return BenchmarkSummary(out, lb.leaderboard_md, lb.leaderboard_json, lb.results, tuple(plots), lb.rows,
                            time.perf_counter() - t_start, lb.report_index, sub_dir)


_LABELS = METRIC_LABELS


def _plots(store: DatasetStore, protocol: Any, rows: Sequence[LeaderboardRow],
           per_radius: dict[tuple[str, str, str], dict[str, dict[int, float]]],
           inverse_preds: dict[tuple[str, str], Path], forward_preds: dict[tuple[str, str], Path],
           plot_dir: Path, splits: Sequence[str], subset: str, per_group: int) -> list[Path]:
    plots: list[Path] = []
    for (task, metric, rows_key), series in per_radius.items():
        label = _LABELS.get(metric, metric)
        held = rows_key in HELDOUT_SPLITS
        suffix = "_" + rows_key.replace("-", "_") if held else ""
        name = f"{task}_{metric.replace('@', '_at_')}{suffix}_vs_radius.png"
        part = {"heldout-dev": "held-out development materials", "heldout-test": "sealed test materials"}
        plots.append(plot_metric_vs_radius(
            series, label, protocol, plot_dir / name,
            title=f"{label} vs radius, {part.get(rows_key, 'held-out materials')} (every radius)" if held else ""))
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
        sel = select_rows(store.recipes, split, subset, per_group=per_group)
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
    split = "ood" if "ood" in splits else splits[-1]
    sel = select_rows(store.recipes, split, subset, per_group=per_group)
    if len(sel):
        row = int(sel[np.argmax(store.recipes.radius_angstrom[sel])])
        sid = store.recipes.sample_id(row)
        for model in ("memorisation", "random-ball"):
            f = forward_preds.get((model, split))
            if f is None:
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
            "submissions": str(summary.submissions_dir) if summary.submissions_dir else None,
            "rows": json.loads(summary.leaderboard_json.read_text())["rows"]}
