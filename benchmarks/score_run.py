"""Score trained task-1 runs through the harness beside the three reference baselines, on
the same rows, and draw per-radius plots.

Rows: for every ``--store``, the harness's seeded ``eval`` rotations (``--per-group`` of them
per material and R; the harness's own subset has 8) of the ID and OOD splits. For each store
and split: ``c2np.models.training.predict`` samples every ``--run`` (its best checkpoint) and
writes the predictions file; ``c2np.tasks.ForwardTask(store, split, 'eval',
per_group=k).evaluate`` scores it (the code of ``c2np evaluate``: metrics, failure rule, 95 %
percentile bootstrap); the analytic carve, memorisation and the random ball
(``c2np.baselines``, fitted on the task's training examples of that store) answer the same
queries.

    python benchmarks/score_run.py --store c2np_out/score12/store_main.h5 \\
        --store c2np_out/score12/store_large.h5 --run pretrained/diffcsp-forward \\
        --run pretrained/cdvae-forward --run pretrained/flowmm-forward --per-group 1 \\
        --steps 100 --steps-for diffcsp=50 --allow-other-store --reuse \\
        --out c2np_out/score12 --plot docs/forward_per_radius.png

On a shared machine the wall-clock rate says little; the CPU seconds of the sampling
process (one thread) give the rate of an idle thread and are reported beside it.
``--reuse`` keeps a predictions file already in OUT whose provenance (run folder and the
SHA-256 of its config and weights, steps, rows)
matches, so the runs can be sampled one command at a time (small pieces on a shared
machine) and scored together at the end. Writes ``OUT/score.json`` and ``OUT/score.md``: per store a
table (mean [95 % CI] per metric and split, n / failed), sampling particles/s and atoms/s of
every run, the relative F1@0.5 drop from ID to OOD with a 95 % bootstrap interval, and
(``--plot``) F1@0.5 and matched RMSD against R, one line per model, 95 % CI bands.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

METRICS = ("f1@0.5", "f1@0.1", "chamfer", "matched_rmsd", "count_error")
PLOT_METRICS = (("f1@0.5", "F1@0.5"), ("matched_rmsd", "matched RMSD (Å)"))
REFERENCE = {"analytic-carve": "analytic carve (ceiling)", "memorisation": "memorisation (nearest train R)",
             "random-ball": "random ball (floor)"}


def _summary(res: Any) -> dict[str, Any]:
    """Overall and per-radius mean / 95 % CI of METRICS, counts and the per-sample F1@0.5."""
    met = res.data["metrics"]
    return {"n": int(res.data["n_samples"]), "n_failed": int(res.n_failed),
            **{m: {"mean": met["overall"][m]["mean"], "ci95": met["overall"][m]["ci95"]} for m in METRICS},
            "per_radius": {r: {m: {"mean": g[m]["mean"], "ci95": g[m]["ci95"], "n": g[m]["n"]} for m in METRICS}
                           for r, g in met["per_radius"].items()},
            "samples_f1@0.5": list(res.data["samples"]["f1@0.5"])}


def _cell(rec: dict[str, Any], m: str) -> str:
    lo, hi = rec[m]["ci95"]
    return f"{rec[m]['mean']:.3g} [{lo:.3g}, {hi:.3g}]"


def relative_drop(id_values: np.ndarray, ood_values: np.ndarray, *, rng: np.random.Generator,
                  n_resamples: int = 1000) -> dict[str, Any]:
    """Relative F1 drop ``1 - mean(ood) / mean(id)`` of two independent samples of per-sample
    scores, with a 95 % percentile bootstrap interval (each split resampled on its own)."""
    a, b = np.asarray(id_values, dtype=np.float64), np.asarray(ood_values, dtype=np.float64)
    point = 1.0 - b.mean() / a.mean() if a.mean() > 0 else float("nan")
    ma = a[rng.integers(0, len(a), size=(n_resamples, len(a)))].mean(axis=1)
    mb = b[rng.integers(0, len(b), size=(n_resamples, len(b)))].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        draws = 1.0 - mb / ma
    lo, hi = np.nanquantile(draws, [0.025, 0.975])
    return {"drop": float(point), "ci95": [float(lo), float(hi)], "n_id": len(a), "n_ood": len(b)}


def per_radius_figure(results: dict[str, dict[str, Any]], labels: dict[str, str], *,
                      train_radii_angstrom: tuple[float, ...] = ()) -> Any:
    """Figure: one panel per PLOT_METRICS, the metric against R (Å) with a line per model and
    its 95 % CI band, dotted verticals at the ``train_radii_angstrom`` the runs were trained on.
    ``results``: model -> {"per_radius": {R: {metric: {mean, ci95}}}}."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    axes = fig.subplots(1, len(PLOT_METRICS))
    for ax, (metric, title) in zip(axes, PLOT_METRICS):
        for name, rec in results.items():
            radii = sorted(rec["per_radius"], key=float)
            x = np.array([float(r) for r in radii])
            mean = np.array([rec["per_radius"][r][metric]["mean"] for r in radii])
            lo = np.array([rec["per_radius"][r][metric]["ci95"][0] for r in radii])
            hi = np.array([rec["per_radius"][r][metric]["ci95"][1] for r in radii])
            (line,) = ax.plot(x, mean, marker="o", ms=3, label=labels.get(name, name))
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
        for i, r in enumerate(train_radii_angstrom):
            ax.axvline(r, color="0.6", ls=":", lw=1, zorder=0, label="train radius" if i == 0 else None)
        ax.set_xlabel("R (Å)")
        ax.set_ylabel(title)
        if metric == "matched_rmsd":
            ax.set_yscale("symlog", linthresh=1e-2)
            ax.set_ylim(bottom=0.0)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, loc="lower left")
    return fig


