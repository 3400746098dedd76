"""The inverse (task-2) ablation table: each shipped crystal generator as shipped and with one
analytic prior switched off, scored through the harness beside the analytic baselines on the
same rows.

Rows: protocol ``strict`` built from the shipped catalog (once, under ``--work``), one seeded
rotation per (material, R) (the harness's ``eval`` subset with ``per_group=1``), radii
``--radii`` (<= 12 Å), and of those a fixed seeded subset (``--seed``):

* ``training-materials``: ``--n-train`` rows of the training materials
  (:func:`c2np.tasks.training_material_rows`; never the rotation the generators fitted);
* ``heldout-dev``: ``--n-dev`` rows of the held-out *development* materials (split
  ``heldout-dev``). Sealed test rows (``heldout-test``) are never used.

Arms (:data:`c2np.models.inverse.ablation.ABLATIONS`): ``shipped``; ``templates-off`` (the
count head's composition and the generic read-out); ``refinement-off`` (candidates ranked by
their own pair profile: no stretch, no refinement); ``crop-off`` (no central crops). An arm
that leaves a generator's configuration unchanged (``crop-off`` of a generator without crops)
is not sampled again: its row is the shipped one, marked so.

Each (generator, arm) answers every particle alone with seed ``--seed``
(:meth:`~c2np.models.inverse.generator.CrystalGenerator.predict_particles`) and is scored with
:meth:`c2np.InverseTask.evaluate` (mean and 95 % bootstrap CI). The crystallographic solver,
composition lookup and the majority class (:mod:`c2np.baselines`, the latter two fitted on the
training examples, so memorisation on training-material rows) answer the same particles.

    OMP_NUM_THREADS=1 python reproduce/ablations/inverse.py            # the JSON, then the Markdown
    python reproduce/ablations/inverse.py --md-only                    # the Markdown from the JSON

Writes ``docs/results/ablations_inverse.json`` and ``docs/results/ablations_inverse.md``. Run
it single-threaded: sampling is seeded, and one thread gives the same bytes on every run of
one machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
GENERATORS = ("pretrained/diffcsp-inverse", "pretrained/flowmm-inverse")
METRICS = ("joint_accuracy_paper", "spacegroup_accuracy", "lattice_rmse_paper")
BASELINES = {"solver": "crystallographic solver", "composition-lookup": "composition lookup",
             "majority-class": "majority class"}
ROW_SETS = ("training-materials", "heldout-dev")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--generators", nargs="+", default=list(GENERATORS),
                    help="task-2 generator (or pool) folders (default: the shipped DiffCSP and FlowMM)")
    ap.add_argument("--arms", nargs="+", default=None, help="arms to run (default: all)")
    ap.add_argument("--radii", type=int, nargs="+", default=[6, 9, 12],
                    help="radii (Å), <= 12 (default 6 9 12; the shipped 8 Å crop acts on particles of R >= 10 Å)")
    ap.add_argument("--n-train", type=int, default=6, help="training-material rows (default 6)")
    ap.add_argument("--n-dev", type=int, default=8, help="held-out development rows (default 8)")
    ap.add_argument("--seed", type=int, default=0, help="row choice and sampling seed (default 0)")
    ap.add_argument("--n-resamples", type=int, default=1000, help="bootstrap resamples")
    ap.add_argument("--work", default="c2np_out/ablations_inverse", help="folder for the store")
    ap.add_argument("--json", default="docs/results/ablations_inverse.json", help="results file")
    ap.add_argument("--md", default="docs/results/ablations_inverse.md", help="table generated from --json")
    ap.add_argument("--md-only", action="store_true", help="only regenerate --md from --json")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if any(not 0 < r <= 12 for r in args.radii):
        ap.error("--radii: the table uses radii in (0, 12] Å")
    if args.n_train < 1 or args.n_dev < 1:
        ap.error("--n-train and --n-dev must be >= 1")
    return args


def _store(work: Path) -> Any:
    """The protocol-strict store of the shipped catalog (built once under ``work``)."""
    from c2np import DatasetStore, build_store
    from c2np.catalog import catalog_data_dir
    from c2np.cells import read_cells

    path = work / "strict.h5"
    if not path.is_file():
        build_store(read_cells(Path(str(catalog_data_dir()))), path, "strict", progress=False)
    return DatasetStore.open(path)


def _subset(rows: np.ndarray, radii: np.ndarray, keep: list[int], n: int, seed: int, salt: int) -> np.ndarray:
    """Sorted fixed subset: ``n`` of the ``rows`` whose radius is in ``keep``, drawn by
    ``numpy.random.default_rng([seed, salt])`` (all of them when there are fewer)."""
    cand = rows[np.isin(np.round(radii[rows]).astype(int), keep)]
    if len(cand) <= n:
        return np.sort(cand)
    return np.sort(np.random.default_rng([seed, salt]).choice(cand, size=n, replace=False))


def tasks(store: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The task of each row set, its evaluated rows set to the fixed subset."""
    from c2np import InverseTask
    from c2np.sealed import require_development_split
    from c2np.tasks import training_material_rows

    radii = store.recipes.radius_angstrom
    train = InverseTask(store, "train", per_group=1)
    train._rows = _subset(training_material_rows(store.recipes, per_group=1), radii, args.radii,
                          args.n_train, args.seed, 1)
    train.split = "training-materials"
    dev = InverseTask(store, require_development_split("heldout-dev", purpose="an ablation"), per_group=1)
    dev._rows = _subset(dev._rows, radii, args.radii, args.n_dev, args.seed, 2)
    return {"training-materials": train, "heldout-dev": dev}


