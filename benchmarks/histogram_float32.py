"""A float32 first pass for the exact pair histogram, tried and not adopted (issue 15,
fourth pass; docs/evaluation.md).

This CPU (AMD EPYC, AVX2, no AVX-512) computes 4 float64 or 8 float32 lanes at once, so
the pair sweep of :func:`c2np.metrics.pair_distance_counts` was tried with the bins computed
in float32 from centred coordinates: a pair whose float32 bin value lies within a proven
bound of an integer (a bin edge, or r_max) is recomputed in float64 as pdist does, so the
histogram equals the float64 one exactly (checked here on every case). The bound is proved
in :func:`_float32_tolerance`. Candidate runs shorter than ``_FLOAT32_MIN_RUN`` stay float64
(vector remainders), longer ones go in blocks of ``_FLOAT32_BLOCK``; a block with a flagged
pair is redone in float64.

Prints, per R = 30 quality case of ``metrics_speed.quality_cases`` (and the reference),
the CPU ms of the library's float64 sweep and of this one, as the median of per-repeat
ratios (the two run in turn, so machine load affects both alike), and whether the counts
are identical.

Run: ``PYTHONPATH=src nice -n 10 python benchmarks/histogram_float32.py [--repeats 21]``
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from c2np.metrics import (  # noqa: E402
    _HIST_COPIES,
    _SWEEP_BUFFER,
    EDGE_SNAP_ANGSTROM,
    RDF_N_BINS,
    RDF_R_MAX_ANGSTROM,
    _column_layout,
    pair_distance_counts,
)

_U32 = 2.0 ** -24  # unit roundoff of float32
_U64 = 2.0 ** -53  # unit roundoff of float64
_FLOAT32_MIN_RUN = 64  # shorter runs of candidates are binned in float64 (vector remainders)
_FLOAT32_BLOCK = 64  # float32 pass per block; a block with a pair near an edge is redone in float64
_FLOAT32_TOL_LIMIT = 0.01  # above this tolerance (bins) an atom's pairs are binned in float64


def _gamma(k: int, u: float) -> float:
    """Higham's γ_k = k u / (1 − k u): bound of the relative error of k roundings."""
    return k * u / (1.0 - k * u)


def _float32_tolerance(*, scale: float, n_bins: int) -> tuple[float, float]:
    """``(a, b)``: the float32 pass of :func:`_pair_sweep` recomputes a pair (i, j) in float64
    when its float32 bin value ``v32`` lies within ``a · A_i + b`` (bins) of an integer,
    where ``A_i = max_k |y_ik|`` (Å) is atom i's largest centred float32 coordinate, and
    every pair of atom i when that tolerance exceeds ``_FLOAT32_TOL_LIMIT``.

    The bound (unit roundoffs u = 2⁻²⁴ of float32, w = 2⁻⁵³ of float64; S = n_bins / r the
    float64 scale; t = x_j − x_i the exact difference of the float64 coordinates, ‖t‖ its
    length; c the centre of the box, z = x − c exactly):

    1. *Coordinates*: y = fl32(fl64(z)), so |y_k − z_k| <= (u + 2w)|z_k| and
       |z_k| <= |y_k| / (1 − u − 2w). For a pair, |z_jk| <= |z_ik| + ‖t‖, so the two
       coordinate errors add up to at most δ = (u + 2w)(2 Z_i + ‖t‖), Z_i = A_i / (1 − u − 2w).
    2. *Differences*: e_k = fl32(y_jk − y_ik) = (y_jk − y_ik)(1 + ε), |ε| <= u, so
       |e_k − t_k| <= δ(1 + u) + u|t_k|, and by the triangle inequality on vectors
       |‖e‖ − ‖t‖| <= ‖e − t‖ <= √3 δ (1 + u) + u‖t‖.
    3. *Squares and sums* of non-negative terms: s32 = ‖e‖²(1 + θ), |θ| <= γ₃ (at most three
       roundings per term; a fused multiply-add only removes roundings).
    4. *Square root and scale*: v32 = fl32(fl32(√s32) · fl32(S)) = ‖e‖ S (1 + ρ) with
       |ρ| <= (1 + γ₃)(1 + u)³ − 1 =: β (|√(1 + θ) − 1| <= |θ|).
    So |v32 − ‖t‖ S| <= α Z_i + β' ‖t‖ S with α = 2√3 k S (1 + β), β' = (√3 k + u)(1 + β) + β,
    k = (u + 2w)(1 + u). The float64 value the exact sweep bins, v64 = fl((fl(√s64) + ε) S)
    (ε = ``EDGE_SNAP_ANGSTROM``), has |v64 − (‖t‖ + ε) S| <= γ₁₆(w)(‖t‖ + ε) S. For
    ‖t‖ S <= V = n_bins + 3: |v32 − v64| <= α Z_i + β' V + ε S + γ₁₆(w)(V + ε S). The
    tolerance adds 4 ε S + 64 w V (the float64 test s64 <= r2 = fl((r + ε)²) agrees with
    v64 < n_bins outside that margin), 2⁻²⁵ (the distance to the nearest integer,
    ½ − |f − ½| with f = v32 − floor(v32), is computed in float32) and a factor 1 + 10⁻⁶ for
    the rounding of this computation; the kernel rounds it up to float32.

    Hence a pair that is not flagged has floor(v32) = floor(v64) (v64 lies strictly inside the
    same bin), and v32 < n_bins exactly when s64 <= r2. A pair with ‖t‖ S > V has
    v32 >= ‖t‖ S (1 − β') − α Z_i > n_bins + 2 whenever the tolerance is below
    ``_FLOAT32_TOL_LIMIT``, and is discarded either way (so is one clamped at ``cap32``,
    whose v32 is about n_bins + 2.5).
    """
    u, w = _U32, _U64
    k = (u + 2.0 * w) * (1.0 + u)
    beta = (1.0 + _gamma(3, u)) * (1.0 + u) ** 3 - 1.0
    b = (math.sqrt(3.0) * k + u) * (1.0 + beta) + beta
    v = n_bins + 3.0
    snap_s = EDGE_SNAP_ANGSTROM * scale
    alpha = 2.0 * math.sqrt(3.0) * k * scale * (1.0 + beta) / (1.0 - u - 2.0 * w)
    const = (b * v + snap_s + _gamma(16, w) * (v + snap_s) + 4.0 * snap_s + 64.0 * w * v
             + 2.0 ** -25)
    return alpha * (1.0 + 1e-6), const * (1.0 + 1e-6)


