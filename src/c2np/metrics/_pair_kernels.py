"""Compiled pair-distance sweep of :func:`c2np.metrics.pair_histogram.pair_distance_counts` (numba).

Imported on the first histogram (it imports numba); the machine code is cached on disk
beside this file (or in ``NUMBA_CACHE_DIR``) where a cache folder is writable.
"""

from __future__ import annotations

import math

import numpy as np

from c2np._jit import _jit


@_jit
def count_bins(buf: np.ndarray, fill: int, hist: np.ndarray, pairs: np.ndarray,
               packed: np.ndarray) -> None:
    """Count the bins ``buf[:fill]`` (int32, each in ``0 .. v − 1`` with ``v = hist.shape[1]``).

    With ``pairs`` of shape ``(2, v²)`` two bins become one increment: ``buf[q]`` and
    ``buf[q + half]`` (``half = fill // 2``) count as cell ``buf[q] · v + buf[q + half]``
    of ``pairs`` (row ``q & 1``), whose row and column sums give the bins back; the packing
    is one vectorised loop, so every pair costs half an increment. An odd last bin, and
    every bin when ``pairs`` has no columns, goes to ``hist`` (row ``q & 7``: consecutive
    increments of one bin do not wait on each other)."""
    v = hist.shape[1]
    half = fill // 2 if pairs.shape[1] > 0 else 0
    for q in range(half):
        packed[q] = buf[q] * v + buf[q + half]
    for q in range(half):
        pairs[q & 1, packed[q]] += 1
    single = buf[2 * half:fill]  # a slice: indexed from 0, no negative-index checks
    for q in range(single.shape[0]):
        hist[q & 7, single[q]] += 1


@_jit
def pair_sweep(x0: np.ndarray, x1: np.ndarray, x2: np.ndarray, starts: np.ndarray,
               ends: np.ndarray, nb_start: np.ndarray, nb_end: np.ndarray, window: np.ndarray,
               r2: float, scale: float, snap: float, hist: np.ndarray, pairs: np.ndarray,
               buf: np.ndarray, packed: np.ndarray, limit: int) -> int:
    """Add every candidate pair's bin to ``hist`` / ``pairs`` (see pair_distance_counts).

    Atoms are sorted by (column, z). Column ``c`` spans ``starts[c]:ends[c]``; its
    neighbour column under offset k spans ``nb_start[c, k]:nb_end[c, k]`` (offset 0 is the
    column itself: only later atoms). A pair beyond ``sqrt(r2)`` goes to the discarded bin
    ``n_bins + 1``. Two passes: the bins of a run of candidates are written into ``buf``
    (int32) by a loop without branches or scattered writes, which the compiler vectorises
    (the run's coordinates are taken as slices, whose indices numba knows to be >= 0: with
    a computed index ``j0 + q`` it emits a negative-index check per load, and the loads
    are no longer contiguous vector loads); when ``buf`` is full it is counted by
    :func:`count_bins` (``packed`` holds its half-length scratch).

    ``limit`` >= 0: every 8th time the buffer is counted, the pairs within ``sqrt(r2)`` so
    far (the counted bins less the discarded ones, read from ``hist`` and ``pairs``) are
    compared with it, and the sweep stops once they exceed it, returning their number (so
    a dense cloud costs about ``limit`` pairs, not all of them); otherwise returns -1 (the
    counts are complete).
    """
    n_bins = hist.shape[1] - 2
    discard = n_bins + 1
    cap = buf.shape[0]
    v = hist.shape[1]
    fill = 0
    flushes = 0
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
                j0 = lo
                while j0 < hi:
                    m = min(hi - j0, cap - fill)
                    sub = buf[fill:fill + m]
                    y0 = x0[j0:j0 + m]
                    y1 = x1[j0:j0 + m]
                    y2 = x2[j0:j0 + m]
                    for q in range(m):
                        d0 = y0[q] - xi0
                        d1 = y1[q] - xi1
                        d2 = y2[q] - xi2
                        s = d0 * d0
                        s += d1 * d1
                        s += d2 * d2
                        # min(): the conversion stays in range for pairs that are discarded
                        b = np.int32((math.sqrt(min(s, r2)) + snap) * scale)
                        sub[q] = b if s <= r2 else discard
                    fill += m
                    j0 += m
                    if fill == cap:
                        count_bins(buf, fill, hist, pairs, packed)
                        fill = 0
                        flushes += 1
                        if limit >= 0 and flushes % 8 == 0:
                            inside = flushes * cap - _discarded(hist, pairs, discard, v)
                            if inside > limit:
                                return inside
    count_bins(buf, fill, hist, pairs, packed)
    return -1


@_jit
def _discarded(hist: np.ndarray, pairs: np.ndarray, discard: int, v: int) -> int:
    """How many counted bins are ``discard``: its column of ``hist`` and, in ``pairs``
    (cells ``a · v + b``), its row and its column (a cell (discard, discard) holds two)."""
    total = 0
    for t in range(hist.shape[0]):
        total += hist[t, discard]
    if pairs.shape[1] > 0:
        for t in range(pairs.shape[0]):
            for b in range(v):
                total += pairs[t, discard * v + b] + pairs[t, b * v + discard]
    return total

