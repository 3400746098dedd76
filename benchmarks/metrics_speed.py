"""Speed of the task-1 metrics against the original metric code, side by side.

Original approach (per sample, as in the paper's pipeline): scipy ``directed_hausdorff``
both ways, ``pdist`` + ``numpy.histogram`` (128 bins on [0, 10] Å, density) of both
particles, ``ConvexHull`` of both. Ours: every task-1 metric of ``c2np.metrics`` (F1 at two
tolerances with maximum matching, matched RMSD, Hausdorff, Chamfer, hull, pair-distance
histogram, paper numbers) with the reference summary precomputed once per (material, R).

Particles: R = 30 Å spheres of a cubic perovskite ABH3 (a = 4.0 Å, about 8,700 atoms) in
several orientations; predictions are the reference with 0.05 Å Gaussian noise and 2 % of
atoms dropped. Also times ``evaluate_forward`` end to end on eval subsets.

Cost against prediction quality (``bench_quality``): the same R = 30 reference scored
against a good prediction, a noisy one, the random-ball baseline, a shifted, a collapsed
(a failed sample: denser than the ``prediction_neighbours`` limit), the
random ball shrunk to 0.6 R, a doubled prediction and the random ball with 2x and 4x the atoms
(twice and four times the density), with the matched RMSD of this version (``c2np.assignment``:
auction + LP-duality certificate) and of the previous one (LAPJVsp on a k-NN graph, kept
below as ``_old_assignment_sq`` for the comparison), as CPU-time medians and as ratios to
the good prediction.

Against an earlier version (``bench_against_previous``, ``--previous-src DIR``): every quality
case scored by this version and by the ``src`` folder DIR of an earlier checkout (e.g.
``git archive 4e0820e src | tar -x -C /tmp/prev``, DIR = ``/tmp/prev/src``), in two worker
processes that take turns case by case (all metrics, the matched RMSD alone, the pair
histogram, the hull), with the ratios and whether every metric but the matched RMSD is
identical. ``--e2e-only --store PATH [--predictions-dir DIR] [--results-dir DIR]``: the
end-to-end run on an existing store, keeping the prediction files for a later run (e.g.
the same command under ``PYTHONPATH=DIR``) and the results for a sample-by-sample comparison.

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
from scipy.spatial import cKDTree


def original_metrics(xp: np.ndarray, xg: np.ndarray) -> dict[str, float]:
    """The original metric code's work for one sample."""
    from scipy.spatial import ConvexHull
    from scipy.spatial.distance import directed_hausdorff, pdist

    haus = max(directed_hausdorff(xp, xg)[0], directed_hausdorff(xg, xp)[0])
    hp = np.histogram(pdist(xp), bins=128, range=(0, 10), density=True)[0]
    hg = np.histogram(pdist(xg), bins=128, range=(0, 10), density=True)[0]
    dv = abs(ConvexHull(xp).volume - ConvexHull(xg).volume)
    return {"hausdorff": haus, "rdf_energy": float(np.sum((hp - hg) ** 2)), "dv": dv}