def _pair_sweep(x0: np.ndarray, x1: np.ndarray, x2: np.ndarray, y0: np.ndarray,
                y1: np.ndarray, y2: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                nb_start: np.ndarray, nb_end: np.ndarray, window: np.ndarray, r2: float,
                scale: float, snap: float, scale32: np.float32, cap32: np.float32,
                tol_a: float, tol_b: float, hist: np.ndarray, buf: np.ndarray) -> None:
    """Add every candidate pair to ``hist`` (compiled by numba; see pair_distance_counts).

    Atoms are sorted by (column, z); ``x*`` are their float64 coordinates, ``y*`` the
    centred float32 ones. Column ``c`` spans ``starts[c]:ends[c]``; its neighbour column
    under offset k spans ``nb_start[c, k]:nb_end[c, k]`` (offset 0 is the column itself:
    only later atoms). A pair beyond ``sqrt(r2)`` goes to the discarded bin ``n_bins + 1``.
    Two passes: the bins of a run of candidates are written into ``buf`` (int32) by a loop
    without branches or scattered writes, which the compiler vectorises (8 lanes of
    float32); a pair whose float32 value lies within the proven tolerance of a bin edge
    (:func:`_float32_tolerance`) is marked -1 and recomputed in float64 as ``pdist`` does,
    so every bin equals the float64 one. When ``buf`` is full its bins are counted into
    ``hist``, whose 8 rows (``_HIST_COPIES``) take consecutive increments (entry t counts
    in row ``t & 7``).
    """
    n_bins = hist.shape[1] - 2
    discard = n_bins + 1
    cap = buf.shape[0]
    fill = 0
    for c in range(starts.shape[0]):
        a0 = starts[c]
        a1 = ends[c]
        for k in range(window.shape[0]):
            b0 = nb_start[c, k]
            b1 = nb_end[c, k]
            if b0 == b1:
                continue
            w = window[k]
            lo = b0
            hi = b0
            for i in range(a0, a1):
                xi0 = x0[i]
                xi1 = x1[i]
                xi2 = x2[i]
                if k == 0:
                    lo = i + 1
                else:
                    t = xi2 - w
                    while lo < b1 and x2[lo] < t:
                        lo += 1
                if hi < lo:
                    hi = lo
                t = xi2 + w
                while hi < b1 and x2[hi] <= t:
                    hi += 1
                yi0 = y0[i]
                yi1 = y1[i]
                yi2 = y2[i]
                tol = tol_a * max(abs(yi0), abs(yi1), abs(yi2)) + tol_b
                exact = not tol <= _FLOAT32_TOL_LIMIT  # also inf / nan: float32 overflow
                tol32 = np.float32(tol * (1.0 + 2.0 ** -20) if not exact else 0.0)
                j0 = lo
                while j0 < hi:
                    m = min(hi - j0, cap - fill)
                    sub = buf[fill:fill + m]
                    q0 = 0
                    while q0 < m:  # blocks: float32 where the run is long, float64 where needed
                        redo = exact or m < _FLOAT32_MIN_RUN
                        q1 = m if redo else min(q0 + _FLOAT32_BLOCK, m)
                        blk = sub[q0:q1]
                        jb = j0 + q0
                        if not redo:
                            for q in range(q1 - q0):
                                j = jb + q
                                e0 = y0[j] - yi0
                                e1 = y1[j] - yi1
                                e2 = y2[j] - yi2
                                s32 = e0 * e0
                                s32 += e1 * e1
                                s32 += e2 * e2
                                v = np.sqrt(min(s32, cap32)) * scale32
                                b = np.int32(v)
                                f = v - np.float32(b)  # exact
                                o = b if b < n_bins else discard
                                near = np.float32(0.5) - abs(f - np.float32(0.5)) < tol32
                                blk[q] = -1 if near else o
                            lowest = 0
                            for q in range(q1 - q0):
                                lowest = min(lowest, blk[q])
                            redo = lowest < 0
                        if redo:  # float64, as pdist computes the distance
                            for q in range(q1 - q0):
                                j = jb + q
                                d0 = x0[j] - xi0
                                d1 = x1[j] - xi1
                                d2 = x2[j] - xi2
                                s = d0 * d0
                                s += d1 * d1
                                s += d2 * d2
                                # min(): the conversion stays in range for discarded pairs
                                b = np.int32((math.sqrt(min(s, r2)) + snap) * scale)
                                blk[q] = b if s <= r2 else discard
                        q0 = q1
                    fill += m
                    j0 += m
                    if fill == cap:
                        for q in range(fill):
                            hist[q & 7, buf[q]] += 1
                        fill = 0
    for q in range(fill):
        hist[q & 7, buf[q]] += 1


