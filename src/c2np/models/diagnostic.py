"""The paper's diagnostic: training loss next to geometric fidelity, per model.

Reads run folders (``config.json`` + ``log.csv``) and writes a plot (a matplotlib Figure, PNG) with,
per task, the training/validation loss per epoch beside the fidelity per epoch (task 1: atom
F1 at 0.5 Å of sampled validation particles; task 2: validation lattice RMSE), and a table
(Markdown + CSV) with the final values and the rank correlation between loss and fidelity
over epochs (does a lower loss mean a better particle?).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from c2np.errors import C2NPInputError
from c2np.fileio import atomic_path, atomic_write

__all__ = ["read_run_log", "write_diagnostic", "loss_fidelity_table"]

FIDELITY = {"forward": ("fidelity_f1_0p5", "atom F1 @ 0.5 Å (val samples)"),
            "inverse": ("val_lattice_rmse", "lattice RMSE (val)")}


def read_run_log(run_dir: str | Path) -> tuple[dict, list[dict[str, float]]]:
    """(run metadata, log rows) of a run folder."""
    run = Path(run_dir)
    meta_path, log_path = run / "config.json", run / "log.csv"
    if not meta_path.is_file() or not log_path.is_file():
        raise C2NPInputError(f"{run}: not a trained run folder (needs config.json and log.csv)")
    meta = json.loads(meta_path.read_text())
    with open(log_path, newline="") as fh:
        rows = [{k: float(v) for k, v in r.items() if v not in ("", None)} for r in csv.DictReader(fh)]
    return meta, rows


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


def loss_fidelity_table(runs: Sequence[str | Path]) -> list[dict[str, object]]:
    """One row per run: model, task, epochs, final losses, fidelity (final and best) and the
    Spearman correlation of validation loss with fidelity over epochs."""
    out = []
    for r in runs:
        meta, rows = read_run_log(r)
        if not rows:
            continue
        key, _ = FIDELITY[meta["task"]]
        fid = np.array([row.get(key, np.nan) for row in rows])
        val = np.array([row.get("val_loss", np.nan) for row in rows])
        last = rows[-1]
        rec: dict[str, object] = {"model": meta["model"], "task": meta["task"], "config": meta["config"]["name"],
                                  "epochs": int(last["epoch"]), "steps": int(last["step"]),
                                  "train_loss": last.get("train_loss", np.nan),
                                  "val_loss": last.get("val_loss", np.nan),
                                  "fidelity_metric": key, "fidelity": last.get(key, np.nan),
                                  "best_fidelity": float(np.nanmax(fid) if meta["task"] == "forward"
                                                         else np.nanmin(fid)) if np.any(np.isfinite(fid)) else np.nan,
                                  "spearman_val_loss_vs_fidelity": _spearman(val, fid)}
        out.append(rec)
    return out


def write_diagnostic(runs: Sequence[str | Path], out_dir: str | Path, *,
                     name: str = "model_diagnostic") -> list[Path]:
    """Write ``{name}.png``, ``{name}.md`` and ``{name}.csv`` into ``out_dir``; returns the paths."""
    from matplotlib.figure import Figure

    if not runs:
        raise C2NPInputError("no run folders given")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    logs = [read_run_log(r) for r in runs]
    tasks = [t for t in ("forward", "inverse") if any(m["task"] == t for m, _ in logs)]
    fig = Figure(figsize=(11, 4 * len(tasks)))
    axes = fig.subplots(len(tasks), 2, squeeze=False)
    for i, task in enumerate(tasks):
        key, label = FIDELITY[task]
        ax_l, ax_f = axes[i]
        for meta, rows in logs:
            if meta["task"] != task or not rows:
                continue
            ep = [r["epoch"] for r in rows]
            line, = ax_l.plot(ep, [r.get("train_loss", np.nan) for r in rows], "-o", ms=3, label=meta["model"])
            ax_l.plot(ep, [r.get("val_loss", np.nan) for r in rows], "--", color=line.get_color())
            ax_f.plot(ep, [r.get(key, np.nan) for r in rows], "-o", ms=3, color=line.get_color(),
                      label=meta["model"])
        ax_l.set(title=f"task 1 ({task})" if task == "forward" else f"task 2 ({task})",
                 xlabel="epoch", ylabel="loss (solid train, dashed val)")
        ax_l.set_yscale("log")
        ax_f.set(title=label, xlabel="epoch", ylabel=label)
        ax_l.legend(fontsize=8)
        ax_f.legend(fontsize=8)
    fig.tight_layout()
    png = out / f"{name}.png"
    with atomic_path(png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")

    table = loss_fidelity_table(runs)
    cols = ["model", "task", "config", "epochs", "steps", "train_loss", "val_loss", "fidelity_metric",
            "fidelity", "best_fidelity", "spearman_val_loss_vs_fidelity"]
    fmt = (lambda v: f"{v:.4g}" if isinstance(v, float) else str(v))
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join(fmt(r[c]) for c in cols) + " |" for r in table]
    md_path = out / f"{name}.md"
    with atomic_write(md_path) as fh:
        fh.write("\n".join(md) + "\n")
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    for r in table:
        w.writerow({c: fmt(r[c]) for c in cols})
    csv_path = out / f"{name}.csv"
    with atomic_write(csv_path) as fh:
        fh.write(buf.getvalue())
    return [png, md_path, csv_path]
