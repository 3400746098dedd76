"""Task 2 per structure type under protocol strict-structure: every baseline and every shipped
task-2 model, scored through the evaluation harness, seen vs unseen structure types.

    python reproduce/catalog/task2_structure_types.py --out build/task2-types \\
        [--radii 8,10] [--model-radius 8] [--models-per-type 1] [--skip-models]

1. a strict-structure store of every shipped material at ``--radii`` (a training radius and
   a test radius: the baselines fit on the training rows);
2. the baselines (``c2np benchmark --tasks inverse --per-group 1``) on it: held-out rows
   (``heldout-dev``, ``heldout-test``) of every material;
3. the shipped task-2 models (``pretrained/*-inverse``, trained under ``strict`` on the ABH3
   perovskites), which are slow on a CPU: on a stated subset, a second strict-structure
   store of at most ``--models-per-type`` held-out materials per structure type and every
   training material, at the one training radius ``--model-radius`` (so the baselines fit
   on the training rows beside them), scored together with the baselines on the same rows;
4. the per-structure-type tables (``c2np.report.structure_type_table``) into
   ``docs/results/task2_structure_types.md`` and every results document into
   ``docs/results/task2_structure_types.json``.

Nothing here selects anything: it only scores (held-out test rows included, for reporting).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPLITS = ("heldout-dev", "heldout-test")


def _say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _store(cells: list, path: Path, radii: list[int]) -> Path:
    from c2np.store import build_store

    if path.exists():
        return path
    _say(f"building {path.name}: {len(cells)} materials, radii {radii}")
    return build_store(cells, path, "strict-structure", radii_angstrom=radii, progress=False)


def _baselines(store: Path, out: Path, *, split: str = "id") -> list[dict]:
    """The baselines' results on the held-out rows of ``store`` (``split``: the other split
    the benchmark scores beside them)."""
    from c2np.benchmark import run_benchmark

    _say(f"baselines on {store.name}")
    summary = run_benchmark(store, out, splits=(split,), tasks=("inverse",), per_group=1, progress=False,
                            log=_say)
    docs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in summary.results]
    return [d for d in docs if d["split"] in SPLITS]


def _models(store: Path, out: Path, *, only: list[str] | None = None, workers: int = 1) -> list[dict]:
    """The shipped task-2 generators' predictions on the held-out rows, scored by the harness."""
    from c2np.categories import category_from_mapping
    from c2np.models.inverse.predict import is_generator_folder, predict_generator
    from c2np.store import DatasetStore
    from c2np.structured import read_yaml
    from c2np.tasks import evaluate_task

    ds = DatasetStore.open(store)
    docs = []
    for sub in sorted((ROOT / "submissions").iterdir()):
        yml = sub / "model.yml"
        if not yml.is_file():
            continue
        meta = read_yaml(yml, what="model.yml")
        model_id = meta["model"]["id"]
        if only is not None and model_id not in only:
            continue
        repo = str(meta["model"].get("repository", ""))
        run = next((ROOT / p for p in repo.split() if p.startswith("pretrained/")), None)
        if run is None or not is_generator_folder(run):
            _say(f"{model_id}: no generator folder named in model.yml; skipped")
            continue
        csv = out / "predictions" / f"{model_id}.csv"
        csv.parent.mkdir(parents=True, exist_ok=True)
        if not csv.exists():
            t0 = time.perf_counter()
            predict_generator(run, ds, "heldout", csv, subset="eval", per_group=1, seed=0, progress=False)
            _say(f"{model_id}: predicted in {time.perf_counter() - t0:.0f} s")
        category = category_from_mapping(meta["model"], where=f"{yml}: model")
        for split in SPLITS:
            res = evaluate_task("inverse", ds, csv, split, "eval", model=model_id, category=category,
                                per_group=1, workers=workers)
            res.write(out / "results" / f"{model_id}__inverse__{split}.json")
            docs.append(dict(res.data))
    return docs


