"""Carving: exactness against an independent enumeration and speed against the original
fixed-supercell approach, for six crystal families and several centres.

The reference builds the paper's 20 x 20 x 20 supercell with ASE (``atoms.repeat``), centres it
on the requested point and keeps the atoms within R — the original approach, which also
shows where that supercell clips the sphere. The independent check enumerates a generous
cube of lattice translations without any pruning.

    python benchmarks/carving_check.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def brute(cell, radius, centre):  # type: ignore[no-untyped-def]
    from c2np.carving import interplanar_spacings

    n = int(np.ceil(radius / interplanar_spacings(cell.lattice_angstrom).min())) + 3
    r = np.arange(-n, n + 1)
    t = np.stack(np.meshgrid(r, r, r, indexing="ij"), -1).reshape(-1, 3) + np.floor(centre).astype(int)
    frac = (t[:, None, :] + cell.frac_coords[None]).reshape(-1, 3)
    pos = (frac - centre) @ cell.lattice_angstrom
    keep = np.linalg.norm(pos, axis=1) <= radius + 1e-6
    return np.tile(cell.numbers, len(t))[keep], pos[keep]


def supercell(cell, radius, centre):  # type: ignore[no-untyped-def]
    atoms = cell.to_ase().repeat((20, 20, 20))
    c = (np.asarray(centre) + 10) @ cell.lattice_angstrom
    pos = atoms.positions - c
    keep = np.linalg.norm(pos, axis=1) <= radius + 1e-6
    return atoms.numbers[keep], pos[keep]


def key(nums, pos):  # type: ignore[no-untyped-def]
    a = np.column_stack([nums, np.round(pos, 6)])
    return a[np.lexsort(a.T[::-1])]


def main() -> None:
    from c2np.carving import carve
    from helpers import crystal_zoo

    print("| family | centre | R (Å) | atoms | same set as independent enumeration (max dev, Å) "
          "| c2np (ms) | 20³ supercell (ms) | ratio | supercell clips |")
    print("|---|---|---:|---:|---|---:|---:|---:|---|")
    for family, cell in crystal_zoo().items():
        for centre in ((0.0, 0.0, 0.0), (0.31, 0.77, 0.05)):
            for radius in (6.0, 30.0):
                c = np.asarray(centre)
                t0 = time.perf_counter()
                res = carve(cell, radius, centre_frac=c)
                t_ours = time.perf_counter() - t0
                nb, pb = brute(cell, radius, c)
                a, b = key(res.particle.numbers, res.particle.positions_angstrom), key(nb, pb)
                same = a.shape == b.shape and np.array_equal(a[:, 0], b[:, 0])
                dev = float(np.abs(a[:, 1:] - b[:, 1:]).max()) if same else float("nan")
                t0 = time.perf_counter()
                ns, _ = supercell(cell, radius, c)
                t_ref = time.perf_counter() - t0
                print(f"| {family} | {centre} | {radius:g} | {res.particle.n_atoms} | "
                      f"{'yes' if same and dev < 1e-9 else 'NO'} ({dev:.1e}) | {1e3 * t_ours:.1f} | "
                      f"{1e3 * t_ref:.0f} | {t_ref / t_ours:.0f}x | "
                      f"{'yes (' + str(len(ns)) + ' atoms)' if res.paper_supercell_clips else 'no'} |")


if __name__ == "__main__":
    main()
