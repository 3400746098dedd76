"""Dataset build and read speed, store size, peak memory: c2np vs the original approach.

The original generator rotates a pre-carved particle and writes one text XYZ file per sample
(ASE ``write``), 2,114 files per material. This script runs that reference approach on the
same material in the same run and reports ratios.

    python benchmarks/dataset_speed.py [--materials N] [--reference-materials 1]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np


def reference_build(cell, table, out: Path) -> float:
    """The original approach: carve each (material, R) once, then for every sample rotate it
    with scipy and write a text XYZ file via ASE. Returns seconds."""
    from ase import Atoms
    from ase.io import write
    from scipy.spatial.transform import Rotation

    from c2np.carving import carve

    t0 = time.perf_counter()
    base = {}
    for r, k, q in zip(table.radius_angstrom, table.rotation_index, table.quaternion):
        if r not in base:
            base[r] = carve(cell, int(r)).particle
        p = base[r]
        pos = Rotation.from_quat(q).apply(np.array(p.positions_angstrom))
        folder = out / "quaternions" / cell.material_id / f"R{r}" / "xyz"
        folder.mkdir(parents=True, exist_ok=True)
        write(folder / f"rot_{k}.xyz", Atoms(numbers=p.numbers, positions=pos), format="xyz")
    return time.perf_counter() - t0


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--materials", type=int, default=8, help="materials in the c2np build")
    ap.add_argument("--reference-materials", type=int, default=1, help="materials for the reference")
    args = ap.parse_args()

    from c2np.splits import build_recipes
    from c2np.store import DatasetStore, build_store

    try:
        from c2np.catalog import load_catalog

        cells = load_catalog()[: args.materials]
    except Exception:  # catalog not shipped: use cubic perovskites built in code
        from c2np.cells import UnitCell

        cells = [UnitCell(f"P{i}", np.eye(3) * (3.9 + 0.05 * i), [19, 12, 1, 1, 1],
                          [[0.5, 0.5, 0.5], [0, 0, 0], [0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5]])
                 for i in range(args.materials)]
    tmp = Path(tempfile.mkdtemp(prefix="c2np-bench-"))
    try:
        t0 = time.perf_counter()
        path = build_store(cells, tmp / "ds.h5", progress=False)
        t_build = time.perf_counter() - t0
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        size = os.path.getsize(path)
        ds = DatasetStore.open(path)
        n = len(ds)
        t0 = time.perf_counter()
        atoms = 0
        for row in range(n):
            nums, _ = ds.particle_arrays(row)
            atoms += len(nums)
        t_read = time.perf_counter() - t0

        ref_times, ref_sizes = [], []
        for cell in cells[: args.reference_materials]:
            table = build_recipes([cell], "paper")
            out = tmp / "ref" / cell.material_id
            ref_times.append(reference_build(cell, table, out))
            ref_sizes.append(du(out))
            shutil.rmtree(out)
        per_mat_ref_s = float(np.mean(ref_times))
        per_mat_ref_b = float(np.mean(ref_sizes))
        per_mat_s = t_build / len(cells)
        per_mat_b = size / len(cells)
        rows = [
            ("build time per material (s)", per_mat_ref_s, per_mat_s),
            ("store size per material (MB)", per_mat_ref_b / 1e6, per_mat_b / 1e6),
        ]
        print(f"{len(cells)} materials, {n} samples, {atoms} atoms read; reference on "
              f"{args.reference_materials} material(s)\n")
        print("| quantity | original approach | c2np | ratio |")
        print("|---|---:|---:|---:|")
        for name, ref, ours in rows:
            print(f"| {name} | {ref:.3f} | {ours:.4f} | {ref / ours:.0f}x |")
        print(f"| read: rotated particles per second | - | {n / t_read:,.0f} | |")
        print(f"| read: atoms per second | - | {atoms / t_read / 1e6:.1f} M | |")
        print(f"| peak RSS of the build (MB) | - | {peak_mb:.0f} | |")
        full = 81 * per_mat_s
        print(f"\nextrapolated full paper build (81 materials, 171,234 samples): {full:.1f} s, "
              f"{81 * per_mat_b / 1e6:.1f} MB (original: {81 * per_mat_ref_s / 60:.0f} min, "
              f"{81 * per_mat_ref_b / 1e9:.1f} GB)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
