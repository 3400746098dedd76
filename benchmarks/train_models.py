"""Train the learned model families for both tasks and score them, beside the reference
baselines on exactly the same rows, through the evaluation harness (``c2np.evaluation``:
the metrics, failure rule and 95 % bootstrap intervals of ``c2np evaluate``).

Rows: the harness's ``eval`` subset (8 seeded rotations per material and R) of the ID and OOD
splits (and, under ``--protocol strict``, task 2 on the held-out materials). Baselines on the
same rows: task 1 the analytic carve (ceiling), nearest-training-sample memorisation and the
random ball (floor); task 2 the crystallographic solver, composition lookup (memorisation) and
the majority class. ``sitescore`` (task 1) carves the crystal and learns a threshold: it is
listed as carve-based, apart from the learned generators, and left out of every summary of
what learned generators achieve.

Writes into ``--docs`` (default ``docs/``):
  {name}.md / .json          the tables (mean [95 % CI] of every number), training and
                             sampling throughput, and the large-R sampling check;
  model_diagnostic.png/.md   training loss next to validation fidelity per epoch.

    python benchmarks/train_models.py --quick          # minutes: checks the pipeline
    python benchmarks/train_models.py                  # `small` config (see docs/models.md)
    python benchmarks/train_models.py --protocol strict --radii 6,7,8,9,10,11,12,13 \
        --set max_train_radius_angstrom=13 --name model_results_strict

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
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

FORWARD_METRICS = ("f1@0.5", "f1@0.1", "chamfer", "count_error")
INVERSE_METRICS = ("spacegroup_accuracy", "joint_accuracy_paper", "lattice_rmse_paper", "length_rmse")
FORWARD_REFERENCE = {"analytic-carve": "analytic carve (ceiling)", "memorisation": "memorisation (nearest train R)",
                     "random-ball": "random ball (floor)"}
INVERSE_REFERENCE = {"solver": "crystallographic solver", "composition-lookup": "composition lookup (memorisation)",
                     "majority-class": "majority class"}


def _summary(res: Any, metrics: tuple[str, ...]) -> dict[str, Any]:
    """Overall mean, 95 % CI and counts of ``metrics`` from a harness Results record."""
    ov = res.overall
    return {"n": int(res.data["n_samples"]), "n_failed": int(res.n_failed),
            **{m: {"mean": ov[m]["mean"], "ci95": ov[m]["ci95"]} for m in metrics}}


def _answer_or_none(model: Any) -> Any:
    """``model`` that answers None (a missing prediction, scored as a failure) where it has
    nothing to say (memorisation of a material without training samples, under strict)."""
    from c2np.errors import C2NPInputError

    def call(query: Any) -> Any:
        try:
            return model(query)
        except C2NPInputError:
            return None
    return call


def _large_radius_check(net: Any, model: str, cell: Any, train_radius: int, radius: int, n: int,
                        seed: int) -> dict[str, Any]:
    """Sample ``n`` particles at R = ``radius`` (the first ``n`` eval rotations of that radius)
    and score them with the harness beside the three task-1 baselines on the same rows."""
    import torch

    from c2np.baselines import FORWARD_BASELINES
    from c2np.evaluation.harness import score_forward
    from c2np.models.data import InMemoryDataset, condition_from_query
    from c2np.models.training import generator
    from c2np.splits import get_protocol
    from c2np.tasks import ForwardTask

    ds = InMemoryDataset([cell], "paper", radii_angstrom=sorted({train_radius, radius}))
    task = ForwardTask(ds, get_protocol("paper").radius_split(radius), "eval")
    queries = [q for q in task.queries() if round(q.radius_angstrom) == radius][:n]
    rows = np.array(sorted(ds.recipes.sample_ids().index(q.sample_id) for q in queries))
    rec = ds.recipes
    common = {"id_index": {rec.sample_id(int(r)): int(r) for r in rows}, "split": task.split,
              "subset": "large-R check", "subset_definition": {"first eval rotations": n}}
    t0 = time.perf_counter()
    g = generator(seed, net)
    with torch.no_grad():
        preds = {q.sample_id: net.sample([condition_from_query(q)], g)[0] for q in queries}
    dt = (time.perf_counter() - t0) / len(queries)
    out = {model: {**_summary(score_forward(ds, rows, preds, model=model, **common), FORWARD_METRICS),
                   "s_per_particle": dt, "n_atoms": [p.n_atoms for p in preds.values()]}}
    for name, fit in FORWARD_BASELINES.items():
        base = fit(task)
        out[name] = _summary(score_forward(ds, rows, {q.sample_id: base(q) for q in queries}, model=name,
                                           **common), FORWARD_METRICS)
    out["reference_n_atoms"] = [ds.particle(int(r)).n_atoms for r in rows]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="reduced run to check the pipeline (minutes)")
    ap.add_argument("--config", default="small", help="tiny | small | paper (default small)")
    ap.add_argument("--cells", default=None, help="CIF folder or zip (default: synthetic demo cells)")
    ap.add_argument("--protocol", default="paper", help="paper | strict")
    ap.add_argument("--radii", default="6,7,8,9,10,11,12", help="comma list or 'all'")
    ap.add_argument("--models", default="cdvae,diffcsp,flowmm,mattergen,adit,sitescore")
    ap.add_argument("--tasks", default="forward,inverse")
    ap.add_argument("--docs", default=str(Path(__file__).resolve().parents[1] / "docs"))
    ap.add_argument("--name", default="model_results", help="file stem of the tables in --docs")
    ap.add_argument("--runs", default=None, help="run folders (default: a temp dir)")
    ap.add_argument("--large-radius", type=int, default=30, help="R (Å) of the large-particle check")
    ap.add_argument("--large-samples", type=int, default=2, help="particles sampled at the large R")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config field, e.g. --set epochs=4 --set max_train_radius_angstrom=9")
    args = ap.parse_args()

    import torch

    from c2np.baselines import FORWARD_BASELINES, INVERSE_BASELINES
    from c2np.baselines import predict as baseline_predict
    from c2np.models import FORWARD_KIND
    from c2np.models.config import get_config, parse_overrides
    from c2np.models.data import demo_cells
    from c2np.models.diagnostic import write_diagnostic
    from c2np.models.training import load_run, predict, train
    from c2np.store import DatasetStore, build_store
    from c2np.tasks import ForwardTask, InverseTask

    torch.set_num_threads(args.threads)
    cfg = get_config("tiny" if args.quick and args.config == "small" else args.config)
    if args.quick:
        cfg = replace(cfg, epochs=3, steps_per_epoch=15, max_train_radius_angstrom=9.0, sample_steps=20,
                      langevin_levels=10, n_val=4, n_fidelity=8)
    cfg = replace(cfg, **parse_overrides(args.set))
    if args.cells:
        from c2np.cells import read_cells

        cells = read_cells(args.cells)
    else:
        cells = demo_cells()
    radii = None if args.radii == "all" else [int(x) for x in args.radii.split(",")]
    work = Path(args.runs) if args.runs else Path(tempfile.mkdtemp(prefix="c2np-models-"))
    work.mkdir(parents=True, exist_ok=True)
    store_path = work / f"store_{args.protocol}.h5"
    if not store_path.is_file():
        build_store(cells, store_path, protocol=args.protocol, radii_angstrom=radii, progress=False)
    store = DatasetStore.open(store_path)
    splits = [s for s in ("id", "ood") if np.any(store.recipes.mask(s))]
    inv_splits = splits + (["heldout"] if store.recipes.heldout_materials else [])
    models = args.models.split(",")
    tasks = args.tasks.split(",")
    print(f"config {cfg.name}{' (quick)' if args.quick else ''}: {len(cells)} materials, protocol "
          f"{args.protocol}, radii {radii}, splits {splits}, runs in {work}", flush=True)

    results: dict[str, Any] = {"forward": {}, "inverse": {}, "large": {}, "runs": {}}
    t_all = time.perf_counter()
    for split in splits if "forward" in tasks else []:
        ftask = ForwardTask(store, split, "eval")
        for name, fit in FORWARD_BASELINES.items():
            t0 = time.perf_counter()
            preds = baseline_predict(ftask, _answer_or_none(fit(ftask)))
            dt = time.perf_counter() - t0
            res = ftask.evaluate(preds, model=name)
            results["forward"].setdefault(name, {})[split] = {**_summary(res, FORWARD_METRICS),
                                                               "samples_per_s": len(ftask) / max(dt, 1e-9)}
    for split in inv_splits if "inverse" in tasks else []:
        itask = InverseTask(store, split, "eval")
        for name, fit in INVERSE_BASELINES.items():
            t0 = time.perf_counter()
            preds_inv = baseline_predict(itask, fit(itask))
            dt = time.perf_counter() - t0
            res = itask.evaluate(preds_inv, model=name)
            results["inverse"].setdefault(name, {})[split] = {**_summary(res, INVERSE_METRICS),
                                                               "samples_per_s": len(itask) / max(dt, 1e-9)}
    print("baselines scored", flush=True)

    runs = []
    for task in tasks:
        for model in models:
            run = work / f"{model}_{task}"
            t0 = time.perf_counter()
            resume = (run / "checkpoint" / "state.json").is_file()
            res_t = train(store, model, task, cfg, run, resume=resume, progress=False, device=args.device)
            train_s = time.perf_counter() - t0
            runs.append(run)
            train_sps = float(np.mean([r["train_samples_per_s"] for r in res_t.log]))
            results["runs"][f"{model}/{task}"] = {"train_s": train_s, "train_samples_per_s": train_sps,
                                                  "best": res_t.best, "data": res_t.data}
            print(f"{model}/{task}: {res_t.step} steps in {train_s:.1f} s ({train_sps:.2f} samples/s), best epoch "
                  f"{res_t.best['epoch']}", flush=True)
            metrics = FORWARD_METRICS if task == "forward" else INVERSE_METRICS
            for split in (splits if task == "forward" else inv_splits):
                ext = "extxyz" if task == "forward" else "csv"
                out = work / f"pred_{model}_{task}_{split}.{ext}"
                summ = predict(run, store, split, out, progress=False, device=args.device)
                task_cls = ForwardTask if task == "forward" else InverseTask
                res = task_cls(store, split, "eval").evaluate(out, model=model)
                results[task].setdefault(model, {})[split] = {**_summary(res, metrics),
                                                              "samples_per_s": summ["samples_per_s"],
                                                              "checkpoint_epoch": summ["checkpoint"]["epoch"]}
                m0 = metrics[0]
                print(f"  {split}: {m0} {res.overall[m0]['mean']:.3g} {res.overall[m0]['ci95']}", flush=True)
            if task == "forward" and args.large_samples > 0:
                net, _ = load_run(run, device=args.device)
                cell = store.cells[store.recipes.materials[0]]
                train_r = int(max(res_t.data["train_radii"]))
                results["large"][model] = _large_radius_check(net, model, cell, train_r, args.large_radius,
                                                              args.large_samples, seed=0)
                lg = results["large"][model][model]
                print(f"  R={args.large_radius}: F1@0.5 {lg['f1@0.5']['mean']:.3g} in {lg['s_per_particle']:.1f} "
                      f"s/particle", flush=True)

    docs = Path(args.docs)
    docs.mkdir(parents=True, exist_ok=True)
    if runs:
        write_diagnostic(runs, docs)
    meta = {"config": cfg.to_dict(), "quick": args.quick, "protocol": args.protocol,
            "materials": [c.material_id for c in cells], "heldout_materials": list(store.recipes.heldout_materials),
            "radii": radii, "threads": args.threads, "total_s": time.perf_counter() - t_all,
            "torch": torch.__version__, "fingerprint": store.fingerprint,
            "scorer": "c2np.tasks + c2np.evaluation (the harness of c2np evaluate), eval subset, "
                      "95 % percentile bootstrap",
            "large_radius": args.large_radius, "large_samples": args.large_samples,
            "large_material": store.recipes.materials[0], "forward_kind": FORWARD_KIND}
    (docs / f"{args.name}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    text = _markdown(results, meta, models)
    (docs / f"{args.name}.md").write_text(text)
    print(text)


# ------------------------------------------------------------------------------------------
def _ci(rec: dict[str, Any] | None, metric: str) -> str:
    if not rec or metric not in rec or rec[metric]["mean"] is None:
        return "–"
    m, (lo, hi) = rec[metric]["mean"], rec[metric]["ci95"]
    return f"{m:.3g} [{lo:.3g}, {hi:.3g}]"


def _g(v: Any) -> str:
    return "–" if v is None else f"{v:.3g}"


def _best_generator(results: dict[str, Any], models: list[str], split: str) -> tuple[str, dict] | None:
    from c2np.models import LEARNED_GENERATORS

    cand = [(m, results["forward"][m][split]) for m in models
            if m in LEARNED_GENERATORS and split in results["forward"].get(m, {})]
    return max(cand, key=lambda x: x[1]["f1@0.5"]["mean"]) if cand else None


def _markdown(results: dict[str, Any], meta: dict[str, Any], models: list[str]) -> str:
    from c2np.models import LEARNED_GENERATORS, display_name

    c = meta["config"]
    lines = [f"Config `{c['name']}`{' (--quick)' if meta['quick'] else ''} (hidden {c['hidden']}, "
             f"{c['layers']} layers, {c['epochs']} x {c['steps_per_epoch']} steps of batch {c['batch_size']}, EMA "
             f"{c['ema_decay']}, train R <= {c['max_train_radius_angstrom']} Å, {c['sample_steps']} sampling steps, "
             f"{c['n_fidelity']} validation samples per fidelity point), protocol `{meta['protocol']}`, materials "
             f"{', '.join(meta['materials'])}"
             + (f" (held out: {', '.join(meta['heldout_materials'])})" if meta["heldout_materials"] else "")
             + f", radii {meta['radii']}, {meta['threads']} thread(s), total {meta['total_s'] / 60:.1f} min, "
             f"torch {meta['torch']}. Scorer: {meta['scorer']}; every cell is mean [95 % CI] over the same "
             "rows for every model; predictions come from each run's best checkpoint (validation fidelity).", ""]
    splits = [s for s in ("id", "ood") if any(s in v for v in results["forward"].values())]
    if results["forward"]:
        hdr = [f"{m} {s.upper()}" for s in splits for m in ("F1@0.5", "F1@0.1", "Chamfer (Å)", "count err")]
        lines += ["### Task 1 (forward): cell + R + rotation -> particle", "",
                  "| model | kind | " + " | ".join(hdr) + " | n / failed | train samples/s | sampling samples/s |",
                  "|" + "---|" * (len(hdr) + 5)]
        groups = [("reference", list(FORWARD_REFERENCE)),
                  ("learned generator", [m for m in models if m in LEARNED_GENERATORS]),
                  ("carve-based (learned threshold)", [m for m in models if m not in LEARNED_GENERATORS])]
        for kind, names in groups:
            for m in names:
                rec = results["forward"].get(m)
                if not rec:
                    continue
                run = results["runs"].get(f"{m}/forward", {})
                cells = [_ci(rec.get(s), k) for s in splits for k in FORWARD_METRICS]
                n = " / ".join(f"{rec[s]['n']}/{rec[s]['n_failed']}" for s in splits if s in rec)
                label = FORWARD_REFERENCE.get(m, m)
                lines.append(f"| {label} | {kind} | " + " | ".join(cells) + f" | {n} | "
                             f"{_g(run.get('train_samples_per_s'))} | "
                             f"{_g(rec.get(splits[0], {}).get('samples_per_s'))} |")
        for s in splits:
            best = _best_generator(results, models, s)
            mem = results["forward"].get("memorisation", {}).get(s)
            ball = results["forward"].get("random-ball", {}).get(s)
            if best and mem and ball:
                lines += ["", f"Best learned generator on {s.upper()} (sitescore excluded: carve-based): "
                              f"**{best[0]}**, F1@0.5 {_ci(best[1], 'f1@0.5')}, against memorisation "
                              f"{_ci(mem, 'f1@0.5')} and the random ball {_ci(ball, 'f1@0.5')}."]
    if results["large"]:
        first = next(iter(results["large"].values()))
        lines += ["", f"#### Large particles: R = {meta['large_radius']} Å, {meta['large_samples']} eval rotations "
                      f"of {meta['large_material']} (reference {first['reference_n_atoms']} atoms)", "",
                  "| model | F1@0.5 | F1@0.1 | Chamfer (Å) | count err | s per particle | atoms |",
                  "|---|---|---|---|---|---|---|"]
        for name in FORWARD_REFERENCE:
            lines.append(f"| {FORWARD_REFERENCE[name]} | " + " | ".join(_ci(first[name], k) for k in FORWARD_METRICS)
                         + " | | |")
        for m, rec in results["large"].items():
            r = rec[m]
            lines.append(f"| {display_name(m, 'forward')} | " + " | ".join(_ci(r, k) for k in FORWARD_METRICS)
                         + f" | {r['s_per_particle']:.2f} | {r['n_atoms']} |")
    if results["inverse"]:
        isplits = [s for s in ("id", "ood", "heldout") if any(s in v for v in results["inverse"].values())]
        short = {"spacegroup_accuracy": "SG acc", "joint_accuracy_paper": "joint acc (paper)",
                 "lattice_rmse_paper": "lattice RMSE", "length_rmse": "length RMSE (Å)"}
        hdr = [f"{short[m]} {s}" for s in isplits for m in INVERSE_METRICS]
        lines += ["", "### Task 2 (inverse): particle -> lattice + space group", "",
                  "| model | " + " | ".join(hdr) + " | n / failed | train samples/s | prediction samples/s |",
                  "|" + "---|" * (len(hdr) + 4)]
        for m in [*INVERSE_REFERENCE, *models]:
            rec = results["inverse"].get(m)
            if not rec:
                continue
            run = results["runs"].get(f"{m}/inverse", {})
            cells = [_ci(rec.get(s), k) for s in isplits for k in INVERSE_METRICS]
            n = " / ".join(f"{rec[s]['n']}/{rec[s]['n_failed']}" for s in isplits if s in rec)
            lines.append(f"| {INVERSE_REFERENCE.get(m, m)} | " + " | ".join(cells) + f" | {n} | "
                         f"{_g(run.get('train_samples_per_s'))} | {_g(rec.get(isplits[0], {}).get('samples_per_s'))} |")
        for s in isplits:
            cand = [(m, results["inverse"][m][s]) for m in models if s in results["inverse"].get(m, {})]
            refs = {n: results["inverse"].get(n, {}).get(s) for n in INVERSE_REFERENCE}
            if cand and all(refs.values()):
                m, rec = max(cand, key=lambda x: (x[1]["joint_accuracy_paper"]["mean"],
                                                   -x[1]["lattice_rmse_paper"]["mean"]))
                lines += ["", f"Best learned task-2 model on {s}: **{m}**, joint accuracy (paper) "
                              f"{_ci(rec, 'joint_accuracy_paper')}, lattice RMSE {_ci(rec, 'lattice_rmse_paper')}; "
                              + "; ".join(f"{INVERSE_REFERENCE[n]} {_ci(refs[n], 'joint_accuracy_paper')}"
                                          for n in INVERSE_REFERENCE) + "."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp(prefix="c2np-mpl-"))
    main()
