"""Train all six learned model families for both tasks and compare them, side by side, with
the reference baselines (task 1: analytic carve = ceiling, random ball = floor; task 2:
majority class, composition lookup) on ID and OOD radii.

Writes into ``--docs`` (default ``docs/``):
  model_results.md / .json  per model and task: ID / OOD scores, training throughput
                            (samples/s), sampling throughput (samples/s) on the evaluated
                            splits, and seconds per R = 30 Å particle (task 1) — the largest
                            particles of the benchmark (~9,000 atoms);
  model_diagnostic.png/.md  training loss next to geometric fidelity per epoch.

Scores use the built-in scorers of ``c2np.models.scoring`` (atom F1 at 0.5 and 0.1 Å with
maximum bipartite matching, Chamfer, count error; lattice RMSE over the six numbers and
space-group accuracy) on the ``eval`` subset (``eval_per_group`` rotations per material and R).

    python benchmarks/train_models.py --quick          # a few minutes on 2 cores
    python benchmarks/train_models.py                  # `small` config (see docs/models.md)
    python benchmarks/train_models.py --config paper --radii all --cells CATALOG   # GPU-sized

Data: ``--cells`` (CIF folder or zip) or, by default, the four synthetic ABH3 cells of
``c2np.models.data.demo_cells``; radii 6,7 (OOD), 8,9,12 (train/val), 10,11 (ID) by default.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def _score_forward(store, pred_path: Path) -> dict[str, float]:
    from c2np.models.scoring import atom_f1, chamfer_angstrom, count_error
    from c2np.particle_io import read_frames

    frames = read_frames(pred_path)
    rows = store.rows_for_ids([info["sample_id"] for _, info in frames])
    f05, f01, ch, ce = [], [], [], []
    for (p, _), r in zip(frames, rows):
        ref = store.particle(int(r))
        f05.append(atom_f1(p, ref, tol_angstrom=0.5))
        f01.append(atom_f1(p, ref, tol_angstrom=0.1))
        ch.append(chamfer_angstrom(p, ref))
        ce.append(count_error(p, ref))
    return {"f1_0p5": float(np.mean(f05)), "f1_0p1": float(np.mean(f01)),
            "chamfer_angstrom": float(np.mean(ch)), "count_error": float(np.mean(ce)), "n": len(rows)}


def _score_inverse(store, rows, lat: np.ndarray, sg: np.ndarray) -> dict[str, float]:
    from c2np.models.data import lattice_target
    from c2np.models.scoring import lattice_errors

    rec = store.recipes
    tg = [lattice_target(store.cells[rec.materials[rec.material_index[r]]]) for r in rows]
    return lattice_errors(lat, np.stack([t[0] for t in tg]), sg, np.array([t[1] for t in tg]))


def _read_csv_preds(store, path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import csv

    with open(path, newline="") as fh:
        recs = list(csv.DictReader(fh))
    rows = store.rows_for_ids([r["sample_id"] for r in recs])
    lat = np.array([[float(r[k]) for k in ("a", "b", "c", "alpha", "beta", "gamma")] for r in recs])
    return rows, lat, np.array([int(r["spacegroup"]) for r in recs])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="reduced run to check the pipeline (minutes)")
    ap.add_argument("--config", default="small", help="tiny | small | paper (default small)")
    ap.add_argument("--cells", default=None, help="CIF folder or zip (default: synthetic demo cells)")
    ap.add_argument("--radii", default="6,7,8,9,10,11,12", help="comma list or 'all'")
    ap.add_argument("--models", default="cdvae,diffcsp,flowmm,mattergen,adit,sitescore")
    ap.add_argument("--tasks", default="forward,inverse")
    ap.add_argument("--docs", default=str(Path(__file__).resolve().parents[1] / "docs"))
    ap.add_argument("--runs", default=None, help="run folders (default: a temp dir)")
    ap.add_argument("--large-radius", type=float, default=30.0, help="R (Å) of the large-particle timing")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config field, e.g. --set epochs=4 --set max_train_radius_angstrom=9")
    args = ap.parse_args()

    import torch

    from c2np.baselines import CompositionLookup, MajorityClass, analytic_carve, random_ball
    from c2np.carving import carve
    from c2np.models.config import get_config
    from c2np.models.scoring import atom_f1
    from c2np.tasks import ForwardTask, InverseTask, opaque_sample_id
    from c2np.tasks import select_rows as eval_rows
    from c2np.models.data import Condition, demo_cells
    from c2np.models.diagnostic import write_diagnostic
    from c2np.models.training import load_run, predict, train
    from c2np.particle_io import write_extxyz
    from c2np.store import DatasetStore, build_store

    torch.set_num_threads(args.threads)
    cfg = get_config("tiny" if args.quick and args.config == "small" else args.config)
    if args.quick:
        cfg = replace(cfg, epochs=3, steps_per_epoch=15, max_train_radius_angstrom=9.0, sample_steps=20,
                      langevin_levels=10, eval_per_group=1, n_val=4, n_fidelity=1)
    for item in args.set:
        key, _, value = item.partition("=")
        if key not in cfg.to_dict():
            raise SystemExit(f"--set: unknown config field {key!r}")
        old = cfg.to_dict()[key]
        cast = (type(old) if old is not None else float)
        cfg = replace(cfg, **{key: None if value == "None" else cast(value)})
    if args.cells:
        from c2np.cells import read_cells

        cells = read_cells(args.cells)
    else:
        cells = demo_cells()
    radii = None if args.radii == "all" else [int(x) for x in args.radii.split(",")]
    work = Path(args.runs) if args.runs else Path(tempfile.mkdtemp(prefix="c2np-models-"))
    work.mkdir(parents=True, exist_ok=True)
    store_path = work / "store.h5"
    if not store_path.is_file():
        build_store(cells, store_path, radii_angstrom=radii, progress=False)
    store = DatasetStore.open(store_path)
    splits = [s for s in ("id", "ood") if np.any(store.recipes.mask(s))]
    models = args.models.split(",")
    tasks = args.tasks.split(",")
    print(f"config {cfg.name}{' (quick)' if args.quick else ''}: {len(cells)} materials, radii {radii}, "
          f"splits {splits}, runs in {work}", flush=True)

    results: list[dict] = []
    t_all = time.perf_counter()
    # reference baselines
    for split in splits:
        rows = eval_rows(store.recipes, split, "eval", per_group=cfg.eval_per_group)
        wanted = {store.recipes.sample_id(int(r)): k for k, r in enumerate(rows)}
        q = [x for x in ForwardTask(store, split, "full").queries() if x.sample_id in wanted]
        for name, fn in (("analytic carve (ceiling)", analytic_carve), ("random ball (floor)", random_ball)):
            if "forward" not in tasks:
                break
            t0 = time.perf_counter()
            preds = {x.sample_id: fn(x) for x in q}
            dt = time.perf_counter() - t0
            path = work / f"baseline_{fn.__name__}_{split}.extxyz"
            write_extxyz(path, [(preds[x.sample_id], {"sample_id": x.sample_id}) for x in q])
            results.append({"model": name, "task": "forward", "split": split, **_score_forward(store, path),
                            "sample_per_s": len(q) / max(dt, 1e-9)})
        if "inverse" in tasks:
            inv = InverseTask(store, split, "full")
            opaque = {opaque_sample_id(store.fingerprint, sid): k for sid, k in wanted.items()}
            inv_queries = [(opaque[x.sample_id], x) for x in inv.queries() if x.sample_id in opaque]
            for name, fit in (("majority class", MajorityClass.fit), ("composition lookup", CompositionLookup.fit)):
                model = fit(inv)
                preds_inv = {k: model(x) for k, x in inv_queries}
                lat = np.array([preds_inv[k].parameters.as_array() for k in range(len(rows))])
                results.append({"model": name, "task": "inverse", "split": split,
                                **_score_inverse(store, rows, lat,
                                                 np.array([preds_inv[k].spacegroup for k in range(len(rows))]))})

    runs = []
    for task in tasks:
        for model in models:
            run = work / f"{model}_{task}"
            t0 = time.perf_counter()
            if (run / "checkpoint" / "state.json").is_file():
                res = train(store, model, task, cfg, run, resume=True, progress=False)
            else:
                res = train(store, model, task, cfg, run, progress=False)
            train_s = time.perf_counter() - t0
            runs.append(run)
            train_sps = float(np.mean([r["train_samples_per_s"] for r in res.log]))
            print(f"{model}/{task}: trained {res.step} steps in {train_s:.1f} s "
                  f"({train_sps:.2f} samples/s), last val loss {res.log[-1]['val_loss']:.4g}", flush=True)
            for split in splits:
                ext = "extxyz" if task == "forward" else "csv"
                out = work / f"pred_{model}_{task}_{split}.{ext}"
                summ = predict(run, store, split, out, progress=False, per_group=cfg.eval_per_group)
                if task == "forward":
                    sc = _score_forward(store, out)
                else:
                    sc = _score_inverse(store, *_read_csv_preds(store, out))
                results.append({"model": model, "task": task, "split": split, **sc,
                                "train_samples_per_s": train_sps, "train_s": train_s,
                                "sample_per_s": summ["samples_per_s"]})
                print(f"  {split}: " + ", ".join(f"{k} {v:.4g}" for k, v in sc.items() if k != "n"), flush=True)
            if task == "forward":
                net, _ = load_run(run)
                cell = store.cells[store.recipes.materials[0]]
                cond = Condition(cell, args.large_radius, np.array([0.0, 0.0, 0.0, 1.0]))
                t0 = time.perf_counter()
                big = net.sample([cond], torch.Generator().manual_seed(0))[0]
                dt = time.perf_counter() - t0
                ref = carve(cell, args.large_radius).particle
                f1 = atom_f1(big, ref, tol_angstrom=0.5)
                results.append({"model": model, "task": "forward", "split": f"R={args.large_radius:g}",
                                "large_s_per_sample": dt, "large_n_atoms": big.n_atoms,
                                "large_ref_n_atoms": ref.n_atoms, "large_f1_0p5": f1})
                print(f"  R={args.large_radius:g} Å: {big.n_atoms} atoms (carve: {ref.n_atoms}) in {dt:.1f} s, "
                      f"F1@0.5 {f1:.3g}", flush=True)

    docs = Path(args.docs)
    docs.mkdir(parents=True, exist_ok=True)
    write_diagnostic(runs, docs)
    meta = {"config": cfg.to_dict(), "quick": args.quick, "materials": [c.material_id for c in cells],
            "radii": radii, "threads": args.threads, "total_s": time.perf_counter() - t_all,
            "torch": torch.__version__, "scorer": "c2np.models.scoring (built-in)"}
    (docs / "model_results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    (docs / "model_results.md").write_text(_markdown(results, meta))
    print(_markdown(results, meta))


def _markdown(results: list[dict], meta: dict) -> str:
    f = (lambda v: "" if v is None else (f"{v:.3g}" if isinstance(v, float) else str(v)))
    c = meta["config"]
    lines = [f"Config `{c['name']}`{' (--quick)' if meta['quick'] else ''} (hidden {c['hidden']}, "
             f"{c['layers']} layers, {c['epochs']} x {c['steps_per_epoch']} steps of batch {c['batch_size']}, "
             f"train R <= {c['max_train_radius_angstrom']} Å, {c['sample_steps']} sampling steps, "
             f"{c['eval_per_group']} rotation(s) per material and R evaluated), materials "
             f"{', '.join(meta['materials'])}, radii {meta['radii']}, {meta['threads']} threads, "
             f"total {meta['total_s'] / 60:.1f} min, torch {meta['torch']}; scorer {meta['scorer']}.", ""]
    by = {(r["model"], r["task"], r["split"]): r for r in results}
    names = list(dict.fromkeys(r["model"] for r in results))
    lines += ["### Task 1 (forward): cell + R + rotation -> particle", "",
              "| model | F1@0.5 ID | F1@0.1 ID | Chamfer ID (Å) | count err ID | F1@0.5 OOD | F1@0.1 OOD | "
              "Chamfer OOD (Å) | count err OOD | train samples/s | sampling samples/s (ID) | s per R=30 particle | "
              "F1@0.5 at R=30 (atoms / carve) |",
              "|" + "---|" * 13]
    for m in names:
        i, o = by.get((m, "forward", "id"), {}), by.get((m, "forward", "ood"), {})
        if not i and not o:
            continue
        big = next((r for r in results if r["model"] == m and r["split"].startswith("R=")), {})
        lines.append("| " + " | ".join([m, f(i.get("f1_0p5")), f(i.get("f1_0p1")), f(i.get("chamfer_angstrom")),
                                         f(i.get("count_error")), f(o.get("f1_0p5")), f(o.get("f1_0p1")),
                                         f(o.get("chamfer_angstrom")), f(o.get("count_error")),
                                         f(i.get("train_samples_per_s")), f(i.get("sample_per_s")),
                                         f(big.get("large_s_per_sample")),
                                         f"{f(big.get('large_f1_0p5'))} ({big.get('large_n_atoms', '')} / "
                                         f"{big.get('large_ref_n_atoms', '')})" if big else ""]) + " |")
    lines += ["", "### Task 2 (inverse): particle -> lattice + space group", "",
              "| model | lattice RMSE ID | SG acc ID | lattice RMSE OOD | SG acc OOD | train samples/s | "
              "prediction samples/s (ID) |", "|" + "---|" * 7]
    for m in names:
        i, o = by.get((m, "inverse", "id"), {}), by.get((m, "inverse", "ood"), {})
        if not i and not o:
            continue
        lines.append("| " + " | ".join([m, f(i.get("lattice_rmse")), f(i.get("sg_accuracy")),
                                         f(o.get("lattice_rmse")), f(o.get("sg_accuracy")),
                                         f(i.get("train_samples_per_s")), f(i.get("sample_per_s"))]) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp(prefix="c2np-mpl-"))
    main()
