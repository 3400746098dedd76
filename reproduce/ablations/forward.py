"""The forward ablation table: each shipped task-1 model as shipped and with one analytic prior
switched off, scored through the harness beside the analytic baselines on the same rows.

Rows: protocol ``paper``, split ``val`` (never a test row), radii <= 12 Å (by default 8 and 9 Å,
two of the radii of the validation split; 12 Å would double the sampling time), one seeded
rotation per (material, R) (the harness's ``eval`` subset with ``per_group=1``), on every
``--every``-th catalog material in sorted order starting at ``--offset``. The store of these
materials is built once under ``--work``.

Arms (:data:`c2np.models.forward.ARMS`): ``shipped``; ``sphere-penalty-off`` (the site-
assignment head's fixed penalty per Å outside R removed); ``learned-correction-zeroed`` (the
network's learned term of every site score set to zero); ``no-snapping`` (MatterGen's site
filter, ADiT's decoder snap and CDVAE's ball confinement off; run only for those families).

Each arm samples with :func:`c2np.models.training.predict` (the run's sampler, seed ``--seed``)
and is scored with :meth:`c2np.ForwardTask.evaluate` (mean and 95 % bootstrap CI). "Atoms
outside R" counts, per sample, the predicted atoms farther than R + 0.5 Å from the centre (mean
and 95 % bootstrap CI over samples). The analytic carve, memorisation and the random ball
(:mod:`c2np.baselines`) answer the same queries.

    python reproduce/ablations/forward.py            # writes the JSON, then the Markdown
    python reproduce/ablations/forward.py --md-only  # the Markdown from the JSON

Writes ``docs/results/ablations_forward.json`` and ``docs/results/ablations_forward.md``. Run it
single-threaded (``OMP_NUM_THREADS=1``): sampling is seeded, and one thread gives the same bytes
on every run of one machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RUNS = tuple(f"pretrained/{m}-forward" for m in ("mattergen", "diffcsp", "flowmm", "cdvae", "adit"))
#: families where ``no-snapping`` switches something off
SNAPPING_FAMILIES = ("mattergen", "cdvae", "adit")
METRICS = ("f1@0.5", "f1@0.1", "count_error")
OUTSIDE_MARGIN_ANGSTROM = 0.5
BASELINES = {"analytic-carve": "analytic carve", "memorisation": "memorisation", "random-ball": "random ball"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", nargs="+", default=list(RUNS), help="task-1 run folders (default: the shipped five)")
    ap.add_argument("--arms", nargs="+", default=None, help="arms to run (default: all that apply)")
    ap.add_argument("--every", type=int, default=16, help="every k-th catalog material (sorted), default 16")
    ap.add_argument("--offset", type=int, default=0, help="first material index of the every-k rule")
    ap.add_argument("--radii", type=int, nargs="+", default=[8, 9],
                    help="radii (Å) of the store, <= 12 (default 8 9: two of the validation radii)")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    ap.add_argument("--steps", type=int, default=None, help="sampler steps (default: each run's own)")
    ap.add_argument("--n-resamples", type=int, default=1000, help="bootstrap resamples")
    ap.add_argument("--work", default="c2np_out/ablations_forward", help="folder for the store and predictions")
    ap.add_argument("--json", default="docs/results/ablations_forward.json", help="results file")
    ap.add_argument("--md", default="docs/results/ablations_forward.md", help="table generated from --json")
    ap.add_argument("--md-only", action="store_true", help="only regenerate --md from --json")
    ap.add_argument("--counts-only", action="store_true",
                    help="only (re)compute the count section from the shipped arms' predictions in --work")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--reuse", action="store_true",
                    help="keep an arm's predictions file in --work whose provenance (run, store, split, "
                         "rows, seed, steps, ablation) matches, instead of sampling it again")
    args = ap.parse_args(argv)
    if any(r > 12 for r in args.radii):
        ap.error("--radii: the table uses radii <= 12 Å")
    if args.every < 1 or args.offset < 0:
        ap.error("--every must be >= 1 and --offset >= 0")
    return args


def _summary(values: np.ndarray, *, n_resamples: int, seed: int) -> dict[str, Any]:
    """Mean and 95 % percentile-bootstrap CI of per-sample ``values``."""
    from c2np.evaluation.aggregate import bootstrap_mean_ci

    lo, hi = bootstrap_mean_ci(values, n_resamples=n_resamples, seed=seed)[0]
    return {"mean": float(np.mean(values)), "ci95": [float(lo), float(hi)], "n": int(len(values))}


def atoms_outside(preds: dict[str, Any], radius_by_id: dict[str, float]) -> np.ndarray:
    """Per sample (in ``radius_by_id`` order): predicted atoms farther than R + 0.5 Å from the
    centre (a missing prediction counts 0)."""
    out = []
    for sid, r in radius_by_id.items():
        p = preds.get(sid)
        n = 0 if p is None else int(np.sum(np.linalg.norm(p.positions_angstrom, axis=1) > r + OUTSIDE_MARGIN_ANGSTROM))
        out.append(n)
    return np.asarray(out, dtype=np.float64)


def _scores(res: Any, outside: np.ndarray, *, n_resamples: int, seed: int) -> dict[str, Any]:
    met = res.data["metrics"]["overall"]
    return {"n": int(res.data["n_samples"]), "n_failed": int(res.n_failed),
            "metrics": {m: {"mean": float(met[m]["mean"]), "ci95": [float(x) for x in met[m]["ci95"]]}
                        for m in METRICS},
            "atoms_outside": {**_summary(outside, n_resamples=n_resamples, seed=seed), "total": int(outside.sum())}}


def count_sources(args: argparse.Namespace, store: Any, task: Any, work: Path) -> list[dict[str, Any]]:
    """Per shipped run: where its atom count comes from, on the table's rows. For every row,
    the count head's count for the query (CDVAE: at the latent mean; its sampler draws the
    latent), the true count and the sampled count of the shipped arm's predictions, with the
    harness's count error."""
    import torch

    from c2np.models.backbone import collate_conditions
    from c2np.models.data import condition_from_query
    from c2np.models.training import load_run
    from c2np.predictions import iter_forward_predictions
    from c2np.tasks import select_rows

    queries = list(task.queries())
    rec = store.recipes
    rows = {rec.sample_id(int(r)): int(store.particle(int(r)).n_atoms)
            for r in select_rows(rec, "val", "eval", per_group=1)}
    out = []
    for run_dir in args.runs:
        model, meta = load_run(ROOT / run_dir)
        family = meta["model"]
        pred_path = work / f"{family}-shipped.extxyz"
        if not pred_path.is_file():
            raise SystemExit(f"{pred_path}: no shipped predictions; run the table first")
        res = task.evaluate(pred_path, model=f"{family}:shipped", n_resamples=args.n_resamples, seed=args.seed)
        s = res.data["samples"]
        err = dict(zip(s["sample_id"], s["count_error"]))
        sampled = {sid: len(z) for _, sid, z, _ in iter_forward_predictions(pred_path)}
        head = {}
        with torch.no_grad():
            for q in queries:
                c = collate_conditions([condition_from_query(q)])
                if family == "cdvae":
                    mu, _ = model.to_latent(model.conditioner(c)).chunk(2, -1)
                    cond = model.from_latent(mu)
                else:
                    cond = model.conditioner(c)
                head[q.sample_id] = int(model.count_head.sample(c, cond)[0])
        ids = [q.sample_id for q in queries]
        per_row = [{"sample_id": i, "head": head[i], "true": rows[i], "sampled": sampled.get(i, 0),
                    "count_error": err[i]} for i in ids]
        out.append({"family": family, "run": run_dir,
                    "mean_head": float(np.mean([r["head"] for r in per_row])),
                    "mean_true": float(np.mean([r["true"] for r in per_row])),
                    "mean_sampled": float(np.mean([r["sampled"] for r in per_row])),
                    "rows_sampled_equals_head": int(sum(r["head"] == r["sampled"] for r in per_row)),
                    "n": len(per_row), "per_row": per_row})
    return out


