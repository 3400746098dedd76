"""Ways to compute the exact pair histogram's candidate loop, ns per candidate pair
(issue 15; docs/evaluation.md, "Seventh pass").

Every variant sweeps the same column layout (``c2np.metrics.pair_histogram._column_layout``) of the six
R = 30 predictions of ``metrics_speed.quality_cases`` and must return the library's counts
(checked before timing). Variants:

- ``library``: this version (``c2np.metrics._pair_kernels.pair_sweep``): two passes, the run's
  coordinates as slices, two bins per increment of a bin-pair table.
- ``library, one bin per increment``: the same with the bin-pair table off.
- ``pair_distance_counts``: the library function, i.e. the kernel plus the column layout
  (NumPy sorts and searches) that every other row takes as given.
- ``indexed two-pass`` (the code before): coordinates loaded as ``x[j0 + q]``, for which
  numba emits a negative-index check per load (no contiguous vector loads), 8 histogram
  copies; ``slices two-pass``: the same with the run's coordinates as slices.

All but the two library rows take the runs (i, lo, hi) of a column and offset from one
helper (the library's pointer loop writing them into a scratch table), so that they differ
only in the candidate loop.
- ``fused sqrt``: one loop per run computing the squared distance, the bin and the
  increment (8 private sub-histograms, ``hist[j & 7]``), with slices.
- ``fused table``: one loop, no square root: the bin from an exact step table on d²
  (bucket ``int(d² · B / r²)``, at most one bin edge per bucket, the edge's exact d²
  found by bisection over the doubles with the library's own float operations).
- ``tiled``: the library's loop with i in blocks of 64 and j in tiles of 1,024 (the
  coordinates of a tile stay in L1).

CPU time of this process, median of ``--repeats`` (the variants take turns), and the
median of the per-repeat ratios to ``library``.

Run: ``PYTHONPATH=src OMP_NUM_THREADS=1 nice -n 10 python benchmarks/histogram_fused.py [--repeats 9]``
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

_jit = numba.njit(cache=False, nogil=True, boundscheck=False)


@_jit
def _runs(x2, starts, ends, nb_start, nb_end, window, c, k, out):
    """The runs (i, lo, hi) of every atom i of column c against neighbour offset k (the
    library's two sliding pointers) into the rows of ``out``; returns ``out[:n]``."""
    a0, a1 = starts[c], ends[c]
    b0, b1 = nb_start[c, k], nb_end[c, k]
    w = window[k]
    lo = b0
    hi = b0
    for i in range(a0, a1):
        if k == 0:
            lo = i + 1
        else:
            while lo < b1 and x2[lo] < x2[i] - w:
                lo += 1
        hi = max(hi, lo)
        while hi < b1 and x2[hi] <= x2[i] + w:
            hi += 1
        out[i - a0, 0] = i
        out[i - a0, 1] = lo
        out[i - a0, 2] = hi
    return out[:a1 - a0]


@_jit
def indexed_two_pass(x0, x1, x2, starts, ends, nb_start, nb_end, window, r2, scale, snap, hist, buf):
    discard = hist.shape[1] - 1
    scratch = np.empty((x0.shape[0], 3), dtype=np.int64)
    cap = buf.shape[0]
    fill = 0
    for c in range(starts.shape[0]):
        for k in range(window.shape[0]):
            if nb_start[c, k] == nb_end[c, k]:
                continue
            runs = _runs(x2, starts, ends, nb_start, nb_end, window, c, k, scratch)
            for r in range(runs.shape[0]):
                i, j0, hi = runs[r, 0], runs[r, 1], runs[r, 2]
                xi0, xi1, xi2 = x0[i], x1[i], x2[i]
                while j0 < hi:
                    m = min(hi - j0, cap - fill)
                    sub = buf[fill:fill + m]
                    for q in range(m):
                        j = j0 + q  # computed index: a negative-index check per load
                        d0 = x0[j] - xi0
                        d1 = x1[j] - xi1
                        d2 = x2[j] - xi2
                        s = d0 * d0
                        s += d1 * d1
                        s += d2 * d2
                        b = np.int32((math.sqrt(min(s, r2)) + snap) * scale)
                        sub[q] = b if s <= r2 else discard
                    fill += m
                    j0 += m
                    if fill == cap:
                        for q in range(fill):
                            hist[q & 7, buf[q]] += 1
                        fill = 0
    for q in range(fill):
        hist[q & 7, buf[q]] += 1


@_jit
def slices_two_pass(x0, x1, x2, starts, ends, nb_start, nb_end, window, r2, scale, snap, hist, buf):
    discard = hist.shape[1] - 1
    scratch = np.empty((x0.shape[0], 3), dtype=np.int64)
    cap = buf.shape[0]
    fill = 0
    for c in range(starts.shape[0]):
        for k in range(window.shape[0]):
            if nb_start[c, k] == nb_end[c, k]:
                continue
            runs = _runs(x2, starts, ends, nb_start, nb_end, window, c, k, scratch)
            for r in range(runs.shape[0]):
                i, j0, hi = runs[r, 0], runs[r, 1], runs[r, 2]
                xi0, xi1, xi2 = x0[i], x1[i], x2[i]
                while j0 < hi:
                    m = min(hi - j0, cap - fill)
                    sub = buf[fill:fill + m]
                    y0, y1, y2 = x0[j0:j0 + m], x1[j0:j0 + m], x2[j0:j0 + m]
                    for q in range(m):
                        d0 = y0[q] - xi0
                        d1 = y1[q] - xi1
                        d2 = y2[q] - xi2
                        s = d0 * d0
                        s += d1 * d1
                        s += d2 * d2
                        b = np.int32((math.sqrt(min(s, r2)) + snap) * scale)
                        sub[q] = b if s <= r2 else discard
                    fill += m
                    j0 += m
                    if fill == cap:
                        for q in range(fill):
                            hist[q & 7, buf[q]] += 1
                        fill = 0
    for q in range(fill):
        hist[q & 7, buf[q]] += 1


@_jit
def fused_sqrt(x0, x1, x2, starts, ends, nb_start, nb_end, window, r2, scale, snap, hist):
    discard = hist.shape[1] - 1
    scratch = np.empty((x0.shape[0], 3), dtype=np.int64)
    for c in range(starts.shape[0]):
        for k in range(window.shape[0]):
            if nb_start[c, k] == nb_end[c, k]:
                continue
            runs = _runs(x2, starts, ends, nb_start, nb_end, window, c, k, scratch)
            for r in range(runs.shape[0]):
                i, j0, hi = runs[r, 0], runs[r, 1], runs[r, 2]
                xi0, xi1, xi2 = x0[i], x1[i], x2[i]
                y0, y1, y2 = x0[j0:hi], x1[j0:hi], x2[j0:hi]
                for q in range(hi - j0):
                    d0 = y0[q] - xi0
                    d1 = y1[q] - xi1
                    d2 = y2[q] - xi2
                    s = d0 * d0
                    s += d1 * d1
                    s += d2 * d2
                    b = np.int32((math.sqrt(min(s, r2)) + snap) * scale)
                    hist[q & 7, b if s <= r2 else discard] += 1


@_jit
def fused_table(x0, x1, x2, starts, ends, nb_start, nb_end, window, r2, c_scale, thr, bins2, hist):
    discard = hist.shape[1] - 1
    scratch = np.empty((x0.shape[0], 3), dtype=np.int64)
    for c in range(starts.shape[0]):
        for k in range(window.shape[0]):
            if nb_start[c, k] == nb_end[c, k]:
                continue
            runs = _runs(x2, starts, ends, nb_start, nb_end, window, c, k, scratch)
            for r in range(runs.shape[0]):
                i, j0, hi = runs[r, 0], runs[r, 1], runs[r, 2]
                xi0, xi1, xi2 = x0[i], x1[i], x2[i]
                y0, y1, y2 = x0[j0:hi], x1[j0:hi], x2[j0:hi]
                for q in range(hi - j0):
                    d0 = y0[q] - xi0
                    d1 = y1[q] - xi1
                    d2 = y2[q] - xi2
                    s = d0 * d0
                    s += d1 * d1
                    s += d2 * d2
                    sc = min(s, r2)
                    bk = np.int32(sc * c_scale)
                    b = bins2[2 * bk + np.int32(sc >= thr[bk])]  # branch-free select
                    hist[q & 7, b if s <= r2 else discard] += 1


@_jit
def tiled(x0, x1, x2, starts, ends, nb_start, nb_end, window, r2, scale, snap, hist, buf):
    discard = hist.shape[1] - 1
    scratch = np.empty((x0.shape[0], 3), dtype=np.int64)
    cap = buf.shape[0]
    fill = 0
    for c in range(starts.shape[0]):
        for k in range(window.shape[0]):
            if nb_start[c, k] == nb_end[c, k]:
                continue
            runs = _runs(x2, starts, ends, nb_start, nb_end, window, c, k, scratch)
            for ib in range(0, runs.shape[0], 64):
                blk = runs[ib:ib + 64]
                jt = blk[0, 1]
                jmax = blk[:, 2].max()
                while jt < jmax:
                    for r in range(blk.shape[0]):
                        i = blk[r, 0]
                        xi0, xi1, xi2 = x0[i], x1[i], x2[i]
                        j0 = max(blk[r, 1], jt)
                        j1 = min(blk[r, 2], jt + 1024)
                        while j0 < j1:
                            m = min(j1 - j0, cap - fill)
                            sub = buf[fill:fill + m]
                            y0, y1, y2 = x0[j0:j0 + m], x1[j0:j0 + m], x2[j0:j0 + m]
                            for q in range(m):
                                d0 = y0[q] - xi0
                                d1 = y1[q] - xi1
                                d2 = y2[q] - xi2
                                s = d0 * d0
                                s += d1 * d1
                                s += d2 * d2
                                b = np.int32((math.sqrt(min(s, r2)) + snap) * scale)
                                sub[q] = b if s <= r2 else discard
                            fill += m
                            j0 += m
                            if fill == cap:
                                for q in range(fill):
                                    hist[q & 7, buf[q]] += 1
                                fill = 0
                    jt += 1024
    for q in range(fill):
        hist[q & 7, buf[q]] += 1


def step_table(r: float, n_bins: int, snap: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Exact bins from d² without a square root: ``(thr, bins2, c)``; bucket
    ``b = int(min(s, r²) · c)``, bin ``bins2[2b + (s >= thr[b])]`` equals
    ``int((sqrt(min(s, r²)) + snap) · n_bins / r)`` for every double s <= r²."""
    r2 = (r + snap) ** 2
    scale = n_bins / r

    def f(s: float) -> int:
        return int(np.int32((np.sqrt(min(s, r2)) + snap) * scale))

    def first_at_least(v: int) -> float:  # bisection over the ordered non-negative doubles
        lo, hi = 0, int(np.float64(r2).view(np.int64))
        while lo < hi:
            mid = (lo + hi) // 2
            if f(float(np.int64(mid).view(np.float64))) >= v:
                hi = mid
            else:
                lo = mid + 1
        return float(np.int64(lo).view(np.float64))

    edges = []  # (smallest d² of a bin, that bin)
    cur = f(0.0)
    while f(r2) > cur:
        t = first_at_least(cur + 1)
        cur = f(t)
        edges.append((t, cur))
    nb = 1 << max(4, math.ceil(math.log2(n_bins * n_bins / 2)))
    while len({int(t * (nb / r2)) for t, _ in edges}) < len(edges):
        nb *= 2  # at most one edge per bucket
    c = nb / r2
    thr = np.full(nb + 1, np.inf)
    bins2 = np.empty(2 * (nb + 1), dtype=np.int32)
    cur, e = f(0.0), 0
    for b in range(nb + 1):
        bins2[2 * b] = cur
        if e < len(edges) and int(edges[e][0] * c) == b:
            thr[b], cur = edges[e]
            e += 1
        bins2[2 * b + 1] = cur
    return thr, bins2, c


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args(argv)
    import os

    from c2np.metrics import RDF_N_BINS, RDF_R_MAX_ANGSTROM
    from c2np.metrics import pair_histogram as metrics
    from c2np.metrics.pair_histogram import EDGE_SNAP_ANGSTROM, _column_layout
    from metrics_speed import perovskite, quality_cases

    r, n_bins, snap = RDF_R_MAX_ANGSTROM, RDF_N_BINS, EDGE_SNAP_ANGSTROM
    r2, scale = (r + snap) ** 2, n_bins / r
    thr, bins2, c_scale = step_table(r, n_bins, snap)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"step table {len(thr)} buckets")
    _, cases = quality_cases(perovskite(), 30.0)
    for name, (_, x) in cases.items():
        lay = _column_layout(np.asarray(x, dtype=np.float64), r, None)
        xs, rest = lay[0], lay[1:]
        cols = tuple(np.ascontiguousarray(xs[:, d]) for d in range(3))

        def own(kernel, *extra, cols=cols, rest=rest):
            def run() -> np.ndarray:
                h = np.zeros((8, n_bins + 2), dtype=np.int64)
                kernel(*cols, *rest, *extra, h)
                return h
            return run

        def with_buf(kernel, cols=cols, rest=rest):
            def run() -> np.ndarray:
                h = np.zeros((8, n_bins + 2), dtype=np.int64)
                kernel(*cols, *rest, r2, scale, snap, h, np.empty(8192, dtype=np.int32))
                return h
            return run

        def library(paired: bool, cols=cols, rest=rest):
            def run() -> np.ndarray:  # the library's kernel on the same layout
                v = n_bins + 2
                h = np.zeros((8, v), dtype=np.int64)
                pairs = np.zeros((2, v * v if paired else 0), dtype=np.int64)
                metrics._pair_sweep_kernel()(*cols, *rest, r2, scale, snap, h, pairs,
                                             np.empty(8192, dtype=np.int32),
                                             np.empty(4096, dtype=np.int32), -1)
                if paired:
                    p = pairs.sum(axis=0).reshape(v, v)
                    h[0] += p.sum(axis=0) + p.sum(axis=1)
                return h
            return run

        def whole(x=x):  # pair_distance_counts: the column layout (NumPy) and the kernel
            return lambda: metrics.pair_distance_counts(x)

        variants = {"library": library(True), "library, one bin per increment": library(False),
                    "pair_distance_counts (layout + library)": whole(),
                    "indexed two-pass": with_buf(indexed_two_pass),
                    "slices two-pass": with_buf(slices_two_pass),
                    "fused sqrt": own(fused_sqrt, r2, scale, snap),
                    "fused table": own(fused_table, r2, c_scale, thr, bins2),
                    "tiled": with_buf(tiled)}
        ref = variants["pair_distance_counts (layout + library)"]()
        for label, fn in variants.items():
            h = fn()
            got = h if h.ndim == 1 else h.sum(axis=0)[:n_bins].copy()
            if h.ndim == 2:
                got[n_bins - 1] += h.sum(axis=0)[n_bins]
            assert np.array_equal(got, ref), (name, label)
        scratch = np.empty((len(x), 3), dtype=np.int64)
        n_cand = 0
        for c in range(len(rest[0])):
            for k in range(len(rest[4])):
                if rest[2][c, k] != rest[3][c, k]:
                    runs = _runs(cols[2], *rest, c, k, scratch)
                    n_cand += int(np.sum(np.maximum(runs[:, 2] - runs[:, 1], 0)))
        times: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(args.repeats):
            for label, fn in variants.items():
                t = time.process_time()
                fn()
                times[label].append(time.process_time() - t)
        print(f"\n{name}: {len(x)} atoms, {n_cand / 1e6:.2f} M candidate pairs, "
              f"{int(ref.sum()) / 1e6:.2f} M within {r:g} Å (counts identical in every variant)")
        for label, ts in times.items():
            ratio = statistics.median(a / b for a, b in zip(ts, times["library"]))
            ms = statistics.median(ts) * 1e3
            print(f"  {label:40s} {ms:8.1f} ms  {ms * 1e6 / n_cand:6.2f} ns/candidate  "
                  f"x{ratio:.2f} of library")
    return 0


if __name__ == "__main__":
    sys.exit(main())
