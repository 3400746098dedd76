"""Speed of the task-1 metrics against the original metric code, side by side.

Original approach (per sample, as in the paper's pipeline): scipy ``directed_hausdorff``
both ways, ``pdist`` + ``numpy.histogram`` (128 bins on [0, 10] Å, density) of both
particles, ``ConvexHull`` of both. Ours: every task-1 metric of ``c2np.metrics`` (F1 at two
tolerances with maximum matching, matched RMSD, Hausdorff, Chamfer, hull, pair-distance
histogram, paper numbers) with the reference summary precomputed once per (material, R).

Particles: R = 30 Å spheres of a cubic perovskite ABH3 (a = 4.0 Å, about 8,700 atoms) in
several orientations; predictions are the reference with 0.05 Å Gaussian noise and 2 % of
atoms dropped. Also times ``evaluate_forward`` end to end on eval subsets.

Run: ``PYTHONPATH=src nice -n 10 python benchmarks/metrics_speed.py [--repeats N] [--quick]``
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def original_metrics(xp: np.ndarray, xg: np.ndarray) -> dict[str, float]:
    """The original metric code's work for one sample."""
    from scipy.spatial import ConvexHull
    from scipy.spatial.distance import directed_hausdorff, pdist

    haus = max(directed_hausdorff(xp, xg)[0], directed_hausdorff(xg, xp)[0])
    hp = np.histogram(pdist(xp), bins=128, range=(0, 10), density=True)[0]
    hg = np.histogram(pdist(xg), bins=128, range=(0, 10), density=True)[0]
    dv = abs(ConvexHull(xp).volume - ConvexHull(xg).volume)
    return {"hausdorff": haus, "rdf_energy": float(np.sum((hp - hg) ** 2)), "dv": dv}


def _timed(fn, repeats: int) -> tuple[float, float]:
    """(median wall time, median CPU time of this process) in ms. On a shared machine the
    CPU time is the better estimate of the unloaded wall time of single-threaded code."""
    walls, cpus = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fn()
        walls.append((time.perf_counter() - t) * 1e3)
        cpus.append((time.process_time() - c) * 1e3)
    return statistics.median(walls), statistics.median(cpus)


def perovskite(a: float = 4.0, name: str = "ABH3", A: int = 19, B: int = 12):
    from c2np.cells import UnitCell

    return UnitCell(name, np.eye(3) * a, [A, B, 1, 1, 1],
                    [[0.5, 0.5, 0.5], [0, 0, 0], [0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5]])


