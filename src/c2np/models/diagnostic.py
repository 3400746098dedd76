"""The paper's diagnostic: training loss next to geometric fidelity, per model.

Reads run folders (``config.json`` + ``log.csv``) and writes a plot with, per task, the
training/validation loss per epoch beside the validation fidelity per epoch with its 95 %
bootstrap interval (task 1: atom F1 at 0.5 Å of sampled validation particles; task 2: the
paper's lattice RMSE of the validation predictions), and a table (Markdown + CSV) with the
final value and its interval, the best checkpoint's epoch and value (the run's ``best/``, as
selected in training), the number of samples behind every point, and the rank correlation
between validation loss and fidelity over epochs (does a lower loss mean a better particle?).

Every fidelity number comes from the training log, i.e. from the evaluation harness
(:func:`c2np.models.training.fidelity`), and the reference baselines on the same rows from the
run's ``reference_fidelity.json`` (:func:`c2np.models.training.reference_fidelity`); nothing is
rescored here.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from c2np.errors import C2NPInputError
from c2np.fileio import atomic_write
from c2np.models import display_name
from c2np.terminal import printable

__all__ = ["read_run_log", "read_log_csv", "read_references", "write_diagnostic", "loss_fidelity_table",
           "FIDELITY", "TABLE_COLUMNS", "REFERENCE_LABELS"]

#: per task: (log column, label)
FIDELITY = {"forward": ("val_f1@0.5", "atom F1 @ 0.5 Å (validation samples)"),
            "inverse": ("val_lattice_rmse_paper", "lattice RMSE, paper (validation)")}
REFERENCE_LABELS = {"analytic-carve": "analytic carve (ceiling)", "memorisation": "memorisation",
                    "random-ball": "random ball (floor)", "solver": "crystallographic solver",
                    "composition-lookup": "composition lookup (memorisation)", "majority-class": "majority class"}
TABLE_COLUMNS = ["model", "task", "config", "epochs", "steps", "n_fidelity", "train_loss", "val_loss",
                 "fidelity_metric", "fidelity", "fidelity_ci95", "best_fidelity", "best_epoch",
                 "spearman_val_loss_vs_fidelity"]


def read_run_log(run_dir: str | Path) -> tuple[dict, list[dict[str, float]]]:
    """(run metadata, log rows) of a run folder."""
    from c2np.models.runfiles import read_json
    from c2np.models.schemas import RUN_META_SCHEMA

    run = Path(run_dir)
    meta_path, log_path = run / "config.json", run / "log.csv"
    if not os.path.lexists(meta_path) or not os.path.lexists(log_path):
        raise C2NPInputError(f"{printable(run)}: not a trained run folder (needs config.json and log.csv)")
    meta = read_json(meta_path, what="run metadata", folder=run, schema=RUN_META_SCHEMA)
    return meta, read_log_csv(log_path, folder=run)


def read_log_csv(path: str | Path, *, folder: str | Path | None = None) -> list[dict[str, float]]:
    """The rows of a training ``log.csv`` (one per epoch; empty cells left out), a regular
    file inside ``folder`` (default its own folder). A cell that is not a number raises
    :class:`C2NPInputError` naming the file, line and column."""
    from c2np.models.runfiles import read_log

    return read_log(Path(path), columns=None, folder=folder)


def read_references(run_dir: str | Path) -> tuple[tuple[str, ...], dict[str, dict[str, float]]]:
    """(fidelity sample ids, {baseline: logged values}) of a run's ``reference_fidelity.json``
    (empty when the run has none)."""
    from c2np.models.runfiles import read_json
    from c2np.models.schemas import REFERENCE_FIDELITY_SCHEMA

    path = Path(run_dir) / "reference_fidelity.json"
    if not os.path.lexists(path):
        return (), {}
    data = read_json(path, what="reference fidelity", folder=run_dir, schema=REFERENCE_FIDELITY_SCHEMA,
                     finite=False)
    return tuple(data["sample_ids"]), dict(data["baselines"])


def _best_epoch(run: Path) -> int | None:
    """The epoch of a run's ``best/state.json`` (None: the run has none)."""
    from c2np.models.runfiles import read_json
    from c2np.models.schemas import BEST_STATE_SCHEMA

    path = run / "best" / "state.json"
    if not os.path.lexists(path):
        return None
    return int(read_json(path, what="checkpoint state", folder=run, schema=BEST_STATE_SCHEMA, finite=False)["epoch"])


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


def loss_fidelity_table(runs: Sequence[str | Path]) -> list[dict[str, object]]:
    """One row per run: model (labelled), task, epochs, samples per fidelity point, final losses,
    fidelity (final with its 95 % interval, and best with its epoch) and the Spearman
    correlation of validation loss with fidelity over epochs."""
    out = []
    for r in runs:
        meta, rows = read_run_log(r)
        if not rows:
            continue
        key = FIDELITY[meta["task"]][0]
        fid = np.array([row.get(key, np.nan) for row in rows])
        val = np.array([row.get("val_loss", np.nan) for row in rows])
        last = rows[-1]
        best_epoch = _best_epoch(Path(r))
        best_i = next((i for i, row in enumerate(rows) if int(row["epoch"]) == best_epoch), None)
        out.append({
            "model": display_name(meta["model"], meta["task"], meta.get("config")), "task": meta["task"],
            "config": meta["config"].get("name", ""), "epochs": int(last["epoch"]), "steps": int(last["step"]),
            "n_fidelity": int(last.get("n_fidelity", 0)),
            "train_loss": last.get("train_loss", np.nan), "val_loss": last.get("val_loss", np.nan),
            "fidelity_metric": key[4:], "fidelity": last.get(key, np.nan),
            "fidelity_ci95": f"[{last.get(key + '_lo', np.nan):.3g}, {last.get(key + '_hi', np.nan):.3g}]",
            "best_fidelity": float(fid[best_i]) if best_i is not None else np.nan,
            "best_epoch": int(rows[best_i]["epoch"]) if best_i is not None else -1,
            "spearman_val_loss_vs_fidelity": _spearman(val, fid)})
    return out + _reference_rows(runs)