def _merge_per_radius(per_store: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """model -> {"per_radius": ...} over every store and split (radii do not overlap)."""
    out: dict[str, dict[str, Any]] = {}
    for by_model in per_store.values():
        for name, by_split in by_model.items():
            pr = out.setdefault(name, {"per_radius": {}})["per_radius"]
            for rec in by_split.values():
                pr.update(rec["per_radius"])
    return out


def _run_digest(run: str) -> str:
    """SHA-256 over the run folder's config and weights (names and bytes): a predictions
    file sampled with another sampler setting or other weights is never reused."""
    h = hashlib.sha256()
    files = [Path(run) / "config.json", *sorted((Path(run) / "best").glob("*"))]
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(run)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _predict_cached(run: str, store: Any, split: str, pred: Path, *, per_group: int, steps: int | None,
                    allow_other_store: bool, reuse: bool) -> dict[str, Any]:
    """Sample ``run`` on ``split`` into ``pred`` (or keep a matching one, ``reuse``); returns
    the provenance summary with ``seconds`` of sampling."""
    from c2np.models.training import predict

    timing = pred.with_suffix(".timing.json")
    want = {"run": str(Path(run).resolve()), "run_files": _run_digest(run), "steps": steps,
            "per_group": per_group, "fingerprint": store.fingerprint, "split": split}
    if reuse and pred.is_file() and timing.is_file():
        rec = json.loads(timing.read_text())
        if rec.get("key") == want:
            return dict(rec["summary"], seconds=rec["seconds"], cpu_seconds=rec.get("cpu_seconds"))
    t0, c0 = time.perf_counter(), time.process_time()
    summ = predict(run, store, split, pred, per_group=per_group, steps=steps, progress=False,
                   allow_other_store=allow_other_store)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    timing.write_text(json.dumps({"key": want, "seconds": dt, "cpu_seconds": cpu, "summary": summ},
                                 indent=1, default=str))
    return dict(summ, seconds=dt, cpu_seconds=cpu)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True, action="append", help="dataset store (.h5); repeatable")
    ap.add_argument("--run", required=True, action="append", metavar="[LABEL=]FOLDER",
                    help="run folder (c2np train), optionally labelled (default label: its model); repeatable")
    ap.add_argument("--splits", default="id,ood")
    ap.add_argument("--per-group", type=int, default=1, help="eval rotations per (material, R)")
    ap.add_argument("--steps", type=int, default=None, help="sampling steps (default: each run's config)")
    ap.add_argument("--steps-for", action="append", default=[], metavar="MODEL=N",
                    help="sampling steps of one run (by label), overriding --steps (repeatable)")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--allow-other-store", action="store_true",
                    help="score on a store other than the run's (e.g. a subset of its materials; recorded)")
    ap.add_argument("--reuse", action="store_true", help="keep matching predictions already in OUT")
    ap.add_argument("--plot", default=None, help="PNG of F1@0.5 and matched RMSD against R")
    ap.add_argument("--train-radii", type=float, nargs="*", default=[8.0, 9.0, 12.0],
                    help="radii the runs were trained on (dotted lines in the plot)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the ID/OOD drop bootstrap")
    args = ap.parse_args()

    import torch

    from c2np.baselines import FORWARD_BASELINES
    from c2np.baselines import predict as baseline_predict
    from c2np.errors import C2NPInputError
    from c2np.predictions import iter_forward_predictions
    from c2np.store import DatasetStore
    from c2np.tasks import ForwardTask

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    splits = args.splits.split(",")
    steps_for = {k: int(v) for k, v in (s.split("=", 1) for s in args.steps_for)}
    runs: dict[str, str] = {}
    for spec in args.run:
        label, sep, folder = spec.partition("=")
        if not sep:
            folder = spec
            label = json.loads((Path(folder) / "config.json").read_text())["model"]
        if label in runs:
            ap.error(f"--run {spec}: label {label!r} given twice (write LABEL=FOLDER)")
        runs[label] = folder
    per_store: dict[str, dict[str, Any]] = {}
    for store_path in args.store:
        store = DatasetStore.open(store_path)
        label = Path(store_path).stem
        sdir = out / label
        sdir.mkdir(parents=True, exist_ok=True)
        results: dict[str, Any] = per_store.setdefault(label, {})
        for split in splits:
            if not np.any(store.recipes.mask(split)):
                print(f"{label}: no {split} rows, skipped", flush=True)
                continue
            task = ForwardTask(store, split, "eval", per_group=args.per_group)
            for name, fit in FORWARD_BASELINES.items():
                model = fit(task)

                def answer(q: Any, model: Any = model) -> Any:
                    try:
                        return model(q)
                    except C2NPInputError:  # no answer: scored as a failure
                        return None
                res = task.evaluate(baseline_predict(task, answer), model=name)
                results.setdefault(name, {})[split] = _summary(res)
            for model_name, run in runs.items():
                pred = sdir / f"pred_{model_name}_{split}.extxyz"
                steps = steps_for.get(model_name, args.steps)
                summ = _predict_cached(run, store, split, pred, per_group=args.per_group, steps=steps,
                                       allow_other_store=args.allow_other_store, reuse=args.reuse)
                res = task.evaluate(pred, model=model_name)
                n_atoms = sum(len(z) for _, _, z, _ in iter_forward_predictions(pred))
                dt, cpu = float(summ["seconds"]), summ.get("cpu_seconds")
                results.setdefault(model_name, {})[split] = {
                    **_summary(res), "seconds": dt, "cpu_seconds": cpu, "steps": steps, "n_atoms": n_atoms,
                    "n_particles": summ["n_samples"],
                    "particles_per_s": summ["n_samples"] / max(dt, 1e-9), "atoms_per_s": n_atoms / max(dt, 1e-9),
                    "particles_per_cpu_s": summ["n_samples"] / cpu if cpu else None,
                    "atoms_per_cpu_s": n_atoms / cpu if cpu else None,
                    "checkpoint": summ["checkpoint"], "store_check": summ["store_check"]}
                print(f"{label} {split}: {model_name} F1@0.5 {_cell(results[model_name][split], 'f1@0.5')} "
                      f"({summ['n_samples']} particles in {dt:.0f} s)", flush=True)
    rng = np.random.default_rng(args.seed)
    drops: dict[str, dict[str, Any]] = {}
    lines: list[str] = []
    for label, results in per_store.items():
        have = [s for s in splits if s in results[next(iter(runs))]]
        radii = sorted({int(r) for s in have for r in results[next(iter(runs))][s]["per_radius"]})
        lines += [f"### {label} (per-group {args.per_group}; R = {', '.join(map(str, radii))} Å)", "",
                  "| model | " + " | ".join(f"{m} {s}" for s in have for m in METRICS) + " | n / failed |",
                  "|" + "---|" * (2 + len(have) * len(METRICS))]
        for name in [*FORWARD_BASELINES, *runs]:
            lab = REFERENCE.get(name, f"{name} (learned generator)")
            cells = [_cell(results[name][s], m) for s in have for m in METRICS]
            nf = " / ".join(f"{results[name][s]['n']}/{results[name][s]['n_failed']}" for s in have)
            lines.append(f"| {lab} | " + " | ".join(cells) + f" | {nf} |")
        lines.append("")
        for name in runs:
            for s in have:
                r = results[name][s]
                cpu = (f"; per CPU-second of the process: {r['particles_per_cpu_s']:.3g} particles/s, "
                       f"{r['atoms_per_cpu_s']:.3g} atoms/s ({r['cpu_seconds']:.0f} CPU s)"
                       if r.get("cpu_seconds") else "; CPU time not recorded")
                lines.append(f"- {name} sampling, {s}: {r['n_particles']} particles, {r['n_atoms']} atoms, "
                             f"{r['steps']} steps, {args.threads} thread(s): wall {r['particles_per_s']:.3g} "
                             f"particles/s, {r['atoms_per_s']:.3g} atoms/s ({r['seconds']:.0f} s){cpu}")
        if "id" in have and "ood" in have:
            lines += ["", "Relative F1@0.5 drop 1 - OOD/ID (95 % bootstrap CI):", ""]
            for name in [*FORWARD_BASELINES, *runs]:
                d = relative_drop(np.array(results[name]["id"]["samples_f1@0.5"]),
                                  np.array(results[name]["ood"]["samples_f1@0.5"]), rng=rng)
                drops.setdefault(label, {})[name] = d
                lines.append(f"- {REFERENCE.get(name, name)}: {d['drop']:+.3f} [{d['ci95'][0]:+.3f}, "
                             f"{d['ci95'][1]:+.3f}]")
        lines.append("")
    text = "\n".join(lines)
    (out / "score.md").write_text(text + "\n")
    (out / "score.json").write_text(json.dumps({"runs": runs, "stores": args.store, "per_group": args.per_group,
                                                "steps": args.steps, "steps_for": steps_for,
                                                "results": per_store,
                                                "relative_drop_f1@0.5": drops}, indent=1))
    if args.plot:
        labels = {**REFERENCE, **{n: f"{n} (site-assignment)" for n in runs}}
        fig = per_radius_figure(_merge_per_radius(per_store), labels, train_radii_angstrom=tuple(args.train_radii))
        fig.savefig(args.plot, dpi=120)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
