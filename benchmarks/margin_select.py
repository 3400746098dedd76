"""Select the symmetric margins of the crystal generator's rank from re-chosen results
(docs/inverse_results.md, session 15's rule), and print the grid.

    python benchmarks/margin_select.py out/s15/trainmat_margins --variants clean,noise0.02,noise0.05

Reads ``DIR/margin{m}[_rel{r}][_noise{k}]/diffcsp-inverse__{variant}.json`` (written by
``benchmarks/crystal_gen_template_diag.py --margins ... --rel-margins ... --noise-margins ...
--write DIR``): the harness's joint accuracy (paper tolerance) of every (margin, relative
margin, margin per Å of noise) and variant. The rule: the largest mean over the variants, the
means rounded to 3 decimals; ties go to the smaller relative margin, then the smaller per-Å
margin, then the smaller margin. Exit 2 when a triple lacks a variant's file or none is found.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

_TAG = re.compile(r"^margin(?P<m>[0-9.]+)(?:_rel(?P<r>[0-9.]+))?(?:_noise(?P<k>[0-9.]+))?$")
Key = tuple[float, float, float]  # (margin, relative margin, margin per Å of noise)


def read_grid(folder: Path, variants: list[str]) -> dict[Key, dict[str, dict]]:
    """(margin, relative margin, per-Å margin) -> variant -> the overall joint accuracy entry."""
    grid: dict[Key, dict[str, dict]] = {}
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        m = _TAG.match(sub.name)
        if m is None:
            continue
        key = (float(m["m"]), float(m["r"] or 0.0), float(m["k"] or 0.0))
        entry = {}
        for v in variants:
            f = sub / f"diffcsp-inverse__{v}.json"
            if not f.is_file():
                raise FileNotFoundError(f"{f}: missing (every pair needs every variant)")
            entry[v] = json.loads(f.read_text())["metrics"]["overall"]["joint_accuracy_paper"]
        grid[key] = entry
    return grid


def select(grid: dict[Key, dict[str, dict]]) -> Key:
    """The rule's triple: the largest 3-decimal mean, then the smaller relative margin, the
    smaller per-Å margin, the smaller margin."""
    def score(key: Key) -> tuple[float, float, float, float]:
        mean = sum(e["mean"] for e in grid[key].values()) / len(grid[key])
        return (-round(mean, 3), key[1], key[2], key[0])
    return min(grid, key=score)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--variants", default="clean,noise0.02,noise0.05")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    if not args.folder.is_dir():
        print(f"{args.folder}: not a folder", file=sys.stderr)
        return 2
    try:
        grid = read_grid(args.folder, variants)
    except (FileNotFoundError, KeyError, json.JSONDecodeError) as exc:
        print(f"{args.folder}: {exc}", file=sys.stderr)
        return 2
    if not grid:
        print(f"{args.folder}: no margin<m>[_rel<r>] folders", file=sys.stderr)
        return 2
    best = select(grid)
    print("| margin | relative margin | per Å of noise | " + " | ".join(variants) + " | mean |")
    print("|---:|---:|---:|" + "---:|" * (len(variants) + 1))
    for key in sorted(grid):
        e = grid[key]
        cells = [f"{e[v]['mean']:.3f} [{e[v]['ci95'][0]:.2f}, {e[v]['ci95'][1]:.2f}]" for v in variants]
        mean = sum(e[v]["mean"] for v in variants) / len(variants)
        mark = "**" if key == best else ""
        print(f"| {mark}{key[0]:g}{mark} | {mark}{key[1]:g}{mark} | {mark}{key[2]:g}{mark} | " + " | ".join(cells)
              + f" | {mark}{mean:.3f}{mark} |")
    print(f"selected: symmetric_margin {best[0]:g}, symmetric_margin_rel {best[1]:g}, "
          f"symmetric_margin_per_angstrom {best[2]:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
