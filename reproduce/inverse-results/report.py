"""Markdown tables from the results files of reproduce/inverse-results/heldout.py (harness output
only): overall per model and variant, per split of the radius (train / val / ID / OOD
radii), per radius, per space group and the space-group confusion matrix.

    python reproduce/inverse-results/report.py out/inverse > out/inverse/report.md
    python reproduce/inverse-results/report.py out/run_clean out/run_noise   # several folders, one report
    python reproduce/inverse-results/report.py out/tables --plot docs/inverse_per_radius.png

``--plot PATH`` also draws joint accuracy (paper tolerance) against the radius, one panel per
variant (clean and 0.02 Å when present), one line per model with its 95 % CI as a band.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from c2np.evaluation.results import Results

ORDER = ["solver", "diffcsp-inverse", "flowmm-inverse", "mattergen-inverse", "cdvae-inverse", "adit-inverse",
         "encoder-heads", "descriptor-neighbour",
         "descriptor-neighbour-noisy", "composition-lookup", "majority-class"]
VARIANTS = ["clean", "noise0.02", "noise0.05", "random-centre"]


def cell(v: dict) -> str:
    lo, hi = v["ci95"]
    return f"{v['mean']:.3f} [{lo:.2f}, {hi:.2f}]"


def plot_per_radius(res: dict, models: list[str], path: Path) -> None:
    """Joint accuracy (paper) against R per model, a panel per variant (clean, noise0.02), CI bands."""
    from matplotlib.figure import Figure

    variants = [v for v in ("clean", "noise0.02") if any(k[1] == v for k in res)]
    fig = Figure(figsize=(5.5 * len(variants) + 2.2, 4.2), layout="constrained")
    axes = fig.subplots(1, len(variants), sharey=True, squeeze=False)[0]
    for ax, variant in zip(axes, variants):
        for m in models:
            if (m, variant) not in res or m == "majority-class":
                continue
            pr = res[(m, variant)].data["metrics"]["per_radius"]
            radii = sorted(pr, key=float)
            cells = [pr[r]["joint_accuracy_paper"] for r in radii]
            x = [float(r) for r in radii]
            style = {"solver": ":", "descriptor-neighbour": "--", "descriptor-neighbour-noisy": "--",
                     "composition-lookup": "-."}.get(m, "-")
            line, = ax.plot(x, [c["mean"] for c in cells], style, marker=".", label=m, lw=1.4)
            ax.fill_between(x, [c["ci95"][0] for c in cells], [c["ci95"][1] for c in cells],
                            color=line.get_color(), alpha=0.06, lw=0)
        ax.axhline(0.9 if variant == "clean" else 0.8, color="k", lw=0.8, alpha=0.5)
        n = res[next(k for k in res if k[1] == variant)].data["metrics"]["per_radius"]
        per_r = min(int(c["joint_accuracy_paper"]["n"]) for c in n.values())
        ax.set_title(f"held-out, {variant}: {per_r}+ rows per R, bands 95 % CI", fontsize=10)
        ax.set_xlabel("particle radius R (Å)")
        ax.set_ylim(-0.02, 1.02)
    axes[0].set_ylabel("joint accuracy (paper tolerance)")
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path,
                    help="folders of MODEL__VARIANT.json results files (heldout.py --out)")
    ap.add_argument("--plot", type=Path, default=None, help="write the per-radius figure (PNG) here")
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
    if args.plot is not None:
        plot_per_radius(res, models, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