def _table(docs: list[dict], title: str, note: str) -> list[str]:
    from c2np.report import normalise, row_from_results, structure_type_table

    rows = normalise([row_from_results(d) for d in docs])
    lines = [f"## {title}", "", note]
    for metric in ("spacegroup_accuracy", "joint_accuracy_strict"):
        table = structure_type_table(rows, [metric])
        lines += [line.replace("## Task 2 per structure type: ", "### ") for line in table]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("build/task2-types"))
    ap.add_argument("--radii", default="8,10")
    ap.add_argument("--model-radius", type=int, default=8)
    ap.add_argument("--models-per-type", type=int, default=1)
    ap.add_argument("--skip-models", action="store_true")
    ap.add_argument("--models", help="Comma-separated shipped task-2 model ids (default: every one).")
    ap.add_argument("--model-types", help="Comma-separated structure types of the models' held-out "
                    "materials (default: every type with held-out materials).")
    ap.add_argument("--docs", type=Path, default=ROOT / "docs" / "results")
    args = ap.parse_args(argv)

    from c2np.catalog.shipped import load_catalog, structure_types_of
    from c2np.fileio import write_text
    from c2np.splits import STRICT, STRICT_STRUCTURE, heldout_materials_of

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    radii = [int(r) for r in args.radii.split(",")]
    cells = load_catalog("all")
    full = _store(cells, out / "strict-structure.h5", radii)
    docs_full = _baselines(full, out / "full")
    sections = _table(docs_full, "Baselines, every held-out material",
                      f"Store: protocol strict-structure, all {len(cells)} shipped materials, radii "
                      f"{args.radii} Å, one rotation per (material, R). 'unseen': no training material of "
                      "the store has the type.")
    docs_sub: list[dict] = []
    if not args.skip_models:
        held = set(heldout_materials_of(cells, STRICT_STRUCTURE))
        types = dict(zip((c.material_id for c in cells), structure_types_of(c.material_id for c in cells)))
        # the shipped models trained under strict: of the ABH3 perovskites, prefer strict's
        # held-out materials (never seen by them)
        strict_held = set(heldout_materials_of(load_catalog(), STRICT))
        per_type: dict[str, list[str]] = {}
        for m in sorted(held, key=lambda m: (m not in strict_held, m)):
            per_type.setdefault(types[m], []).append(m)
        wanted = per_type if args.model_types is None else {t: per_type[t] for t in args.model_types.split(",")}
        keep = {m for ms in wanted.values() for m in ms[:args.models_per_type]}
        sub_cells = [c for c in cells if c.material_id not in held or c.material_id in keep]
        if args.model_radius not in STRICT_STRUCTURE.train_radii_angstrom:
            raise SystemExit(f"--model-radius {args.model_radius}: not a training radius of strict-structure "
                             "(the baselines fit on the training rows of the same store)")
        sub = _store(sub_cells, out / "strict-structure-models.h5", [args.model_radius])
        docs_sub = _baselines(sub, out / "subset", split="train") + _models(
            sub, out / "subset", only=None if args.models is None else args.models.split(","))
        sections += [""] + _table(
            docs_sub, "Shipped task-2 models and the baselines, a subset",
            f"The shipped generators take seconds per particle on one CPU core, so they are scored "
            f"on a subset: at most {args.models_per_type} held-out material(s) per structure type "
            f"({len(keep)} in all: "
            f"{', '.join(sorted(keep))}), radius {args.model_radius} Å (a training radius: the baselines "
            "fit on the other materials' rows there), one rotation "
            "per (material, R); the baselines on the same rows. The shipped models were trained under "
            "protocol strict, on ABH3 perovskites only: for them every type but the four perovskite-* "
            "types is unseen, whatever the column says (it is the store's training set, on which the "
            "baselines fit); the perovskite materials of the subset are held out under strict too, so "
            "the models never trained on any material scored here.")
    md = ["# Task 2 per structure type (protocol strict-structure)", "",
          "Generated by `python reproduce/catalog/task2_structure_types.py`; every number comes from "
          "the evaluation harness (failure-penalised mean, 95 % bootstrap interval in brackets).", "",
          *sections]
    args.docs.mkdir(parents=True, exist_ok=True)
    write_text(args.docs / "task2_structure_types.md", "\n".join(md) + "\n")
    keep_keys = ("model", "task", "split", "protocol", "n_samples", "n_failed", "category", "priors",
                 "structure_types_in_training")
    slim = [{"table": table, **{k: d.get(k) for k in keep_keys},
             "metrics": {k: d["metrics"][k] for k in ("overall", "per_structure_type") if k in d["metrics"]}}
            for table, docs in (("every held-out material", docs_full), ("models subset", docs_sub))
            for d in docs]
    write_text(args.docs / "task2_structure_types.json", json.dumps({"results": slim}, indent=1) + "\n")
    _say(f"wrote {args.docs / 'task2_structure_types.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