# ----------------------------------------------------------------------------------------
# The previous matched-RMSD assignment (before c2np.assignment), for the comparison only
# ----------------------------------------------------------------------------------------
def _old_assignment_sq(small: np.ndarray, large: np.ndarray, large_tree: object,
                   d1: np.ndarray, j1: np.ndarray) -> tuple[float, int, bool]:
    """:func:`matched_sq_distances` given the smaller set's nearest neighbours (d1, j1)."""
    ns, nl = len(small), len(large)
    if len(np.unique(j1)) == ns:
        return float(np.sum(d1 * d1)), ns, True
    if ns * nl <= 250_000:
        from scipy.optimize import linear_sum_assignment
        from scipy.spatial.distance import cdist

        cost = cdist(small, large, "sqeuclidean")
        ri, ci = linear_sum_assignment(cost)
        return float(cost[ri, ci].sum()), ns, True
    small_tree = cKDTree(small, balanced_tree=False, compact_nodes=False)
    lb = float(np.sum(d1 * d1))  # no assignment costs less than every atom's nearest

    def solve(k: int) -> tuple[float, float] | None:
        """(optimal cost on the k-NN union graph, certificate bound), None if the graph
        has no full matching."""
        d, j = large_tree.query(small, k=k)  # type: ignore[attr-defined]
        d = d.reshape(ns, k)
        j = j.reshape(ns, k)
        kl = min(k, ns)
        _, il = small_tree.query(large, k=kl)  # type: ignore[attr-defined]
        rows = np.concatenate([np.repeat(np.arange(ns), k), il.reshape(-1)])
        cols = np.concatenate([j.reshape(-1), np.repeat(np.arange(nl), kl)])
        cost = _old_union_graph_cost(small, large, rows, cols)
        if cost is None:
            return None
        return cost, float(np.min(lb - d1 * d1 + d[:, -1] ** 2))

    k = min((6, 32)[0], nl)
    res = solve(k)
    while res is None and k < min((6, 32)[-1], nl):
        k = min(4 * k, (6, 32)[-1], nl)
        res = solve(k)
    if res is None:
        # no full matching among near neighbours: add one fallback edge per atom (i, i)
        kk = min((6, 32)[-1], nl)
        d, j = large_tree.query(small, k=kk)  # type: ignore[attr-defined]
        rows = np.concatenate([np.repeat(np.arange(ns), kk), np.arange(ns)])
        cols = np.concatenate([j.reshape(ns, kk).reshape(-1), np.arange(ns)])
        cost = _old_union_graph_cost(small, large, rows, cols)
        assert cost is not None  # (i, i) for all i is a full matching
        bound = float(np.min(lb - d1 * d1 + d.reshape(ns, kk)[:, -1] ** 2))
        return cost, ns, kk >= nl or bound >= cost - 1e-9 * (1.0 + cost)
    cost, bound = res
    tol = 1e-9 * (1.0 + cost)
    if k >= nl or bound >= cost - tol:
        return cost, ns, True
    k2 = min((6, 32)[-1], nl)
    if k2 > k:
        # a larger graph certifies for sure when the current cost already meets its bound
        d, _ = large_tree.query(small, k=k2)  # type: ignore[attr-defined]
        bound2 = float(np.min(lb - d1 * d1 + d.reshape(ns, k2)[:, -1] ** 2))
        if k2 >= nl or bound2 >= cost - tol:
            res2 = solve(k2)
            if res2 is not None and res2[0] <= cost:
                return res2[0], ns, True
    return cost, ns, False


