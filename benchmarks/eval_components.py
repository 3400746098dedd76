"""Where a task-1 sample's CPU time goes, per radius, on a real store and predictions file
(docs/evaluation.md, "Sixth pass").

For one rotation of every k-th (material, R) group of the file's samples, the steps of
``c2np.metrics.forward_metrics`` are timed one by one with the library's own functions (CPU
time of this process): the reference particle from the store, the all-atom nearest
neighbours both ways (Hausdorff, Chamfer), per element the grid + nearest neighbours + close
pairs, the matched RMSD's assignment and the two F1 matchings, the hull, the pair
histogram; then ``forward_metrics`` itself (so "other" = its time minus the steps) and the
reference summary of the group (once per group: shown divided by 8 rotations). The
table gives ms per sample and, weighted by the samples of each radius in the file, the
estimated CPU seconds of the whole file.

    PYTHONPATH=src python benchmarks/eval_components.py STORE PREDICTIONS.h5 [--every 4]
"""

from __future__ import annotations

import argparse
import collections
import functools
import time
from collections.abc import Callable
from typing import Any

import numpy as np

STEPS = ("reference particle", "NN both ways", "element grid + NN + pairs", "matched RMSD",
         "F1 matchings", "hull", "pair histogram", "other (forward_metrics)", "summary / 8")


def _cpu(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.process_time()
    out = fn()
    return (time.process_time() - t) * 1e3, out


def sample_steps(scorer: Any, row: int, zp: np.ndarray, xp: np.ndarray) -> dict[str, float]:
    """CPU ms of each step of scoring one sample (see the module docstring)."""
    from c2np.assignment import PointGrid, close_pairs, min_sq_assignment, nearest_neighbours
    from c2np.metrics import hull_volume_angstrom3, pair_distance_counts
    from c2np.metrics.matching import _matching_size

    ms: dict[str, float] = collections.defaultdict(float)
    ms["summary / 8"], summary = _cpu(lambda: scorer.summary(row))
    ms["summary / 8"] /= 8.0
    ms["reference particle"], ref = _cpu(lambda: scorer.store.particle(row))
    zg, xg = ref.numbers.astype(np.int64), ref.positions_angstrom.astype(np.float64)
    ms["NN both ways"], _ = _cpu(lambda: (nearest_neighbours(xp, xg), nearest_neighbours(xg, xp)))
    tol = max(scorer.tol)
    for z in np.intersect1d(np.unique(zp), np.unique(zg)):
        a, b = xp[zp == z], xg[zg == z]
        small, large = (a, b) if len(a) <= len(b) else (b, a)

        def prep(small: np.ndarray = small, large: np.ndarray = large) -> Any:
            grid = PointGrid.build(large, min_side=tol * (1.0 + 1e-6))
            return nearest_neighbours(small, large, grid=grid), close_pairs(small, grid, tol)

        t_prep, ((d1, j1), (si, lj, dv)) = _cpu(prep)
        ms["element grid + NN + pairs"] += t_prep
        ms["matched RMSD"] += _cpu(functools.partial(min_sq_assignment, small, large,
                                                     nearest=(d1, j1)))[0]
        ns, nl = len(small), len(large)
        t0 = time.process_time()
        for tau in scorer.tol:
            _matching_size(si[dv < tau], lj[dv < tau], ns, nl)
        ms["F1 matchings"] += (time.process_time() - t0) * 1e3
    ms["hull"], _ = _cpu(lambda: hull_volume_angstrom3(xp))
    ms["pair histogram"], _ = _cpu(lambda: pair_distance_counts(xp))
    total, _ = _cpu(lambda: scorer.score(row, zp, xp))
    ms["other (forward_metrics)"] = total - sum(ms[k] for k in STEPS[1:7])
    ms["total"] = total + ms["summary / 8"]
    return ms


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("predictions")
    ap.add_argument("--every", type=int, default=4, help="time every k-th material's groups")
    args = ap.parse_args(argv)
    import os

    from rich.console import Console
    from rich.table import Table

    from c2np.evaluation.harness import _ForwardScorer, compile_metric_kernels
    from c2np.predictions import iter_forward_predictions
    from c2np.store import DatasetStore
    from c2np.tasks import _store_ids

    store = DatasetStore.open(args.store)
    ids = _store_ids(store)
    t = store.recipes
    compile_metric_kernels()
    scorer = _ForwardScorer(store, (0.1, 0.5))
    per_r: dict[int, list[dict[str, float]]] = collections.defaultdict(list)
    n_r: collections.Counter[int] = collections.Counter()
    seen: set[tuple[int, int]] = set()
    load0 = os.getloadavg()[0]
    for _place, sid, zp, xp in iter_forward_predictions(args.predictions):
        row = ids[sid]
        key = (int(t.material_index[row]), int(t.radius_angstrom[row]))
        n_r[key[1]] += 1
        if key in seen or key[0] % args.every:
            continue
        seen.add(key)
        per_r[key[1]].append(sample_steps(scorer, row, np.asarray(zp, dtype=np.int64),
                                          np.asarray(xp, dtype=np.float64)))
    table = Table(title=f"CPU ms per sample by step ({args.predictions}; one rotation of every "
                        f"{args.every}th material's groups; load {load0:.1f} -> {os.getloadavg()[0]:.1f})")
    table.add_column("step")
    radii = sorted(per_r)
    for r in radii:
        table.add_column(f"R {r}", justify="right")
    table.add_column("file total s", justify="right")
    table.add_column("share", justify="right")
    tot = {k: sum(np.mean([m[k] for m in per_r[r]]) * n_r[r] for r in radii) / 1e3
           for k in (*STEPS, "total")}
    for k in (*STEPS, "total"):
        table.add_row(k, *[f"{np.mean([m[k] for m in per_r[r]]):.2f}" for r in radii],
                      f"{tot[k]:.1f}", f"{tot[k] / tot['total']:.0%}")
    Console(width=220).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