def reusable(path: Path, *, run_dir: str, store: Any, seed: int, steps: int | None, ablation: dict[str, Any],
             n_rows: int) -> bool:
    """True when ``path`` and its provenance record exist and match this arm exactly."""
    rec_path = path.with_name(path.name + ".json")
    if not (path.is_file() and rec_path.is_file()):
        return False
    rec = json.loads(rec_path.read_text())
    return (Path(rec.get("run", "")).resolve() == (ROOT / run_dir).resolve() and rec.get("split") == "val"
            and rec.get("subset") == "eval" and rec.get("per_group") == 1 and rec.get("seed") == seed
            and rec.get("steps") == steps and rec.get("ablation") == ablation and rec.get("n_samples") == n_rows
            and rec.get("store_check", {}).get("store_fingerprint") == str(store.fingerprint))


def _store(args: argparse.Namespace, work: Path) -> tuple[Any, list[str]]:
    from c2np import DatasetStore, build_store
    from c2np.catalog import catalog_data_dir
    from c2np.cells import read_cells

    cells = read_cells(Path(str(catalog_data_dir())))
    picked = cells[args.offset::args.every]
    path = work / f"store_every{args.every}_off{args.offset}_r{'-'.join(map(str, args.radii))}.h5"
    if not path.is_file():
        build_store(picked, path, "paper", radii_angstrom=args.radii, progress=False)
    return DatasetStore.open(path), [c.material_id for c in picked]


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Sample and score every (run, arm) and the baselines; the results document."""
    import torch
    from tqdm import tqdm

    from c2np import ForwardTask
    from c2np.baselines import FORWARD_BASELINES
    from c2np.baselines import predict as baseline_predict
    from c2np.categories import name_with_priors
    from c2np.models.forward import ARMS
    from c2np.models.priors import category_of_priors, forward_priors
    from c2np.models.training import predict
    from c2np.particle import Particle
    from c2np.predictions import iter_forward_predictions

    torch.set_num_threads(1)
    work = ROOT / args.work
    work.mkdir(parents=True, exist_ok=True)
    store, materials = _store(args, work)
    task = ForwardTask(store, "val", "eval", per_group=1)
    radius_by_id = {q.sample_id: float(q.radius_angstrom) for q in task.queries()}
    jobs = []
    for run_dir in args.runs:
        meta = json.loads((ROOT / run_dir / "config.json").read_text())
        family = meta["model"]
        for arm in args.arms or list(ARMS):
            if arm == "no-snapping" and family not in SNAPPING_FAMILIES:
                continue
            jobs.append((run_dir, meta, arm))
    rows = []
    bar = tqdm(jobs, desc="ablations", disable=args.no_progress)
    for run_dir, meta, arm in bar:
        family = meta["model"]
        bar.set_postfix_str(f"{family} {arm}")
        out = work / f"{family}-{arm}.extxyz"
        t0 = time.process_time()
        ab = dataclasses.asdict(ARMS[arm])
        reused = args.reuse and reusable(out, run_dir=run_dir, store=store, seed=args.seed, steps=args.steps,
                                         ablation=ab, n_rows=len(radius_by_id))
        if not reused:
            predict(ROOT / run_dir, store, "val", out, subset="eval", per_group=1, seed=args.seed, steps=args.steps,
                    progress=False, allow_other_store=True, ablation=ARMS[arm])
        cpu = None if reused else round(time.process_time() - t0, 1)  # a reused file's CPU time is not known
        res = task.evaluate(out, model=f"{family}:{arm}", n_resamples=args.n_resamples, seed=args.seed)
        preds = {sid: Particle(z, x) for _, sid, z, x in iter_forward_predictions(out)}
        priors = forward_priors(family, meta["config"])
        cat = category_of_priors(priors)
        rows.append({"model": name_with_priors(family, priors), "family": family, "run": run_dir,
                     "category": cat.category, "priors": list(cat.priors), "arm": arm,
                     "ablation": dataclasses.asdict(ARMS[arm]), "sampling_cpu_seconds": cpu, "reused": bool(reused),
                     **_scores(res, atoms_outside(preds, radius_by_id), n_resamples=args.n_resamples,
                               seed=args.seed)})
    baselines = []
    for name, label in BASELINES.items():
        model = FORWARD_BASELINES[name](task)
        preds = baseline_predict(task, model)
        res = task.evaluate(preds, model=name, n_resamples=args.n_resamples, seed=args.seed)
        baselines.append({"model": label, "category": "analytic", "priors": [],
                          **_scores(res, atoms_outside(preds, radius_by_id), n_resamples=args.n_resamples,
                                    seed=args.seed)})
    counts = count_sources(args, store, task, work)
    return {"schema": "c2np-ablations-forward/1",
            "command": "python reproduce/ablations/forward.py " + " ".join(sys.argv[1:]),
            "rows_definition": {"protocol": "paper", "split": "val", "subset": "eval", "per_group": 1,
                                "radii_angstrom": list(args.radii), "material_rule":
                                f"every {args.every}-th catalog material in sorted order from index {args.offset}",
                                "materials": materials, "n_rows": len(radius_by_id),
                                "store_fingerprint": str(store.fingerprint)},
            "seed": args.seed, "steps": args.steps if args.steps is not None else "each run's sample_steps",
            "atoms_outside_definition": f"predicted atoms farther than R + {OUTSIDE_MARGIN_ANGSTROM} Å from the centre",
            "arms": {k: dataclasses.asdict(v) for k, v in ARMS.items()},
            "rows": rows, "baselines": baselines, "counts": counts}


def _cell(rec: dict[str, Any]) -> str:
    lo, hi = rec["ci95"]
    return f"{rec['mean']:.3f} [{lo:.3f}, {hi:.3f}]"


def _cell_count(rec: dict[str, Any]) -> str:
    lo, hi = rec["ci95"]
    return f"{rec['mean']:.1f} [{lo:.1f}, {hi:.1f}]"


def markdown(doc: dict[str, Any]) -> str:
    """The Markdown table of a results document."""
    d = doc["rows_definition"]
    lines = [
        "# Forward ablations: the analytic priors of the shipped task-1 models",
        "",
        f"Generated by `{doc['command'].strip()}` from `ablations_forward.json`; do not edit by hand.",
        "",
        f"Rows: protocol `{d['protocol']}`, split `{d['split']}` (no test row), radii "
        f"{', '.join(map(str, d['radii_angstrom']))} Å, {d['per_group']} seeded rotation per (material, R), "
        f"{d['material_rule']} ({len(d['materials'])} materials: {', '.join(d['materials'])}); "
        f"{d['n_rows']} rows. Sampling seed {doc['seed']}, steps: {doc['steps']}.",
        "Every model row and every baseline row is scored by the harness on these same rows "
        "(mean [95 % bootstrap CI]). Atoms outside R: " + doc["atoms_outside_definition"] + ", per sample.",
        "",
        "Arms: `shipped` (as shipped); `sphere-penalty-off` (the site-assignment head's fixed penalty per Å "
        "outside R removed); `learned-correction-zeroed` (the network's learned term of every site score set "
        "to zero: the site choice rests on the distance likelihood, the sphere penalty and the species "
        "likelihood); `no-snapping` (MatterGen's site filter, ADiT's decoder snap, CDVAE's ball confinement "
        "off).",
        "",
        "| model | category (priors) | arm | F1@0.5 | F1@0.1 | count error | atoms outside R | n (failed) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["rows"]:
        m = r["metrics"]
        cat = f"{r['category']} ({', '.join(r['priors'])})" if r["priors"] else r["category"]
        lines.append(f"| {r['model']} | {cat} | {r['arm']} | {_cell(m['f1@0.5'])} | {_cell(m['f1@0.1'])} | "
                     f"{_cell(m['count_error'])} | {_cell_count(r['atoms_outside'])} | {r['n']} ({r['n_failed']}) |")
    for b in doc["baselines"]:
        m = b["metrics"]
        lines.append(f"| {b['model']} | {b['category']} | — | {_cell(m['f1@0.5'])} | {_cell(m['f1@0.1'])} | "
                     f"{_cell(m['count_error'])} | {_cell_count(b['atoms_outside'])} | {b['n']} ({b['n_failed']}) |")
    if doc.get("counts"):
        lines += ["", "## Where the atom count comes from", "",
                  "Shipped arm, same rows: the count head's count for the query (CDVAE: at the latent mean), "
                  "the true count and the sampled count (means over rows), and the rows where the sampled "
                  "count equals the head's.", "",
                  "| family | head count | true count | sampled count | sampled = head |", "|---|---|---|---|---|"]
        for c in doc["counts"]:
            lines.append(f"| {c['family']} | {c['mean_head']:.1f} | {c['mean_true']:.1f} | {c['mean_sampled']:.1f} | "
                         f"{c['rows_sampled_equals_head']} of {c['n']} |")
        mg = [c for c in doc["counts"] if c["family"] == "mattergen"]
        if mg:
            lines += ["", "MatterGen, first rows (harness count error = |sampled - true| / true):", "",
                      "| sample | head | true | sampled | count error |", "|---|---|---|---|---|"]
            for r in mg[0]["per_row"][:4]:
                lines.append(f"| {r['sample_id']} | {r['head']} | {r['true']} | {r['sampled']} | "
                             f"{r['count_error']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    args = parse_args(argv)
    json_path, md_path = ROOT / args.json, ROOT / args.md
    if args.counts_only:
        import torch

        from c2np import ForwardTask

        torch.set_num_threads(1)
        if not json_path.is_file():
            print(f"{json_path}: no results file; run without --counts-only first", file=sys.stderr)
            return 2
        doc = json.loads(json_path.read_text())
        work = ROOT / args.work
        store, _ = _store(args, work)
        doc["counts"] = count_sources(args, store, ForwardTask(store, "val", "eval", per_group=1), work)
        json_path.write_text(json.dumps(doc, indent=1) + "\n")
    elif not args.md_only:
        doc = run(args)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(doc, indent=1) + "\n")
    elif not json_path.is_file():
        print(f"{json_path}: no results file; run without --md-only first", file=sys.stderr)
        return 2
    md_path.write_text(markdown(json.loads(json_path.read_text())))
    print(f"wrote {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