def _scores(res: Any) -> dict[str, Any]:
    met = res.data["metrics"]["overall"]
    return {"n": int(res.data["n_samples"]), "n_failed": int(res.n_failed),
            "metrics": {m: {"mean": float(met[m]["mean"]), "ci95": [float(x) for x in met[m]["ci95"]]}
                        for m in METRICS}}


def _describe(folder: str, gen: Any) -> dict[str, Any]:
    """Family, priors, category and name of a generator or pool (its current configuration)."""
    from c2np.categories import name_with_priors
    from c2np.models.priors import category_of_priors, inverse_priors, pool_priors

    members = getattr(gen, "members", None)
    if members is not None:
        cfgs = [dataclasses.asdict(g.cfg) for _, g in members]
        family, priors = "-".join(c["process"] for c in cfgs), pool_priors(cfgs)
    else:
        family, priors = gen.cfg.process, inverse_priors(dataclasses.asdict(gen.cfg))
    cat = category_of_priors(priors)
    return {"folder": folder, "family": family, "name": name_with_priors(family, priors),
            "category": cat.category, "priors": list(cat.priors)}


def _config_key(gen: Any) -> Any:
    members = getattr(gen, "members", None)
    return tuple(g.cfg for _, g in members) if members is not None else gen.cfg


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Sample and score every (generator, arm) and the baselines on both row sets."""
    import torch
    from tqdm import tqdm

    from c2np.baselines import CompositionLookup, MajorityClass, crystallographic_solver
    from c2np.models.inverse.ablation import ABLATIONS, SHIPPED, ablate
    from c2np.models.inverse.pool import load_inverse_generator

    torch.set_num_threads(1)
    t0 = time.time()
    work = ROOT / args.work
    work.mkdir(parents=True, exist_ok=True)
    store = _store(work)
    row_tasks = tasks(store, args)
    queries = {k: list(t.queries()) for k, t in row_tasks.items()}
    arms = args.arms or list(ABLATIONS)
    jobs = []
    for folder in args.generators:
        gen = load_inverse_generator(ROOT / folder)
        shipped_key = _config_key(gen)
        for arm in arms:
            g = ablate(gen, arm)
            same = arm != SHIPPED and _config_key(g) == shipped_key
            jobs.append((folder, arm, g, same))
    n_particles = sum(len(q) for q in queries.values())
    bar = tqdm(total=n_particles * sum(1 for j in jobs if not j[3]), desc="ablations", unit="particle",
               disable=args.no_progress)
    answers: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    entries = []
    for folder, arm, gen, same in jobs:
        bar.set_postfix_str(f"{Path(folder).name} {arm}")
        if not same:
            for key, qs in queries.items():
                preds = {}
                for q in qs:
                    (p,) = gen.predict_particles([q.particle], seed=args.seed)
                    if p is not None:
                        preds[q.sample_id] = p
                    bar.update(1)
                answers[(folder, arm, key)] = preds
        for key, task in row_tasks.items():
            preds = answers[(folder, SHIPPED if same else arm, key)]
            res = task.evaluate(preds, model=f"{Path(folder).name}:{arm}", n_resamples=args.n_resamples,
                                seed=args.seed)
            entries.append({**_describe(folder, gen), "arm": arm, "rows": key,
                            "same_as_shipped": bool(same), **_scores(res)})
    bar.close()
    baselines = []
    for key, task in row_tasks.items():
        fitted = {"composition-lookup": CompositionLookup.fit(task), "majority-class": MajorityClass.fit(task)}
        for name, label in BASELINES.items():
            preds = {}
            for q in queries[key]:
                p = crystallographic_solver(q) if name == "solver" else fitted[name](q)
                if p is not None:
                    preds[q.sample_id] = p
            res = task.evaluate(preds, model=name, n_resamples=args.n_resamples, seed=args.seed)
            baselines.append({"name": label, "category": "analytic", "rows": key, **_scores(res)})
    rows = {}
    for key, task in row_tasks.items():
        rad = store.recipes.radius_angstrom[task._rows]
        mats = sorted({store.recipes.materials[int(m)] for m in store.recipes.material_index[task._rows]})
        rows[key] = {"split": task.split, "n": len(task), "radii_angstrom": sorted({int(round(r)) for r in rad}),
                     "materials": mats}
    return {"about": "Task-2 ablations of the shipped crystal generators (reproduce/ablations/inverse.py)",
            "protocol": "strict", "store_fingerprint": str(store.fingerprint),
            "settings": {"radii_angstrom": args.radii, "n_train": args.n_train, "n_dev": args.n_dev,
                         "seed": args.seed, "per_group": 1, "n_resamples": args.n_resamples},
            "arms": {a: ABLATIONS[a] for a in arms}, "rows": rows, "entries": entries, "baselines": baselines,
            "seconds": round(time.time() - t0, 1)}


def _cell(m: dict[str, Any], digits: int) -> str:
    lo, hi = m["ci95"]
    return f"{m['mean']:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def markdown(doc: dict[str, Any]) -> str:
    """The tables of a results document (one per row set)."""
    s = doc["settings"]
    out = ["# Task-2 ablations of the shipped crystal generators", "",
           "Generated by `reproduce/ablations/inverse.py` from `ablations_inverse.json`; do not edit.", "",
           f"Protocol `{doc['protocol']}` (shipped catalog), one rotation per (material, R), radii "
           f"{', '.join(map(str, s['radii_angstrom']))} Å, a fixed subset (seed {s['seed']}). Mean and 95 % "
           "bootstrap CI; a failed answer counts as wrong. Each model is named with its priors "
           "(`c2np.categories.name_with_priors`) as configured in that arm.", "",
           "Arms: " + "; ".join(f"`{a}`: {d}" for a, d in doc["arms"].items()) + ".", ""]
    for key in ROW_SETS:
        info = doc["rows"][key]
        out += [f"## {key} ({info['n']} particles, split `{info['split']}`, "
                f"{len(info['materials'])} materials)", "",
                "| model | category | arm | joint acc. (paper) | space-group acc. | lattice RMSE | failed |",
                "|---|---|---|---|---|---|---|"]
        for e in (e for e in doc["entries"] if e["rows"] == key):
            m = e["metrics"]
            arm = e["arm"] + (" (= shipped)" if e["same_as_shipped"] else "")
            cat = e["category"] + (f" ({', '.join(e['priors'])})" if e["priors"] else "")
            out.append(f"| {e['name']} | {cat} | {arm} | {_cell(m['joint_accuracy_paper'], 2)} | "
                       f"{_cell(m['spacegroup_accuracy'], 2)} | {_cell(m['lattice_rmse_paper'], 2)} | "
                       f"{e['n_failed']}/{e['n']} |")
        for b in (b for b in doc["baselines"] if b["rows"] == key):
            m = b["metrics"]
            out.append(f"| {b['name']} | analytic | – | {_cell(m['joint_accuracy_paper'], 2)} | "
                       f"{_cell(m['spacegroup_accuracy'], 2)} | {_cell(m['lattice_rmse_paper'], 2)} | "
                       f"{b['n_failed']}/{b['n']} |")
        out += ["", "Materials: " + ", ".join(info["materials"]) + ".", ""]
    out += ["(= shipped): the arm leaves this generator's configuration unchanged (it does not use that prior), "
            "so its row is the shipped one. Composition lookup and the majority class are fitted on the training "
            "examples: on training-material rows they are memorisation.", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    js, md = ROOT / args.json, ROOT / args.md
    if not args.md_only:
        doc = run(args)
        js.parent.mkdir(parents=True, exist_ok=True)
        js.write_text(json.dumps(doc, indent=1) + "\n")
    elif not js.is_file():
        print(f"{js}: no results file (run without --md-only first)", file=sys.stderr)
        return 2
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text(markdown(json.loads(js.read_text())))
    print(f"wrote {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