def _reference_rows(runs: Sequence[str | Path]) -> list[dict[str, object]]:
    """Rows of the reference baselines on the runs' fidelity rows (once per task and row set)."""
    out: list[dict[str, object]] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for r in runs:
        meta, _ = read_run_log(r)
        ids, refs = read_references(r)
        if not refs or (meta["task"], ids) in seen:
            continue
        seen.add((meta["task"], ids))
        key = FIDELITY[meta["task"]][0]
        for name, vals in refs.items():
            out.append({"model": f"{REFERENCE_LABELS.get(name, name)} (reference, same rows)",
                        "task": meta["task"], "config": "", "epochs": "", "steps": "",
                        "n_fidelity": int(vals.get("n_fidelity", 0)), "train_loss": "", "val_loss": "",
                        "fidelity_metric": key[4:], "fidelity": vals.get(key, np.nan),
                        "fidelity_ci95": f"[{vals.get(key + '_lo', np.nan):.3g}, {vals.get(key + '_hi', np.nan):.3g}]",
                        "best_fidelity": "", "best_epoch": "", "spearman_val_loss_vs_fidelity": ""})
    return out


def _figure(logs: list[tuple[dict, list[dict[str, float]]]], runs: Sequence[str | Path]):  # -> Figure
    from matplotlib.figure import Figure

    tasks = [t for t in ("forward", "inverse") if any(m["task"] == t for m, _ in logs)]
    fig = Figure(figsize=(11, 4 * len(tasks)))
    axes = fig.subplots(len(tasks), 2, squeeze=False)
    for i, task in enumerate(tasks):
        key, label = FIDELITY[task]
        ax_l, ax_f = axes[i]
        n_fid = set()
        for meta, rows in logs:
            if meta["task"] != task or not rows:
                continue
            ep = np.array([r["epoch"] for r in rows])
            name = display_name(meta["model"], task, meta.get("config"))
            line, = ax_l.plot(ep, [r.get("train_loss", np.nan) for r in rows], "-o", ms=3, label=name)
            ax_l.plot(ep, [r.get("val_loss", np.nan) for r in rows], "--", color=line.get_color())
            mean = np.array([r.get(key, np.nan) for r in rows])
            lo = np.array([r.get(key + "_lo", np.nan) for r in rows])
            hi = np.array([r.get(key + "_hi", np.nan) for r in rows])
            ax_f.plot(ep, mean, "-o", ms=3, color=line.get_color(), label=name)
            ax_f.fill_between(ep, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
            n_fid |= {int(r.get("n_fidelity", 0)) for r in rows}
        drawn: set[tuple[str, ...]] = set()
        for (meta, _), run in zip(logs, runs, strict=True):
            ids, refs = read_references(run)
            if meta["task"] != task or not refs or ids in drawn:
                continue
            drawn.add(ids)
            for k, (name, vals) in enumerate(refs.items()):
                ax_f.axhline(vals.get(key, np.nan), color="0.4", lw=1, ls=(0, (1 + k, 2)),
                             label=f"{REFERENCE_LABELS.get(name, name)} (same rows)")
        ax_l.set(title=f"task {'1' if task == 'forward' else '2'} ({task})", xlabel="epoch",
                 ylabel="loss (solid train, dashed val)")
        ax_l.set_yscale("log")
        per = "/".join(str(n) for n in sorted(n_fid))
        ax_f.set(title=f"{label}; {per} samples per point, band = 95 % CI", xlabel="epoch", ylabel=label)
        ax_l.legend(fontsize=8)
        ax_f.legend(fontsize=8)
    fig.tight_layout()
    return fig


def write_diagnostic(runs: Sequence[str | Path], out_dir: str | Path, *,
                     name: str = "model_diagnostic") -> list[Path]:
    """Write ``{name}.png``, ``{name}.md`` and ``{name}.csv`` into ``out_dir``; returns the paths."""
    if not runs:
        raise C2NPInputError("no run folders given")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    logs = [read_run_log(r) for r in runs]
    png = out / f"{name}.png"
    fig = _figure(logs, runs)
    with atomic_write(png, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)

    table = loss_fidelity_table(runs)

    def fmt(v: object) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    n_fid = sorted({int(r["n_fidelity"]) for r in table})  # type: ignore[call-overload]
    md = [f"Fidelity per epoch: the evaluation harness on {'/'.join(map(str, n_fid))} validation samples "
          "per point (failure-penalised mean, 95 % bootstrap interval); best = the checkpoint `predict` "
          "uses by default. Reference rows: the baselines scored on the same validation rows.", "",
          "| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    md += ["| " + " | ".join(fmt(r[c]) for c in TABLE_COLUMNS) + " |" for r in table]
    md_path = out / f"{name}.md"
    with atomic_write(md_path) as fh:
        fh.write("\n".join(md) + "\n")
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=TABLE_COLUMNS)
    w.writeheader()
    for r in table:
        w.writerow({c: fmt(r[c]) for c in TABLE_COLUMNS})
    csv_path = out / f"{name}.csv"
    with atomic_write(csv_path) as fh:
        fh.write(buf.getvalue())
    return [png, md_path, csv_path]
