"""Solver joint accuracy on the catalog with the paper protocol's rotations (issue 5).

Carves every catalog cell at each radius (centre at the cell origin, as the dataset does)
with the paper protocol's quaternions of the given rotation indices (default: 1, 8, 64, 70,
72, 96, 99, 102, the ``c2np demo`` eval subset), solves, and compares with
``standardize(cell)``: joint = space group right and a, b, c, alpha, beta, gamma within
0.5 Å / 0.5°. A solver error counts as a failure. With ``--shuffle SEED`` every particle's
atoms are also permuted and translated by a random vector (seeded), to check that the answer
does not depend on atom order or position. Prints the failures, the counts per space group
and radius, the accuracy and the median time per particle.

Usage::

    PYTHONPATH=src nice -n 10 python benchmarks/solver_catalog_small.py --radii 6,7 [--rotations 8]
        [--material KSrH3] [--shuffle SEED]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

PAPER_EVAL_ROTATIONS = (1, 8, 64, 70, 72, 96, 99, 102)
LENGTH_TOL_ANGSTROM = 0.5
ANGLE_TOL_DEG = 0.5


def main() -> None:
    from tqdm import tqdm

    from c2np.carving import carve
    from c2np.catalog import load_catalog
    from c2np.cells import standardize
    from c2np.solver import solve
    from c2np.splits import build_recipes

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--radii", default="6,7", help="radii in Å, e.g. '6,7'")
    ap.add_argument("--rotations", type=int, default=len(PAPER_EVAL_ROTATIONS),
                    help="how many of the eval rotation indices to use")
    ap.add_argument("--material", default=None, help="only materials whose id contains this")
    ap.add_argument("--shuffle", type=int, default=None, help="permute and translate atoms (seed)")
    args = ap.parse_args()

    radii = [int(x) for x in args.radii.split(",")]
    rotations = PAPER_EVAL_ROTATIONS[:args.rotations]
    rng = np.random.default_rng(args.shuffle if args.shuffle is not None else 0)
    loaded = load_catalog()
    cells = list(loaded.values()) if isinstance(loaded, dict) else list(loaded)
    table = build_recipes(cells, "paper", radii_angstrom=radii)
    by_id = {c.material_id: c for c in cells}
    targets = {c.material_id: standardize(c) for c in cells}

    counts: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
    seconds: dict[int, list[float]] = defaultdict(list)
    failures: list[tuple[int, str, int, str]] = []
    for radius in radii:
        for mi, material in enumerate(tqdm(table.materials, desc=f"R={radius}", leave=False)):
            if args.material and args.material not in material:
                continue
            rows = np.flatnonzero((table.material_index == mi) & (table.radius_angstrom == radius)
                                  & np.isin(table.rotation_index, rotations))[:len(rotations)]
            st = targets[material]
            want = st.lattice_params
            for row in rows:
                particle = carve(by_id[material], radius, quaternion=table.quaternion[row]).particle
                numbers, positions = particle.numbers, particle.positions_angstrom
                if args.shuffle is not None:
                    perm = rng.permutation(len(numbers))
                    numbers, positions = numbers[perm], positions[perm] + rng.uniform(-50, 50, 3)
                t0 = time.perf_counter()
                try:
                    res = solve(numbers, positions)
                    errs = np.abs(res.lattice.as_array() - np.array(want))
                    ok = (res.spacegroup == st.spacegroup and bool(np.all(errs[:3] <= LENGTH_TOL_ANGSTROM))
                          and bool(np.all(errs[3:] <= ANGLE_TOL_DEG)))
                    msg = (f"got {res.spacegroup} {np.round(res.lattice.as_array(), 2)} want {st.spacegroup}, "
                           f"confidence {res.confidence:.2f}")
                except Exception as exc:  # a solver error is a failure, reported
                    ok, msg = False, f"error: {exc}"
                seconds[radius].append(time.perf_counter() - t0)
                counts[(radius, st.spacegroup)][0] += int(ok)
                counts[(radius, st.spacegroup)][1] += 1
                if not ok:
                    failures.append((radius, material, int(table.rotation_index[row]), msg))
    for f in failures:
        print(f"R={f[0]} {f[1]} rot_{f[2]}: {f[3]}")
    print("\n| R (Å) | space group | right | particles |\n|---:|---:|---:|---:|")
    for (radius, sg), (right, total) in sorted(counts.items()):
        print(f"| {radius} | {sg} | {right} | {total} |")
    print("\n| R (Å) | particles | joint acc. | median time (ms) |\n|---:|---:|---:|---:|")
    for radius in radii:
        right = sum(v[0] for k, v in counts.items() if k[0] == radius)
        total = sum(v[1] for k, v in counts.items() if k[0] == radius)
        med = 1e3 * float(np.median(seconds[radius])) if seconds[radius] else float("nan")
        print(f"| {radius} | {total} | {right / max(total, 1):.4f} | {med:.1f} |")


if __name__ == "__main__":
    main()