def _old_union_graph_cost(small: np.ndarray, large: np.ndarray, rows: np.ndarray,
                      cols: np.ndarray) -> float | None:
    """Minimum Σ|s − l|² of a matching saturating ``small`` over the given edges (duplicates
    allowed), or None when no such matching exists."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching

    ns, nl = len(small), len(large)
    key = np.unique(rows.astype(np.int64) * nl + cols)
    r, c = key // nl, key % nl
    w = np.einsum("ij,ij->i", small[r] - large[c], small[r] - large[c])
    # The solver gets integer-valued costs (w in units of 2^-s Å², s <= 30, exact in
    # float64): with arbitrary float costs scipy's LAPJVsp can loop without end (seen on
    # feasible 1,800-atom graphs). Rounding moves the total of any matching by at most
    # ns · 2^-(s+1) Å²; the returned value is the exact float sum of the matching found.
    # +1 Å² offset: the solver treats 0 as "no edge"; every full matching has ns edges, so
    # a constant shift does not change which matching is optimal.
    wmax = float(w.max()) if len(w) else 0.0
    unit = 2.0 ** min(30, math.floor(40.0 - math.log2(wmax + 2.0)))
    graph = csr_matrix((np.rint(w * unit) + unit, (r, c)), shape=(ns, nl))
    try:
        ri, ci = min_weight_full_bipartite_matching(graph)
    except ValueError:
        return None
    return float(np.sum((small[ri] - large[ci]) ** 2))


def _old_min_sq_assignment(a, b, *, tree_a=None, tree_b=None, nearest=None, **_):
    """The previous method behind the new interface (value; bound = value when certified)."""
    from scipy.spatial import cKDTree

    from c2np.assignment import AssignmentResult

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if len(a) == 0 or len(b) == 0:
        return AssignmentResult(0.0, 0.0, 0, True)
    small, large, tree = (a, b, tree_b) if len(a) <= len(b) else (b, a, tree_a)
    tree = tree if tree is not None else cKDTree(large)
    d1, j1 = nearest if nearest is not None else tree.query(small, k=1)
    s, n, cert = _old_assignment_sq(small, large, tree, d1, j1)
    return AssignmentResult(s, s if cert else float(np.sum(np.asarray(d1) ** 2)), n, cert)


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
    from c2np.metrics import (
        ReferenceSummary,
        forward_metrics,
        hull_volume_angstrom3,
        matched_sq_distances,
        pair_distance_counts,
    )

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
        o_wall, o_cpu = _timed(lambda xp=xp, g=g: original_metrics(xp, g.positions_angstrom), max(3, repeats // 2))
        c_wall, c_cpu = _timed(lambda zp=zp, xp=xp, g=g: forward_metrics(zp, xp, g.numbers, g.positions_angstrom,
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



def quality_cases(cell, radius: float, seed: int = 0) -> tuple[object, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The reference particle at ``radius`` (a random orientation) and predictions of every
    quality: name -> (numbers, positions Å)."""
    from scipy.spatial.transform import Rotation

    from c2np.carving import carve

    rng = np.random.default_rng(seed)
    q = Rotation.random(random_state=seed + 1).as_quat()
    g = carve(cell, radius, quaternion=q if q[3] >= 0 else -q).particle
    z, x = g.numbers, g.positions_angstrom
    n = len(z)
    keep = rng.random(n) > 0.02
    cases = {"good (0.05 Å noise, 2 % dropped)": (z[keep], x[keep] + rng.normal(scale=0.05, size=(int(keep.sum()), 3)))}
    cases["noisy (0.35 Å noise)"] = (z, x + rng.normal(scale=0.35, size=x.shape))
    cases["shifted by 1.5 Å"] = (z, x + np.array([1.5, 0.0, 0.0]))
    # the random-ball baseline: round(density · 4/3 π R³) atoms, counts in the cell's proportions
    n_ball = int(round(cell.number_density_per_angstrom3 * 4.0 / 3.0 * math.pi * radius ** 3))
    comp = cell.composition()
    zs = np.array(sorted(comp))
    exact = np.array([comp[e] for e in zs]) * n_ball
    counts = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - counts))[: n_ball - counts.sum()]:
        counts[i] += 1

    def uniform_ball(m: int) -> np.ndarray:
        u = rng.normal(size=(m, 3))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        return u * radius * rng.random(m)[:, None] ** (1 / 3)

    cases["random ball (baseline)"] = (np.repeat(zs, counts), uniform_ball(n_ball))
    u = rng.normal(size=(n, 3))
    cases["collapsed (all within 1 Å)"] = (z, u / np.linalg.norm(u, axis=1, keepdims=True) * rng.random(n)[:, None])
    zb, xb = cases["random ball (baseline)"]
    cases["random ball shrunk to 0.6 R"] = (zb, 0.6 * xb)  # a particle of the wrong size
    cases["doubled (twice the atoms)"] = (np.concatenate([z, z]),
                                          np.concatenate([x, x + rng.normal(scale=0.7, size=x.shape)]))
    for k in (2, 4):  # the random ball with k times the atoms: k times the density
        cases[f"random ball, {k}x the atoms"] = (np.repeat(zb, k), uniform_ball(k * n_ball))
    return g, cases


