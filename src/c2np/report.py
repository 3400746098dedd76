"""The leaderboard and its plots: Markdown + JSON tables with raw and normalised metrics,
metric vs radius, ID vs OOD bars, a space-group confusion matrix, predicted vs true particles.

Normalised score of a metric (per task and split): ``(v - floor) / (ceiling - floor)``, 0 at
the floor baseline and 1 at the ceiling. Task 1: floor ``random-ball``, ceiling
``analytic-carve``. Task 2: floor ``majority-class``, ceiling the metric's perfect value (1 for
accuracies, 0 for errors), since no model is the exact inverse. Undefined (``None``) when
floor and ceiling coincide.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from c2np.categories import LEARNED, UNSTATED
from c2np.fileio import atomic_path, write_texts
from c2np.metrics import PRIMARY, Metric
from c2np.particle import Particle
from c2np.splits import Protocol

__all__ = ["LeaderboardRow", "normalise", "row_from_results", "write_leaderboard", "plot_metric_vs_radius",
           "plot_id_vs_ood", "plot_confusion", "plot_particles", "plot_results", "new_figure",
           "save_figure", "metric_vs_radius_figure", "id_vs_ood_figure", "confusion_figure",
           "style_index", "MARKERS", "LINESTYLES", "CONFUSION_CMAP", "SPLIT_ORDER", "split_rank",
           "FORWARD_FLOOR", "FORWARD_CEILING", "INVERSE_FLOOR", "REFERENCE_BASELINES",
           "METRIC_LABELS", "RADIUS_PLOTS"]

FORWARD_FLOOR = "random-ball"
FORWARD_CEILING = "analytic-carve"
INVERSE_FLOOR = "majority-class"
# Plot labels of the metrics drawn against the radius (``RADIUS_PLOTS``).
METRIC_LABELS: dict[str, str] = {
    Metric.F1_0_1.value: "atom F1 at 0.1 Å", Metric.F1_0_5.value: "atom F1 at 0.5 Å",
    Metric.CHAMFER.value: "mean Chamfer distance (Å)",
    Metric.JOINT_ACCURACY_PAPER.value: "joint accuracy (paper tolerance)",
    Metric.SPACEGROUP_ACCURACY.value: "space-group accuracy",
}
# Per-radius plots: the primary metric of each task and one more.
RADIUS_PLOTS: dict[str, tuple[Metric, Metric]] = {
    "forward": (PRIMARY["forward"], Metric.CHAMFER),
    "inverse": (PRIMARY["inverse"], Metric.SPACEGROUP_ACCURACY),
}
# The baselines every table that ranks models shows on its rows (contract §9, §12).
REFERENCE_BASELINES: dict[str, tuple[str, ...]] = {
    "forward": ("analytic-carve", "memorisation", "random-ball"),
    "inverse": ("solver", "composition-lookup", "majority-class"),
}


@dataclass(frozen=True)
class LeaderboardRow:
    """One (model, task, split) line of the leaderboard.

    Attributes:
        model, task, split, protocol: identification.
        metrics: metric name -> overall value (mean over samples, failures included).
        higher_is_better: metric name -> direction.
        n_samples, n_failed: counts.
        results_file: the results JSON this row came from.
        normalised: metric name -> normalised score (filled by :func:`normalise`).
        ci95: metric name -> 95 % bootstrap interval ``[lo, hi]`` of the overall value.
    """

    model: str
    task: str
    split: str
    protocol: str
    metrics: Mapping[str, float]
    higher_is_better: Mapping[str, bool]
    n_samples: int
    n_failed: int
    results_file: str = ""
    normalised: Mapping[str, float | None] = field(default_factory=dict)
    ci95: Mapping[str, Sequence[float] | None] = field(default_factory=dict)
    category: str = UNSTATED
    priors: Sequence[str] = ()
    per_structure_type: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    structure_types_in_training: Sequence[str] = ()

    @property
    def category_label(self) -> str:
        """``learned``, ``analytic``, ``unstated`` or ``learned+prior (p1, p2)``."""
        return f"{self.category} ({', '.join(self.priors)})" if self.priors else self.category


def row_from_results(data: Mapping[str, Any], path: str | os.PathLike[str] = "") -> LeaderboardRow:
    """The leaderboard row of one results document (``c2np.results/1``; not normalised)."""
    overall = data["metrics"]["overall"]
    info = data.get("metric_info", {})
    return LeaderboardRow(
        model=str(data["model"]), task=str(data["task"]), split=str(data["split"]),
        protocol=str(data["protocol"]),
        metrics={k: v["mean"] for k, v in overall.items()},
        higher_is_better={k: m.get("better") == "higher" for k, m in info.items()
                          if m.get("better") in ("higher", "lower")},
        n_samples=int(data["n_samples"]), n_failed=int(data["n_failed"]), results_file=str(path),
        ci95={k: (list(v["ci95"]) if v.get("ci95") is not None else None) for k, v in overall.items()},
        category=str(data.get("category", UNSTATED)), priors=tuple(data.get("priors", ())),
        per_structure_type=dict(data["metrics"].get("per_structure_type", {})),
        structure_types_in_training=tuple(data.get("structure_types_in_training", ())))


#: the order of splits in tables: each protocol's scored splits first (sealed test, held-out
#: development, ID, OOD), then the rest
SPLIT_ORDER: tuple[str, ...] = ("heldout-test", "heldout-dev", "heldout", "id", "ood", "test", "val", "train")


def split_rank(split: str) -> int:
    """Position of ``split`` in :data:`SPLIT_ORDER` (unknown splits last)."""
    return SPLIT_ORDER.index(split) if split in SPLIT_ORDER else len(SPLIT_ORDER)


def best_learned_line(rows: Sequence[LeaderboardRow], task: str, split: str, metric: str) -> str:
    """One Markdown line naming the best ``learned`` row of (task, split) by ``metric`` with its
    interval; models with priors never count (:mod:`c2np.categories`)."""
    cands = [r for r in rows if r.task == task and r.split == split and r.category == LEARNED
             and r.metrics.get(metric) is not None and np.isfinite(r.metrics[metric])]
    if not cands:
        return f"- best learned model on {split}: none (no row of category `learned`)."
    hib = cands[0].higher_is_better.get(metric, True)
    best = max(cands, key=lambda r: r.metrics[metric] if hib else -r.metrics[metric])
    return (f"- best learned model on {split}: **{best.model}**, {metric} {_fmt(best.metrics[metric])}"
            f"{_fmt_ci(best.ci95.get(metric))}.")


def _perfect(higher_is_better: bool) -> float:
    return 1.0 if higher_is_better else 0.0


def normalise(rows: Sequence[LeaderboardRow]) -> list[LeaderboardRow]:
    """Rows with ``normalised`` filled in (see the module docstring)."""
    out = []
    index = {(r.model, r.task, r.split): r for r in rows}
    for r in rows:
        norm: dict[str, float | None] = {}
        for name, v in r.metrics.items():
            hib = r.higher_is_better.get(name, True)
            if r.task == "forward":
                floor_row = index.get((FORWARD_FLOOR, r.task, r.split))
                ceil_row = index.get((FORWARD_CEILING, r.task, r.split))
                floor = floor_row.metrics.get(name) if floor_row else None
                ceil = ceil_row.metrics.get(name) if ceil_row else None
            else:
                floor_row = index.get((INVERSE_FLOOR, r.task, r.split))
                floor = floor_row.metrics.get(name) if floor_row else None
                ceil = _perfect(hib)
            if floor is None or ceil is None or v is None or not np.isfinite(v) \
                    or not np.isfinite(floor) or not np.isfinite(ceil) or abs(ceil - floor) < 1e-12:
                norm[name] = None
            else:
                norm[name] = float((v - floor) / (ceil - floor))
        out.append(LeaderboardRow(**{**asdict(r), "normalised": norm}))
    return out


def _fmt(v: float | None, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "–"
    if abs(v) < 0.5 * 10 ** -digits:
        v = 0.0  # no "-0.000"
    return f"{v:.{digits}f}"


def _fmt_ci(ci: Sequence[float] | None) -> str:
    """`` [lo, hi]`` of a 95 % interval, or nothing when there is none."""
    return "" if not ci or len(ci) != 2 else f" [{_fmt(float(ci[0]), 2)}, {_fmt(float(ci[1]), 2)}]"


def write_leaderboard(rows: Sequence[LeaderboardRow], out_dir: str | os.PathLike[str], *,
                      headline: Mapping[str, Sequence[str]], extra: Mapping[str, Any] | None = None,
                      footer: str = "") -> dict[str, Path]:
    """Write ``leaderboard.md`` and ``leaderboard.json`` (atomically) into ``out_dir``.

    ``headline`` maps a task to the metric names shown as Markdown columns (all metrics are
    in the JSON); ``footer`` is Markdown appended after the tables. Returns the written paths.
    """
    out = Path(out_dir)
    rows = normalise(rows)
    lines = ["# C2NP leaderboard", ""]
    if extra:
        for k, v in extra.items():
            lines.append(f"- {k}: `{v}`")
        lines.append("")
    lines.append("Raw value, its 95 % bootstrap interval in square brackets, and in round brackets the "
                 "normalised score (0 = floor, 1 = ceiling; see `c2np.report`). Failures are counted at "
                 "their worst value.")
    for task in ("forward", "inverse"):
        trows = [r for r in rows if r.task == task]
        if not trows:
            continue
        names = [n for n in headline.get(task, []) if any(r.metrics.get(n) is not None for r in trows)]
        lines += ["", f"## Task {'1 (forward)' if task == 'forward' else '2 (inverse)'}", ""]
        lines.append("| model | category | split | n | failed | " + " | ".join(names) + " |")
        lines.append("|---|---|---|---:|---:|" + "---:|" * len(names))
        for r in sorted(trows, key=lambda x: (split_rank(x.split), x.split, x.model)):
            cells = [f"{_fmt(r.metrics.get(n))}{_fmt_ci(r.ci95.get(n))} ({_fmt(r.normalised.get(n), 2)})"
                     for n in names]
            lines.append(f"| {r.model} | {r.category_label} | {r.split} | {r.n_samples} | {r.n_failed} | "
                         + " | ".join(cells) + " |")
        lines += [""] + [best_learned_line(trows, task, s, names[0]) for s in
                         sorted({r.split for r in trows}, key=lambda x: (split_rank(x), x)) if names]
    lines += structure_type_table(rows, headline.get("inverse", [])[:1])
    if footer:
        lines += ["", footer]
    md = out / "leaderboard.md"
    js = out / "leaderboard.json"
    doc = json.dumps({"rows": [asdict(r) for r in rows], **({"extra": dict(extra)} if extra else {})},
                     indent=2, default=lambda o: o.item() if isinstance(o, np.generic) else str(o))
    write_texts({js: doc, md: "\n".join(lines) + "\n"})  # both or neither on a write error
    return {"markdown": md, "json": js}


def structure_type_table(rows: Sequence[LeaderboardRow], metrics: Sequence[str]) -> list[str]:
    """Markdown lines of the task-2 results per structure type (one table per split and
    metric): a row per type, marked seen or unseen by the store's training materials, a
    column per model with its value and 95 % interval; nothing when no task-2 row has more
    than one structure type."""
    lines: list[str] = []
    trows = [r for r in rows if r.task == "inverse" and len(r.per_structure_type) > 1]
    for split in sorted({r.split for r in trows}, key=lambda x: (split_rank(x), x)):
        srows = sorted((r for r in trows if r.split == split), key=lambda r: r.model)
        types = sorted({t for r in srows for t in r.per_structure_type})
        trained = set(srows[0].structure_types_in_training)
        for metric in metrics:
            lines += ["", f"## Task 2 per structure type: {metric}, {split}", "",
                      "| structure type | in training | n | " + " | ".join(r.model for r in srows) + " |",
                      "|---|---|---:|" + "---:|" * len(srows)]
            for t in sorted(types, key=lambda x: (x not in trained, x)):
                n = next((int(r.per_structure_type[t][metric]["n"]) for r in srows
                          if t in r.per_structure_type and metric in r.per_structure_type[t]), 0)
                cells = []
                for r in srows:
                    g = r.per_structure_type.get(t, {}).get(metric)
                    cells.append("–" if g is None else f"{_fmt(g.get('mean'))}{_fmt_ci(g.get('ci95'))}")
                lines.append(f"| {t} | {'seen' if t in trained else '**unseen**'} | {n} | " + " | ".join(cells) + " |")
    return lines


def new_figure(**kwargs: Any) -> Any:
    """A :class:`matplotlib.figure.Figure` that belongs to no pyplot state machine (the
    caller's matplotlib backend is never changed)."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def save_figure(fig: Any, path: str | os.PathLike[str], *, dpi: int = 120) -> Path:
    """Write ``fig`` to ``path`` atomically; the format follows the suffix (default PNG)."""
    p = Path(path)
    with atomic_path(p) as tmp:
        fig.savefig(tmp, dpi=dpi, format=p.suffix.lstrip(".").lower() or "png")
    return p


#: marker and line style of the n-th model of a plot (matplotlib names); the pairs differ for
#: up to 40 models, and colours differ on top of them
MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
LINESTYLES: tuple[str, ...] = ("-", "--", "-.", ":")


def style_index(i: int) -> tuple[int, int]:
    """(marker, line style) indices of the ``i``-th model: distinct pairs for i < 40."""
    return i % len(MARKERS), (i + i // 20) % len(LINESTYLES)


def _wrap(title: str, width: int = 60) -> str:
    """A plot title broken into lines of at most ``width`` characters (never wider than the figure)."""
    import textwrap

    return "\n".join(textwrap.wrap(title, width)) or title


def _shown_radii(per_model: Mapping[str, Mapping[int, float]], radii_angstrom: Sequence[int] | None) -> list[int]:
    """The radii a radius plot covers: the store's (``radii_angstrom``), else those with data."""
    if radii_angstrom is not None:
        return sorted({int(r) for r in radii_angstrom})
    return sorted({int(r) for series in per_model.values() for r in series})


def metric_vs_radius_figure(per_model: Mapping[str, Mapping[int, float]], metric_label: str,
                            protocol: Protocol, *, radii_angstrom: Sequence[int] | None = None,
                            title: str = "") -> Any:
    """The figure of :func:`plot_metric_vs_radius`: one line per model (its own colour,
    marker and line style), the x axis and the ID (blue) / OOD (red) shading limited to
    ``radii_angstrom`` (the store's radii; default: the radii with data)."""
    radii = _shown_radii(per_model, radii_angstrom)
    fig = new_figure(figsize=(7.5, 4.2))
    ax = fig.subplots()
    shown = set(radii)
    for r in protocol.ood_radii_angstrom:
        if r in shown:
            ax.axvspan(r - 0.5, r + 0.5, color="tab:red", alpha=0.12, lw=0)
    for r in protocol.id_radii_angstrom:
        if r in shown:
            ax.axvspan(r - 0.5, r + 0.5, color="tab:blue", alpha=0.10, lw=0)
    for i, (model, series) in enumerate(sorted(per_model.items())):
        rs = sorted(series)
        mi, li = style_index(i)
        ax.plot(rs, [series[r] for r in rs], marker=MARKERS[mi], ms=4.5, label=model,
                linestyle=LINESTYLES[li], lw=1.4, alpha=0.9)
    if radii:
        ax.set_xlim(radii[0] - 0.75, radii[-1] + 0.75)
        step = max(1, len(radii) // 12)
        ax.set_xticks(radii[::step])
    ax.set_xlabel("sphere radius R (Å)")
    ax.set_ylabel(metric_label)
    ax.set_title(_wrap(title or f"{metric_label} vs radius (blue: ID radii, red: OOD radii)"), fontsize=10)
    if per_model:
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.grid(alpha=0.3)
    fig.set_layout_engine("constrained")
    return fig


def plot_metric_vs_radius(per_model: Mapping[str, Mapping[int, float]], metric_label: str,
                          protocol: Protocol, path: str | os.PathLike[str], *, title: str = "",
                          radii_angstrom: Sequence[int] | None = None) -> Path:
    """Line plot of a metric against R (Å), one line per model, with ID radii shaded blue
    and OOD radii red, limited to the store's radii (:func:`metric_vs_radius_figure`)."""
    return save_figure(metric_vs_radius_figure(per_model, metric_label, protocol,
                                               radii_angstrom=radii_angstrom, title=title), path)


def id_vs_ood_figure(values: Mapping[str, Mapping[str, float]], metric_label: str) -> Any:
    """The figure of :func:`plot_id_vs_ood`; model names are tick labels slanted at 30°,
    inside the figure (constrained layout)."""
    models = sorted(values)
    splits = [s for s in ("id", "ood") if any(s in values[m] for m in models)]
    fig = new_figure(figsize=(max(5.0, 0.9 * len(models) + 2.5), 4.6))
    ax = fig.subplots()
    width = 0.8 / max(len(splits), 1)
    colors = {"id": "tab:blue", "ood": "tab:red"}
    x = np.arange(len(models))
    for i, s in enumerate(splits):
        ys = [values[m].get(s, np.nan) for m in models]
        ax.bar(x + (i - (len(splits) - 1) / 2) * width, ys, width, label=s.upper(), color=colors[s])
    ax.set_xticks(x)
    ax.set_xticklabels(models, rotation=30, ha="right", rotation_mode="anchor", fontsize=8)
    ax.set_ylabel(metric_label)
    ax.set_title(_wrap(f"{metric_label}: in-distribution vs out-of-distribution radii"), fontsize=10)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.set_layout_engine("constrained")
    return fig


def plot_id_vs_ood(values: Mapping[str, Mapping[str, float]], metric_label: str,
                   path: str | os.PathLike[str]) -> Path:
    """Grouped bars: one group per model, one bar per split (ID, OOD)."""
    return save_figure(id_vs_ood_figure(values, metric_label), path)


#: colour map of the confusion matrices: sequential, 0 pale, more is darker
CONFUSION_CMAP = "Blues"


def confusion_figure(true_sg: Sequence[int], pred_sg: Sequence[int | None], *,
                     title: str = "space-group confusion") -> Any:
    """The figure of :func:`plot_confusion`: counts on :data:`CONFUSION_CMAP` from 0 (pale)
    to the largest count (darkest), with a colour bar."""
    labels_true = sorted(set(int(t) for t in true_sg))
    labels_pred = sorted(set(labels_true) | {int(p) for p in pred_sg if p is not None})
    cols = [str(s) for s in labels_pred] + ["fail"]
    mat = np.zeros((len(labels_true), len(cols)), dtype=int)
    for t, p in zip(true_sg, pred_sg):
        j = len(cols) - 1 if p is None else labels_pred.index(int(p))
        mat[labels_true.index(int(t)), j] += 1
    fig = new_figure(figsize=(2.2 + 0.45 * len(cols), 1.6 + 0.45 * len(labels_true)))
    ax = fig.subplots()
    im = ax.imshow(mat, cmap=CONFUSION_CMAP, vmin=0, vmax=max(int(mat.max()), 1))
    fig.colorbar(im, ax=ax, shrink=0.8, label="samples")
    for i in range(mat.shape[0]):
        for j in range(mat.shape[1]):
            if mat[i, j]:
                ax.text(j, i, str(mat[i, j]), ha="center", va="center", fontsize=7,
                        color="white" if mat[i, j] > mat.max() / 2 else "black")
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, rotation=90, fontsize=7)
    ax.set_yticks(range(len(labels_true)))
    ax.set_yticklabels([str(s) for s in labels_true], fontsize=7)
    ax.set_xlabel("predicted space group")
    ax.set_ylabel("true space group")
    ax.set_title(_wrap(title, 40), fontsize=9)
    fig.set_layout_engine("constrained")
    return fig


def plot_confusion(true_sg: Sequence[int], pred_sg: Sequence[int | None], path: str | os.PathLike[str], *,
                   title: str = "space-group confusion") -> Path:
    """Confusion matrix over the space groups that occur (rows true, columns predicted; a
    missing prediction is the column 'fail')."""
    return save_figure(confusion_figure(true_sg, pred_sg, title=title), path)


def plot_particles(pred: Particle, true: Particle, path: str | os.PathLike[str], *, title: str = "",
                   slab_angstrom: float = 1.0) -> Path:
    """A predicted particle against the true one: (left) the central slab |z| < slab, true atoms
    as open circles and predicted atoms as dots, coloured by element, with the true extent
    drawn as a circle; (right) atom count within distance r of the centre, both particles."""
    from ase.data import chemical_symbols
    from ase.data.colors import jmol_colors
    from matplotlib.patches import Circle

    fig = new_figure(figsize=(10, 4.6))
    (ax, ax2) = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.1, 1]})
    for part, style in ((true, "true"), (pred, "pred")):
        if part.n_atoms == 0:
            continue
        sel = np.abs(part.positions_angstrom[:, 2]) < slab_angstrom
        for z in np.unique(part.numbers[sel]):
            p = part.positions_angstrom[sel & (part.numbers == z)]
            color = "#7a7a7a" if z == 1 else jmol_colors[int(z)]
            if style == "true":
                ax.scatter(p[:, 0], p[:, 1], s=38, facecolors="none", edgecolors=[color], linewidths=1.0,
                           label=f"{chemical_symbols[int(z)]} true")
            else:
                ax.scatter(p[:, 0], p[:, 1], s=8, color=color, label=f"{chemical_symbols[int(z)]} predicted")
    r_true = float(np.linalg.norm(true.positions_angstrom, axis=1).max()) if true.n_atoms else 1.0
    ax.add_patch(Circle((0, 0), r_true, fill=False, ls="--", color="0.4", lw=0.8))
    ax.set_aspect("equal")
    ax.set_xlabel("x (Å)")
    ax.set_ylabel("y (Å)")
    ax.set_title(f"central slab |z| < {slab_angstrom:g} Å", fontsize=9)
    ax.legend(fontsize=7, loc="upper right", framealpha=0.8)
    for part, name, color in ((true, "true", "k"), (pred, "predicted", "tab:orange")):
        d = np.sort(np.linalg.norm(part.positions_angstrom, axis=1)) if part.n_atoms else np.zeros(0)
        ax2.step(d, np.arange(1, len(d) + 1), where="post", color=color, label=f"{name} ({part.n_atoms} atoms)")
    ax2.set_xlabel("distance from centre r (Å)")
    ax2.set_ylabel("atoms within r")
    ax2.set_title("cumulative atom count", fontsize=9)
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_results(data: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """PNG of a results document: headline metrics per radius with 95 % intervals (left)
    and the per-sample distribution of the main distance/error metric (right)."""
    forward = data["task"] == "forward"
    names = ["f1@0.1", "f1@0.5"] if forward else ["spacegroup_accuracy", "joint_accuracy_paper",
                                                  "joint_accuracy_strict"]
    dist_name = "matched_rmsd" if forward else "lattice_rmse_perm_invariant"
    per_r = data["metrics"]["per_radius"]
    radii = sorted(per_r, key=int)
    fig = new_figure(figsize=(10, 4))
    ax1, ax2 = fig.subplots(1, 2)
    for n in names:
        mean = np.array([per_r[r][n]["mean"] for r in radii])
        lo = np.array([per_r[r][n]["ci95"][0] for r in radii])
        hi = np.array([per_r[r][n]["ci95"][1] for r in radii])
        ax1.errorbar([int(r) for r in radii], mean, yerr=[mean - lo, hi - mean], marker="o",
                     capsize=3, label=n)
    ax1.set_xlabel("R (Å)")
    ax1.set_ylabel("failure-penalised mean, 95 % CI")
    ax1.set_ylim(-0.02, 1.02)
    ax1.legend()
    ax1.set_title(f"{data['model']} · {data['task']} · {data['split']} ({data['subset']})")
    vals = np.array(data["samples"][dist_name], dtype=float)
    ok = np.array(data["samples"]["ok"], dtype=bool)
    if ok.any():
        ax2.hist(vals[ok], bins=40, color="tab:blue", label="successes")
    ax2.set_xlabel(f"{dist_name} ({data['metric_info'][dist_name]['unit']})")
    ax2.set_ylabel("samples")
    ax2.set_title(f"{int((~ok).sum())} failed of {len(ok)} (not shown: failure value)")
    if ok.any():
        ax2.legend()
    fig.tight_layout()
    return save_figure(fig, path)
