"""Markdown tables from the results files of benchmarks/inverse_heldout.py (harness output
only): overall per model and variant, per split of the radius (train / val / ID / OOD
radii), per radius, per space group and the space-group confusion matrix.

    python benchmarks/inverse_report.py out/inverse > out/inverse/report.md
    python benchmarks/inverse_report.py out/run_clean out/run_noise   # several folders, one report
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from c2np.evaluation.results import Results

ORDER = ["solver", "diffcsp-inverse", "flowmm-inverse", "mattergen-inverse", "encoder-heads", "descriptor-neighbour",
         "descriptor-neighbour-noisy", "composition-lookup", "majority-class"]
VARIANTS = ["clean", "noise0.02", "noise0.05", "random-centre"]


def cell(v: dict) -> str:
    lo, hi = v["ci95"]
    return f"{v['mean']:.3f} [{lo:.2f}, {hi:.2f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path,
                    help="folders of MODEL__VARIANT.json results files (inverse_heldout.py --out)")
    args = ap.parse_args(argv)
    res = {}
    for folder in args.folders:
        for p in sorted(folder.glob("*__*.json")):
            if p.name.endswith(".candidates.json"):   # --dump-candidates output, not a results file
                continue
            model, variant = p.stem.split("__", 1)
            if (model, variant) in res:
                print(f"{p}: a second results file of {model} / {variant}", file=sys.stderr)
                return 2
            res[(model, variant)] = Results.read(p)
    if not res:
        print(f"{', '.join(map(str, args.folders))}: no MODEL__VARIANT.json results files", file=sys.stderr)
        return 2
    models = [m for m in ORDER if any(k[0] == m for k in res)] + sorted({k[0] for k in res} - set(ORDER))
    n = {v: res[k].n_samples for v in VARIANTS for k in res if k[1] == v}
    print("Rows: " + ", ".join(f"{v} {c}" for v, c in n.items())
          + " held-out samples (every model answers the same rows of a variant). Cells: mean [95 % CI].\n")
    for metric, label in (("joint_accuracy_paper", "joint accuracy (paper tolerance)"),
                          ("spacegroup_accuracy", "space-group accuracy")):
        print(f"### {label}\n")
        print("| model | " + " | ".join(VARIANTS) + " |")
        print("|---|" + "---:|" * len(VARIANTS))
        for m in models:
            row = [cell(res[(m, v)].overall[metric]) if (m, v) in res else "–" for v in VARIANTS]
            print(f"| {m} | " + " | ".join(row) + " |")
        print()
    present = [v for v in VARIANTS if any(k[1] == v for k in res)]
    splits = ["train", "val", "id", "ood"]
    for variant in present:
        print(f"### joint accuracy (paper) by radius split, {variant}\n")
        print("| model | " + " | ".join(f"{s} radii" for s in splits) + " |")
        print("|---|" + "---:|" * len(splits))
        for m in models:
            if (m, variant) in res:
                ps = res[(m, variant)].data["metrics"]["per_split"]
                print(f"| {m} | " + " | ".join(cell(ps[s]["joint_accuracy_paper"]) if s in ps else "–"
                                             for s in splits) + " |")
        print()
    for variant in present:
        if not any(k[1] == variant for k in res):
            continue
        print(f"### joint accuracy (paper) per radius, {variant}\n")
        radii = sorted(int(r) for r in res[next(k for k in res if k[1] == variant)].data["metrics"]["per_radius"])
        print("| model | " + " | ".join(str(r) for r in radii) + " | min |")
        print("|---|" + "---:|" * (len(radii) + 1))
        for m in models:
            if (m, variant) in res:
                pr = res[(m, variant)].data["metrics"]["per_radius"]
                cells = [pr[str(r)]["joint_accuracy_paper"] for r in radii]
                vals = [c["mean"] for c in cells]
                worst = cells[vals.index(min(vals))]
                right = int(round(worst["mean"] * worst["n"]))
                print(f"| {m} | " + " | ".join(f"{v:.2f}" for v in vals)
                      + f" | {min(vals):.2f} ({right} / {worst['n']}) |")
        print()
    sgs = sorted(next(iter(res.values())).data["metrics"]["per_spacegroup"], key=int)
    for variant in present:
        print(f"### per space group ({variant}): joint accuracy (paper)\n")
        print("| model | " + " | ".join(sgs) + " |")
        print("|---|" + "---:|" * len(sgs))
        for m in models:
            if (m, variant) in res:
                pg = res[(m, variant)].data["metrics"]["per_spacegroup"]
                print(f"| {m} | " + " | ".join(cell(pg[s]["joint_accuracy_paper"]) for s in sgs) + " |")
        print()
    for variant in present:
        for m in models:
            if (m, variant) not in res or m in ("majority-class",):
                continue
            conf = res[(m, variant)].data["spacegroup_confusion"]
            cols = sorted({c for r in conf.values() for c in r},
                          key=lambda c: (not c.isdigit(), int(c) if c.isdigit() else 0, c))
            print(f"Confusion, {m} ({variant}; rows true, columns predicted):\n")
            print("| true \\ pred | " + " | ".join(cols) + " |")
            print("|---|" + "---:|" * len(cols))
            for t in sorted(conf, key=int):
                print(f"| {t} | " + " | ".join(str(conf[t].get(c, 0)) for c in cols) + " |")
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