def bench_particles(repeats: int, n_particles: int) -> None:
    from rich.console import Console
    from rich.table import Table
    from scipy.spatial import cKDTree
    from scipy.spatial.transform import Rotation

    from c2np.carving import carve
    from c2np.metrics import (ReferenceSummary, forward_metrics, hull_volume_angstrom3,
                              matched_sq_distances, pair_distance_counts)

    cell = perovskite()
    rng = np.random.default_rng(0)
    t = time.perf_counter()
    pair_distance_counts(np.zeros((2, 3)))  # compile the sweep (or load it from numba's cache)
    t_jit = time.perf_counter() - t
    quats = Rotation.random(n_particles, random_state=1).as_quat()
    base = carve(cell, 30.0).particle
    t = time.process_time()
    summary = ReferenceSummary.from_particle(base.numbers, base.positions_angstrom, radius_angstrom=30.0)
    t_summary = (time.process_time() - t) * 1e3
    table = Table(title=f"task-1 metrics on R = 30 Å particles (ms, median of {repeats}; "
                        "wall / CPU time of this process)")
    for col in ("particle", "atoms", "original wall", "original CPU", "c2np wall", "c2np CPU",
                "ratio wall", "ratio CPU"):
        table.add_column(col, justify="right")
    rows = []
    parts = []
    for i, q in enumerate(quats):
        q = q if q[3] >= 0 else -q
        g = carve(cell, 30.0, quaternion=q).particle
        keep = rng.random(g.n_atoms) > 0.02
        zp = g.numbers[keep]
        xp = g.positions_angstrom[keep] + rng.normal(scale=0.05, size=(int(keep.sum()), 3))
        parts.append((zp, xp, g))
        o_wall, o_cpu = _timed(lambda: original_metrics(xp, g.positions_angstrom), max(3, repeats // 2))
        c_wall, c_cpu = _timed(lambda: forward_metrics(zp, xp, g.numbers, g.positions_angstrom,
                                                       reference=summary), repeats)
        rows.append((o_wall, o_cpu, c_wall, c_cpu))
        table.add_row(f"rot {i}", str(g.n_atoms), f"{o_wall:.0f}", f"{o_cpu:.0f}", f"{c_wall:.1f}",
                      f"{c_cpu:.1f}", f"{o_wall / c_wall:.1f}x", f"{o_cpu / c_cpu:.1f}x")
    m = np.mean(rows, axis=0)
    table.add_row("mean", "", f"{m[0]:.0f}", f"{m[1]:.0f}", f"{m[2]:.1f}", f"{m[3]:.1f}",
                  f"{m[0] / m[2]:.1f}x", f"{m[1] / m[3]:.1f}x")
    con = Console()
    con.print(table)
    con.print(f"reference summary (once per material and R, shared by its rotations): {t_summary:.0f} ms CPU")
    con.print(f"first use of the pair sweep in a process (numba compile or cache load): {t_jit:.2f} s")

    # components of ours on the first particle
    zp, xp, g = parts[0]
    xg = g.positions_angstrom
    comp = Table(title="c2np components on one particle (ms, median of repeats)")
    comp.add_column("component")
    comp.add_column("wall", justify="right")
    comp.add_column("CPU", justify="right")

    def nn() -> None:
        tp, tg = cKDTree(xp), cKDTree(xg)
        tg.query(xp, k=1)
        tp.query(xg, k=1)

    def per_element() -> None:
        for z in np.unique(zp):
            a, b = xp[zp == z], xg[g.numbers == z]
            ta, tb = cKDTree(a), cKDTree(b)
            matched_sq_distances(a, b, pred_tree=ta, ref_tree=tb)
            ta.sparse_distance_matrix(tb, 0.5, output_type="ndarray")

    for name, fn in (("all-atom trees + NN both ways (Hausdorff, Chamfer)", nn),
                     ("per-element trees, matched RMSD, pairs < 0.5 Å", per_element),
                     ("convex hull", lambda: hull_volume_angstrom3(xp)),
                     ("pair-distance histogram (exact: compiled column sweep, float64)",
                      lambda: pair_distance_counts(xp))):
        w, c = _timed(fn, repeats)
        comp.add_row(name, f"{w:.1f}", f"{c:.1f}")
    from scipy.spatial.distance import pdist

    tree = cKDTree(xp)
    for name, fn in (("pdist + histogram", lambda: np.histogram(pdist(xp), bins=128, range=(0, 10))),
                     ("cKDTree.count_neighbors(r = 129 edges)",
                      lambda: tree.count_neighbors(tree, np.linspace(0, 10, 129), cumulative=False)),
                     ("cKDTree.query_pairs(10 Å) alone", lambda: tree.query_pairs(10.0, output_type="ndarray"))):
        w, c = _timed(fn, 3)
        comp.add_row(f"[dim]for comparison: {name}[/]", f"{w:.1f}", f"{c:.1f}")
    con.print(comp)

    # worst case for the matched RMSD: a uniform random ball of the right density
    n = g.n_atoms
    u = rng.normal(size=(n, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    xb = u * 30.0 * rng.random(n)[:, None] ** (1.0 / 3.0)
    zb = rng.permutation(g.numbers)
    t = time.process_time()
    sq, cert = 0.0, True
    for z in np.unique(zb):
        s, _, c = matched_sq_distances(xb[zb == z], xg[g.numbers == z])
        sq, cert = sq + s, cert and c
    con.print(f"matched RMSD of a random ball ({n} atoms, per element): "
              f"{(time.process_time() - t) * 1e3:.0f} ms CPU, RMSD {math.sqrt(sq / n):.4f} Å, "
              f"certified {cert}")


def bench_end_to_end(n_materials: int, catalog: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table

    from c2np.baselines import analytic_carve, predict, random_ball
    from c2np.predictions import write_forward_predictions
    from c2np.tasks import ForwardTask
    from c2np.store import DatasetStore, build_store

    if catalog:  # the shipped catalog (all of it when n_materials >= its size)
        from c2np.catalog import load_catalog

        cells = load_catalog()[:n_materials]
        n_materials = len(cells)
    else:
        cells = [perovskite(a=4.0 + 0.05 * i, name=f"ABH3_{i}") for i in range(n_materials)]
    n_catalog = 82
    con = Console()
    with tempfile.TemporaryDirectory() as tmp:
        path = build_store(cells, Path(tmp) / "ds.h5", progress=False)
        store = DatasetStore.open(path)
        table = Table(title=f"ForwardTask.evaluate end to end (extxyz file -> results), {n_materials} "
                            "material(s), paper protocol, eval subset (8 rotations per material and R)")
        for col in ("predictions", "split", "samples", "atoms", "wall s", "CPU s",
                    "ms / sample (CPU)", f"{n_catalog} materials, min (est., CPU)"):
            table.add_column(col, justify="right")
        for model, make, workers in (("analytic carve", analytic_carve, 1),
                                     ("random ball", random_ball, 1),
                                     ("random ball", random_ball, 2)):
            total = 0.0
            wall = 0.0
            for split in ("id", "ood"):
                task = ForwardTask(store, split, "eval")
                preds = predict(task, make)
                pred_path = write_forward_predictions(Path(tmp) / f"{split}.extxyz", preds)
                n_atoms = sum(p.n_atoms for p in preds.values())
                t, c = time.perf_counter(), time.process_time()
                res = task.evaluate(pred_path, progress=False, workers=workers)
                sec = time.perf_counter() - t
                cpu = time.process_time() - c
                total += cpu
                wall += sec
                assert res.n_failed == 0
                if workers == 1:
                    table.add_row(model, split, str(len(task)), str(n_atoms), f"{sec:.1f}", f"{cpu:.1f}",
                                  f"{cpu / len(task) * 1e3:.0f}", f"{cpu / n_materials * n_catalog / 60:.1f}")
            if workers == 1:
                table.add_row(model, "id + ood", "", "", f"{wall:.1f}", f"{total:.1f}", "",
                              f"{total / n_materials * n_catalog / 60:.1f}")
            else:  # CPU time of the parent says nothing here: report wall time
                table.add_row(f"{model}, {workers} workers", "id + ood", "", "", f"{wall:.1f}", "-", "",
                              f"{wall / n_materials * n_catalog / 60:.1f} (wall)")
        con.print(table)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--particles", type=int, default=3)
    ap.add_argument("--materials", type=int, default=1, help="materials in the end-to-end run")
    ap.add_argument("--catalog", action="store_true",
                    help="end-to-end run on the shipped catalog instead of synthetic perovskites")
    ap.add_argument("--quick", action="store_true", help="skip the end-to-end run")
    args = ap.parse_args(argv)
    import os

    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    bench_particles(args.repeats, args.particles)
    if not args.quick:
        bench_end_to_end(args.materials, args.catalog)
    return 0


if __name__ == "__main__":
    sys.exit(main())