def bench_quality(repeats: int, radius: float = 30.0) -> list[dict]:
    """CPU time of all task-1 metrics and of the matched RMSD alone (old and new) against
    prediction quality; prints a table and returns its rows."""
    from rich.console import Console
    from rich.table import Table

    from c2np.metrics import ReferenceSummary, forward_metrics
    from c2np.metrics import forward as metrics

    cell = perovskite()
    g, cases = quality_cases(cell, radius)
    ref = ReferenceSummary.from_particle(g.numbers, g.positions_angstrom, radius_angstrom=radius)
    new_assign = metrics.min_sq_assignment

    def run(zp, xp, old: bool):
        metrics.min_sq_assignment = _old_min_sq_assignment if old else new_assign
        try:
            return forward_metrics(zp, xp, g.numbers, g.positions_angstrom, reference=ref)
        finally:
            metrics.min_sq_assignment = new_assign

    def matched_only(zp, xp, old: bool) -> None:
        fn = _old_min_sq_assignment if old else new_assign
        for e in np.intersect1d(np.unique(zp), np.unique(g.numbers)):
            fn(xp[zp == e], g.positions_angstrom[g.numbers == e])

    for zp, xp in cases.values():  # compile / warm caches before timing
        run(zp, xp, False)
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeats):  # interleaved, so that load changes hit every case alike
        for name, (zp, xp) in cases.items():
            for key, fn in (("all new", lambda zp=zp, xp=xp: run(zp, xp, False)),
                            ("match new", lambda zp=zp, xp=xp: matched_only(zp, xp, False)),
                            ("all old", lambda zp=zp, xp=xp: run(zp, xp, True)),
                            ("match old", lambda zp=zp, xp=xp: matched_only(zp, xp, True))):
                if key.endswith("old") and "collapsed" in name and _ > 0:
                    continue  # the old method is slow there; once is enough
                t = time.process_time()
                fn()
                times.setdefault((name, key), []).append((time.process_time() - t) * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    good = next(iter(cases))
    table = Table(title=f"cost against prediction quality, R = {radius:g} Å, {g.n_atoms} reference atoms "
                        f"(CPU ms, median of {repeats}; ratio = / good prediction, same column)")
    for col in ("prediction", "atoms", "all metrics old", "ratio", "all metrics new", "ratio",
                "matched RMSD old", "matched RMSD new", "new / old", "matched RMSD (Å)", "exact", "gap (Å)"):
        table.add_column(col, justify="right")
    rows = []
    for name, (zp, xp) in cases.items():
        s = run(zp, xp, False)
        row = {"case": name, "atoms": len(zp), "all_old_ms": med[(name, "all old")],
               "all_new_ms": med[(name, "all new")], "match_old_ms": med[(name, "match old")],
               "match_new_ms": med[(name, "match new")], "matched_rmsd": s.values["matched_rmsd"],
               "exact": bool(s.details.get("matched_rmsd_certified", False)),
               "gap": s.details.get("matched_rmsd_gap", float("nan")), "failure": s.failure_reason}
        rows.append(row)
        table.add_row(name, str(len(zp)), f"{row['all_old_ms']:.0f}",
                      f"{row['all_old_ms'] / med[(good, 'all old')]:.1f}x", f"{row['all_new_ms']:.0f}",
                      f"{row['all_new_ms'] / med[(good, 'all new')]:.1f}x", f"{row['match_old_ms']:.0f}",
                      f"{row['match_new_ms']:.0f}", f"{row['match_new_ms'] / row['match_old_ms']:.2f}",
                      f"{row['matched_rmsd']:.4f}" if s.ok else "failed (limit)", str(row["exact"]),
                      f"{row['gap']:.1e}")
    Console(width=200).print(table)
    return rows


_WORKER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from metrics_speed import perovskite, quality_cases
from c2np.metrics import forward as metrics
from c2np.metrics import ReferenceSummary, forward_metrics, pair_distance_counts, hull_volume_angstrom3

radius = float(sys.argv[2])
g, cases = quality_cases(perovskite(), radius)
ref = ReferenceSummary.from_particle(g.numbers, g.positions_angstrom, radius_angstrom=radius)
xg, zg = g.positions_angstrom, g.numbers
for zp, xp in cases.values():  # compile / load the kernels, warm caches
    forward_metrics(zp, xp, zg, xg, reference=ref)
print(json.dumps(list(cases)), flush=True)
for line in sys.stdin:
    name, part = json.loads(line)
    zp, xp = cases[name]
    t = time.process_time()
    if part == "all":
        s = forward_metrics(zp, xp, zg, xg, reference=ref)
    elif part == "histogram":
        pair_distance_counts(xp)
    elif part == "hull":
        hull_volume_angstrom3(xp)
    else:  # the matched RMSD alone, every element
        for e in np.intersect1d(np.unique(zp), np.unique(zg)):
            metrics.min_sq_assignment(xp[zp == e], xg[zg == e])
    ms = (time.process_time() - t) * 1e3
    out = {"ms": ms}
    if part == "all":
        out.update(values=s.values, details={k: float(v) for k, v in s.details.items()})
    print(json.dumps(out), flush=True)
"""


def bench_against_previous(previous_src: str, repeats: int, radius: float = 30.0) -> list[dict]:
    """Every quality case scored by this version and by the one in ``previous_src`` (the
    ``src`` folder of an earlier checkout, e.g. ``git archive REV src | tar -x -C DIR``), in
    two worker processes that take turns case by case, so that the load of a shared machine
    hits both alike. CPU ms, medians of ``repeats``; prints the table and returns its rows."""
    import json
    import os
    import subprocess

    from rich.console import Console
    from rich.table import Table

    here = Path(__file__).resolve().parent
    srcs = {"previous": str(Path(previous_src).resolve()), "new": str(here.parent / "src")}
    procs = {}
    for label, src in srcs.items():
        env = dict(os.environ, PYTHONPATH=src, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   MKL_NUM_THREADS="1")
        procs[label] = subprocess.Popen([sys.executable, "-c", _WORKER, str(here), str(radius)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env=env)
    names = {label: json.loads(p.stdout.readline()) for label, p in procs.items()}
    cases = names["new"]

    def ask(label: str, name: str, part: str) -> dict:
        p = procs[label]
        p.stdin.write(json.dumps([name, part]) + "\n")
        p.stdin.flush()
        return json.loads(p.stdout.readline())

    parts = ("all", "matched", "histogram", "hull")
    times: dict[tuple[str, str, str], list[float]] = {}
    last: dict[tuple[str, str], dict] = {}
    for _ in range(repeats):
        for name in cases:
            for part in parts:
                for label in ("previous", "new"):
                    r = ask(label, name, part)
                    times.setdefault((label, name, part), []).append(r["ms"])
                    if part == "all":
                        last[(label, name)] = r
    for p in procs.values():
        p.stdin.close()
        p.wait()
    med = {k: statistics.median(v) for k, v in times.items()}
    table = Table(title=f"previous ({previous_src}) against this version, R = {radius:g} Å "
                        f"(CPU ms, median of {repeats}, interleaved; load average "
                        f"{os.getloadavg()[0]:.1f})")
    for col in ("prediction", "all metrics prev", "new", "new / prev", "matched RMSD prev", "new",
                "histogram prev", "new", "hull", "other (new)", "matched RMSD (Å) prev", "new",
                "new gap (Å)", "other metrics identical"):
        table.add_column(col, justify="right")
    rows = []
    for name in cases:
        a, b = last[("previous", name)], last[("new", name)]
        same = all(a["values"][k] == v for k, v in b["values"].items()
                   if k not in ("matched_rmsd", "paper_rmsd"))
        row = {"case": name, **{f"{lab}_{part}_ms": med[(lab, name, part)]
                                for lab in ("previous", "new") for part in parts},
               "previous_rmsd": a["values"]["matched_rmsd"], "new_rmsd": b["values"]["matched_rmsd"],
               # a failed sample (e.g. the density limit) has no matched-RMSD details
               "new_gap": b["details"].get("matched_rmsd_gap", math.nan),
               "new_certified": bool(b["details"].get("matched_rmsd_certified", False)),
               "others_identical": same}
        rows.append(row)
        other = row["new_all_ms"] - row["new_matched_ms"] - row["new_histogram_ms"] - row["new_hull_ms"]
        table.add_row(name, f"{row['previous_all_ms']:.1f}", f"{row['new_all_ms']:.1f}",
                      f"{row['new_all_ms'] / row['previous_all_ms']:.2f}",
                      f"{row['previous_matched_ms']:.1f}", f"{row['new_matched_ms']:.1f}",
                      f"{row['previous_histogram_ms']:.1f}", f"{row['new_histogram_ms']:.1f}",
                      f"{row['new_hull_ms']:.1f}", f"{other:.1f}",
                      f"{row['previous_rmsd']:.5f}", f"{row['new_rmsd']:.5f}",
                      f"{row['new_gap']:.1e}", "yes" if same else "NO")
    Console(width=220).print(table)
    return rows


def bench_end_to_end(n_materials: int, catalog: bool = False, *, workers: int = 2,
                     old: bool = False, store_path: str | None = None,
                     results_dir: str | None = None,
                     predictions_dir: str | None = None) -> list[dict]:
    """``ForwardTask.evaluate`` end to end (extxyz file -> results) on the ID and OOD eval
    subsets (paper protocol) for the analytic carve and the random ball, with ``workers``
    processes: wall time and CPU time of this process and its workers. ``old``: also with
    the previous matched-RMSD method."""
    import resource

    from rich.console import Console
    from rich.table import Table

    from c2np.baselines import analytic_carve, predict, random_ball
    from c2np.metrics import forward as metrics
    from c2np.predictions import write_forward_predictions
    from c2np.store import DatasetStore, build_store
    from c2np.tasks import ForwardTask

    if catalog:  # the shipped catalog (all of it when n_materials >= its size)
        from c2np.catalog import load_catalog

        cells = load_catalog()[:n_materials]
        n_materials = len(cells)
    else:
        cells = [perovskite(a=4.0 + 0.05 * i, name=f"ABH3_{i}") for i in range(n_materials)]
    con = Console(width=200)
    rows_out = []

    def cpu() -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        path = Path(store_path) if store_path else build_store(cells, Path(tmp) / "ds.h5", progress=False)
        t_build = time.perf_counter() - t
        store = DatasetStore.open(path)
        if store_path:
            n_materials = len(store.cells)
        files = {}
        keep = Path(predictions_dir) if predictions_dir else Path(tmp)
        keep.mkdir(parents=True, exist_ok=True)
        for model, make in (("analytic carve", analytic_carve), ("random ball", random_ball)):
            for split in ("id", "ood"):
                task = ForwardTask(store, split, "eval")
                f = keep / f"{model.replace(' ', '_')}_{split}.extxyz"
                if not (predictions_dir and f.is_file()):  # kept files are reused as they are
                    write_forward_predictions(f, predict(task, make))
                files[(model, split)] = (task, f)
        table = Table(title=f"evaluate_forward end to end, {n_materials} material(s), paper protocol, "
                            f"ID + OOD eval subsets, {workers} worker(s) (build: {t_build:.1f} s)")
        for col in ("predictions", "matched RMSD", "samples", "wall s", "CPU s (all processes)",
                    "CPU ms / sample", "not exact", "largest gap (Å)"):
            table.add_column(col, justify="right")
        versions = [("new", metrics.min_sq_assignment)] + ([("old", _old_min_sq_assignment)] if old else [])
        for label, fn in versions:
            for model in ("analytic carve", "random ball"):
                metrics.min_sq_assignment = fn  # forked workers inherit it
                try:
                    wall = cpu_s = 0.0
                    n = n_exact_fail = 0
                    gap = 0.0
                    for split in ("id", "ood"):
                        task, pred_path = files[(model, split)]
                        t, c = time.perf_counter(), cpu()
                        res = task.evaluate(pred_path, progress=False, workers=workers)
                        if results_dir:
                            res.write(Path(results_dir) / f"{label}_{model.replace(' ', '_')}_{split}.json")
                        wall += time.perf_counter() - t
                        cpu_s += cpu() - c
                        n += len(task)
                        assert res.n_failed == 0
                        d = res.to_dict() if hasattr(res, "to_dict") else res.data
                        n_exact_fail += int(d.get("matched_rmsd_uncertified", 0))
                        gap = max(gap, float(d.get("matched_rmsd_max_gap_angstrom", 0.0) or 0.0))
                finally:
                    metrics.min_sq_assignment = versions[0][1]
                row = {"model": model, "method": label, "samples": n, "wall_s": wall, "cpu_s": cpu_s,
                       "not_exact": n_exact_fail, "max_gap": gap}
                rows_out.append(row)
                table.add_row(model, label, str(n), f"{wall:.1f}", f"{cpu_s:.1f}", f"{cpu_s / n * 1e3:.0f}",
                              str(n_exact_fail), f"{gap:.1e}")
        con.print(table)
    return rows_out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--particles", type=int, default=3)
    ap.add_argument("--materials", type=int, default=1, help="materials in the end-to-end run")
    ap.add_argument("--catalog", action="store_true",
                    help="end-to-end run on the shipped catalog instead of synthetic perovskites")
    ap.add_argument("--quick", action="store_true", help="skip the end-to-end run")
    ap.add_argument("--workers", type=int, default=2, help="workers of the end-to-end run")
    ap.add_argument("--old", action="store_true",
                    help="end-to-end also with the previous matched-RMSD method (slow)")
    ap.add_argument("--quality-only", action="store_true",
                    help="only the cost-against-prediction-quality table")
    ap.add_argument("--previous-src", metavar="DIR",
                    help="only this version against the `src` folder DIR of an earlier one "
                         "(e.g. `git archive REV src | tar -x -C /tmp/prev`, DIR=/tmp/prev/src), "
                         "case by case in two interleaved worker processes")
    ap.add_argument("--store", metavar="PATH",
                    help="end-to-end run on this existing store (e.g. `c2np build -o PATH`) "
                         "instead of building one")
    ap.add_argument("--e2e-only", action="store_true", help="only the end-to-end run")
    ap.add_argument("--results-dir", metavar="DIR", help="write the end-to-end results files here")
    ap.add_argument("--predictions-dir", metavar="DIR",
                    help="keep the end-to-end prediction files here and reuse them when present")
    args = ap.parse_args(argv)
    import os

    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    if args.previous_src:
        bench_against_previous(args.previous_src, args.repeats)
        return 0
    if args.quality_only:
        bench_quality(args.repeats)
        return 0
    if args.e2e_only:
        bench_end_to_end(args.materials, args.catalog, workers=args.workers, old=args.old,
                         store_path=args.store, results_dir=args.results_dir,
                         predictions_dir=args.predictions_dir)
        return 0
    bench_particles(args.repeats, args.particles)
    bench_quality(args.repeats)
    if not args.quick:
        bench_end_to_end(args.materials, args.catalog, workers=args.workers, old=args.old,
                         store_path=args.store, results_dir=args.results_dir,
                         predictions_dir=args.predictions_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
