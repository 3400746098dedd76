"""Scaling of c2np's parallel jobs through the executor seam (c2np.executor), and an estimate
for an internet-scale dataset from measured per-item costs.

1. ``evaluate`` (task 1, analytic-carve predictions, ID + OOD eval subsets of a few
   shipped materials) with local processes and with a Dask ``LocalCluster``, 1 and 2
   workers: wall time;
2. the scheduler overhead per task: a no-op mapped over many one-item tasks;
3. per-item costs measured here (store bytes per recipe row and per base atom, carving
   CPU per base atom, scoring CPU per sample atom for good and random-ball predictions)
   and the estimate for ``--cells`` x ``--radii`` x ``--rotations`` (default 150,000 x 25
   x 2,114) on ``--nodes`` nodes of ``--cores`` cores: store size, build time, full-split
   evaluation time per model.

Run: ``PYTHONPATH=src nice -n 10 python benchmarks/scaling.py [--materials 6] [--json OUT]``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _noop(state: object, item: int) -> int:
    return item


def measure(n_materials: int, overhead_tasks: int) -> dict:
    from c2np.baselines import analytic_carve, predict, random_ball
    from c2np.catalog import load_catalog
    from c2np.executor import DaskExecutor, LocalExecutor
    from c2np.predictions import write_forward_predictions
    from c2np.store import DatasetStore, build_store
    from c2np.tasks import ForwardTask

    out: dict = {"machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg()[0]}}
    cells = load_catalog()[:n_materials]
    with tempfile.TemporaryDirectory() as tmp:
        t, c = time.perf_counter(), time.process_time()
        path = build_store(cells, Path(tmp) / "ds.h5", progress=False)
        build_wall, build_cpu = time.perf_counter() - t, time.process_time() - c
        store = DatasetStore.open(path)
        rec = store.recipes
        n_rows = len(rec.radius_angstrom)
        base_atoms = sum(store.base_particle(m, int(r)).n_atoms
                         for m in rec.materials for r in np.unique(rec.radius_angstrom))
        size = Path(path).stat().st_size
        out["store"] = {"materials": len(cells), "rows": n_rows, "base_atoms": base_atoms,
                        "bytes": size, "build_wall_s": build_wall, "build_cpu_s": build_cpu}
        files, atoms = {}, {}
        for model, make in (("analytic carve", analytic_carve), ("random ball", random_ball)):
            for split in ("id", "ood"):
                task = ForwardTask(store, split, "eval")
                preds = predict(task, make)
                atoms[(model, split)] = sum(p.n_atoms for p in preds.values())
                files[(model, split)] = (task, write_forward_predictions(
                    Path(tmp) / f"{model[:4]}_{split}.extxyz", preds))
        # compile (or load) the metric kernels in this process before timing; Dask and
        # forked workers load them from numba's disk cache
        files[("random ball", "id")][0].evaluate(files[("random ball", "id")][1], n_resamples=10)
        runs = []
        for label, make_ex in (("local processes, 1", lambda: LocalExecutor(1)),
                               ("local processes, 2", lambda: LocalExecutor(2)),
                               ("Dask LocalCluster, 1", lambda: DaskExecutor.local(1)),
                               ("Dask LocalCluster, 2", lambda: DaskExecutor.local(2))):
            t0 = time.perf_counter()
            ex = make_ex()
            start = time.perf_counter() - t0
            row = {"executor": label, "start_s": start}
            for model in ("analytic carve", "random ball"):
                wall = cpu = 0.0
                n = n_atoms = 0
                for split in ("id", "ood"):
                    task, pred_path = files[(model, split)]
                    t, c = time.perf_counter(), _cpu()
                    res = task.evaluate(pred_path, n_resamples=200, executor=ex)
                    wall += time.perf_counter() - t
                    cpu += _cpu() - c
                    n += res.data["n_samples"]
                    n_atoms += atoms[(model, split)]
                row[model] = {"samples": n, "atoms": n_atoms, "wall_s": wall,
                              "cpu_s_this_machine": cpu}
            t = time.perf_counter()
            for _ in ex.map(_noop, list(range(overhead_tasks)), chunk=1):
                pass
            row["overhead_ms_per_task"] = (time.perf_counter() - t) / overhead_tasks * 1e3
            ex.close()
            runs.append(row)
        out["runs"] = runs
    return out


TASK_SAMPLES = 2000  # samples per Dask task in the estimate (or per job-array shard)


def estimate(m: dict, *, cells: int, radii: int, rotations: int, nodes: int, cores: int,
             atoms_per_material_radius: float) -> dict:
    """Scale the measured per-item costs to ``cells x radii x rotations`` samples."""
    st = m["store"]
    rows = cells * radii * rotations
    base_atoms = cells * radii * atoms_per_material_radius
    per_row_bytes = 45.0  # material, radius, rotation (3 x i4), quaternion (4 x f8), split (i1)
    per_atom_bytes = 13.0  # numbers u1 + positions 3 x f4
    meas_atom_bytes = (st["bytes"] - per_row_bytes * st["rows"]) / max(st["base_atoms"], 1)
    store_bytes = rows * per_row_bytes + base_atoms * max(per_atom_bytes, meas_atom_bytes)
    carve_cpu_per_atom = st["build_cpu_s"] / max(st["base_atoms"], 1)
    build_cpu = base_atoms * carve_cpu_per_atom
    local1 = next(r for r in m["runs"] if r["executor"] == "local processes, 1")
    sample_atoms = atoms_per_material_radius  # a sample has its (material, R) base's atoms
    out = {"samples": rows, "store_TB": store_bytes / 1e12,
           "build_cpu_hours": build_cpu / 3600,
           "build_wall_hours_on_cluster": build_cpu / (nodes * cores) / 3600, "models": {}}
    dask2 = next(r for r in m["runs"] if r["executor"] == "Dask LocalCluster, 2")
    for model in ("analytic carve", "random ball"):
        cpu_per_atom = local1[model]["cpu_s_this_machine"] / local1[model]["atoms"]
        cpu = rows * sample_atoms * cpu_per_atom
        # one scheduler serialises task bookkeeping: with tasks of TASK_SAMPLES samples
        # its time is tasks x the measured per-task overhead, overlapping the compute
        tasks = rows / TASK_SAMPLES
        sched = tasks * dask2["overhead_ms_per_task"] / 1e3
        compute = cpu / (nodes * cores)
        out["models"][model] = {"cpu_us_per_atom": cpu_per_atom * 1e6, "cpu_hours": cpu / 3600,
                                "compute_hours_on_cluster": compute / 3600,
                                "scheduler_hours": sched / 3600,
                                "wall_hours_on_cluster": max(compute, sched) / 3600}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--materials", type=int, default=6)
    ap.add_argument("--overhead-tasks", type=int, default=2000)
    ap.add_argument("--cells", type=int, default=150_000)
    ap.add_argument("--radii", type=int, default=25)
    ap.add_argument("--rotations", type=int, default=2_114)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--cores", type=int, default=64)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    m = measure(args.materials, args.overhead_tasks)
    con = Console(width=160)
    t = Table(title=f"evaluate, ID + OOD eval subsets of {m['store']['materials']} shipped materials "
                    f"(wall s; load average {m['machine']['load_average']:.1f} on {m['machine']['cpus']} CPUs)")
    for col in ("executor", "start s", "analytic carve", "random ball", "overhead ms / task"):
        t.add_column(col, justify="right")
    for r in m["runs"]:
        t.add_row(r["executor"], f"{r['start_s']:.1f}", f"{r['analytic carve']['wall_s']:.1f}",
                  f"{r['random ball']['wall_s']:.1f}", f"{r['overhead_ms_per_task']:.2f}")
    con.print(t)
    # atoms of a (material, R) particle averaged over R = 6..30 at the measured density
    st = m["store"]
    radii = np.arange(6, 31)
    mean_r3 = float(np.mean(radii ** 3))
    rec_radii = np.arange(6, 31)
    density = st["base_atoms"] / (st["materials"] * 4 / 3 * math.pi * float(np.sum(rec_radii ** 3)))
    apmr = density * 4 / 3 * math.pi * mean_r3
    e = estimate(m, cells=args.cells, radii=args.radii, rotations=args.rotations, nodes=args.nodes,
                 cores=args.cores, atoms_per_material_radius=apmr)
    con.print(f"estimate for {args.cells:,} cells x {args.radii} radii x {args.rotations:,} rotations "
              f"= {e['samples']:,} samples ({apmr:,.0f} atoms per sample on average), "
              f"{args.nodes} nodes x {args.cores} cores:")
    con.print(f"  store: {e['store_TB']:.2f} TB; build (carving): {e['build_cpu_hours']:,.1f} CPU h = "
              f"{e['build_wall_hours_on_cluster'] * 3600:.0f} s on the cluster")
    for model, v in e["models"].items():
        con.print(f"  evaluate every sample, {model}: {v['cpu_us_per_atom']:.2f} µs CPU per atom, "
                  f"{v['cpu_hours']:,.0f} CPU h = {v['compute_hours_on_cluster']:.1f} h of compute on the "
                  f"cluster; scheduler {v['scheduler_hours']:.1f} h for tasks of {TASK_SAMPLES} samples "
                  f"-> {v['wall_hours_on_cluster']:.1f} h")
    if args.json:
        args.json.write_text(json.dumps({"measured": m, "estimate": e}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