def pair_distance_counts_float32(positions_angstrom: np.ndarray, *,
                                 r_max_angstrom: float = RDF_R_MAX_ANGSTROM,
                                 n_bins: int = RDF_N_BINS) -> np.ndarray:
    """:func:`c2np.metrics.pair_distance_counts` with the float32 first pass (same counts)."""
    import numba

    x = np.asarray(positions_angstrom, dtype=np.float64)
    if len(x) < 2:
        return np.zeros(n_bins, dtype=np.int64)
    r = float(r_max_angstrom)
    xs, starts, ends, nb_start, nb_end, window = _column_layout(x, r, None)
    r2 = (r + EDGE_SNAP_ANGSTROM) ** 2
    scale = n_bins / r
    ys = np.ascontiguousarray((xs - 0.5 * (xs.min(axis=0) + xs.max(axis=0))).T, dtype=np.float32)
    tol_a, tol_b = _float32_tolerance(scale=scale, n_bins=n_bins)
    cap32 = np.float32(((n_bins + 2.5) / scale) ** 2)  # beyond it: v32 about n_bins + 2.5
    hist = np.zeros((_HIST_COPIES, n_bins + 2), dtype=np.int64)
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = numba.njit(nogil=True, boundscheck=False)(_pair_sweep)
    _KERNEL(np.ascontiguousarray(xs[:, 0]), np.ascontiguousarray(xs[:, 1]),
            np.ascontiguousarray(xs[:, 2]), ys[0], ys[1], ys[2], starts, ends, nb_start, nb_end,
            window, r2, scale, EDGE_SNAP_ANGSTROM, np.float32(scale), cap32, tol_a, tol_b, hist,
            np.empty(_SWEEP_BUFFER, dtype=np.int32))
    out = hist.sum(axis=0)
    out[n_bins - 1] += out[n_bins]
    return out[:n_bins].copy()


_KERNEL = None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=21)
    args = ap.parse_args(argv)
    from metrics_speed import perovskite, quality_cases

    g, cases = quality_cases(perovskite(), 30.0)
    cases = {"reference (carved)": (g.numbers, g.positions_angstrom), **cases}
    rng = np.random.default_rng(5)
    for n, spread in ((300, 3.0), (2000, 12.0), (500, 400.0)):  # exactness only
        x = rng.uniform(-spread, spread, size=(n, 3))
        assert np.array_equal(pair_distance_counts_float32(x), pair_distance_counts(x))
    lattice = rng.integers(-8, 9, size=(3000, 3)) * 1.25  # many pairs exactly on bin edges
    assert np.array_equal(pair_distance_counts_float32(lattice), pair_distance_counts(lattice))
    print(f"{'case':36s} {'float64 ms':>10s} {'float32 ms':>10s} {'ratio':>6s} identical")
    for name, (_, x) in cases.items():
        a, b = pair_distance_counts(x), pair_distance_counts_float32(x)
        t64, t32, ratios = [], [], []
        for _ in range(args.repeats):
            t = time.process_time()
            pair_distance_counts(x)
            t1 = time.process_time()
            pair_distance_counts_float32(x)
            t2 = time.process_time()
            t64.append(t1 - t)
            t32.append(t2 - t1)
            ratios.append((t2 - t1) / (t1 - t))
        print(f"{name:36s} {statistics.median(t64) * 1e3:10.1f} {statistics.median(t32) * 1e3:10.1f} "
              f"{statistics.median(ratios):6.3f} {np.array_equal(a, b)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
