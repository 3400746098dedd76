"""Compiled kernels of the pair profiles of :mod:`c2np.models.inverse.ranking` (numba).

Imported on the first profile (it imports numba); the machine code is cached on disk beside
this file (or in ``NUMBA_CACHE_DIR``) where a cache folder is writable.
"""

from __future__ import annotations

import math

import numpy as np

from c2np._jit import _jit

#: Gaussian kernels are summed within this many smoothing widths of the pair distance (the
#: tail beyond it weighs below 3e-11 of the peak)
KERNEL_REACH_SIGMAS = 7.0


@_jit
def _add_gaussian(out: np.ndarray, k: int, d: float, w: float, width: float, smooth: float, reach: float,
                  delta: float, ratio_step: float) -> None:
    """Add to row ``k`` of ``out`` the weight ``w`` x the Gaussian (std ``smooth``) at distance
    ``d`` on the bins of ``width`` within ``reach`` of it, by the product recurrence of
    :func:`binned_kernel`."""
    n_bins = out.shape[1]
    lo = max(0, int(math.floor((d - reach) / width - 0.5)))
    hi = min(n_bins, int(math.ceil((d + reach) / width + 0.5)))
    if hi <= lo:
        return
    z = ((lo + 0.5) * width - d) / smooth
    g = math.exp(-0.5 * z * z)
    r = math.exp(-z * delta - 0.5 * delta * delta)
    for b in range(lo, hi):
        out[k, b] += w * g
        g *= r
        r *= ratio_step


@_jit
def binned_kernel(dist: np.ndarray, pair_index: np.ndarray, weight: np.ndarray, out: np.ndarray,
                  cutoff: float, smooth: float) -> None:
    """Add to ``out`` (n_types, n_bins) the Gaussian-smoothed (std ``smooth``) weights of pairs
    at distances ``dist`` (k,) of type ``pair_index`` (k,), on ``n_bins`` bins of width
    ``cutoff / n_bins`` (value: weight x the Gaussian density at the bin centre x the bin
    width), each within :data:`KERNEL_REACH_SIGMAS` of the distance.

    The Gaussian at consecutive bin centres is a product recurrence (``g_{b+1} = g_b r_b``,
    ``r_{b+1} = r_b exp(-delta^2)``, ``delta`` the bin width in widths of the kernel): two
    exponentials per pair instead of one per bin, equal to the direct sum within 1e-12
    relative."""
    width = cutoff / out.shape[1]
    norm = width / (smooth * math.sqrt(2.0 * math.pi))
    delta = width / smooth
    for q in range(dist.shape[0]):
        _add_gaussian(out, pair_index[q], dist[q], weight[q] * norm, width, smooth, KERNEL_REACH_SIGMAS * smooth,
                      delta, math.exp(-delta * delta))


@_jit
def _length(lat: np.ndarray, a: float, b: float, c: float) -> float:
    """|(a, b, c) L| in Å: the length of fractional vector (a, b, c) on lattice rows ``lat``."""
    x = a * lat[0, 0] + b * lat[1, 0] + c * lat[2, 0]
    y = a * lat[0, 1] + b * lat[1, 1] + c * lat[2, 1]
    z = a * lat[0, 2] + b * lat[1, 2] + c * lat[2, 2]
    return math.sqrt(x * x + y * y + z * z)


@_jit
def _near_shifts(lat: np.ndarray, shifts: np.ndarray, cut: float) -> np.ndarray:
    """Indices (in order) of the lattice translations that can hold a pair within ``cut``:
    ``|shift L| - D <= cut``, ``D`` the longest ``|(±1, ±1, ±1) L|`` (no difference of two
    fractional coordinates in [0, 1) reaches further), so the others are skipped exactly."""
    reach = 0.0
    for sa in (-1.0, 1.0):
        for sb in (-1.0, 1.0):
            reach = max(reach, _length(lat, 1.0, sa, sb))
    keep = np.empty(shifts.shape[0], dtype=np.int64)
    m = 0
    for s in range(shifts.shape[0]):
        if _length(lat, shifts[s, 0], shifts[s, 1], shifts[s, 2]) - reach <= cut:
            keep[m] = s
            m += 1
    return keep[:m]


@_jit
def cell_profile_kernel(lat: np.ndarray, frac: np.ndarray, slots: np.ndarray, pair_table: np.ndarray,
                        shifts: np.ndarray, cut: float, min_r: float, scale: float, weight: float,
                        out: np.ndarray, cutoff: float, smooth: float) -> None:
    """The pair profile of a periodic cell in one pass: every ordered pair (i, j, image) with
    ``min_r < |(f_j - f_i + shift) L| <= cut`` (as :func:`cell_pairs_kernel`, in its order)
    added to ``out`` (n_types, n_bins) at its distance / ``scale`` with ``weight``, in row
    ``pair_table[slots[i], slots[j]]`` (as :func:`binned_kernel`): no array of pairs is made."""
    n = frac.shape[0]
    width = cutoff / out.shape[1]
    norm = width / (smooth * math.sqrt(2.0 * math.pi))
    delta = width / smooth
    ratio_step = math.exp(-delta * delta)
    reach = KERNEL_REACH_SIGMAS * smooth
    w = weight * norm
    near = _near_shifts(lat, shifts, cut)
    for i in range(n):
        for j in range(n):
            d0 = frac[j, 0] - frac[i, 0]
            d1 = frac[j, 1] - frac[i, 1]
            d2 = frac[j, 2] - frac[i, 2]
            k = pair_table[slots[i], slots[j]]
            for s in near:
                r = _length(lat, d0 + shifts[s, 0], d1 + shifts[s, 1], d2 + shifts[s, 2])
                if r <= cut and r > min_r:
                    _add_gaussian(out, k, r / scale, w, width, smooth, reach, delta, ratio_step)


@_jit
def cell_pairs_kernel(lat: np.ndarray, frac: np.ndarray, shifts: np.ndarray, cut: float, min_r: float,
                      r_out: np.ndarray, i_out: np.ndarray, j_out: np.ndarray) -> int:
    """Ordered pairs (i, j, image) of a periodic cell with ``min_r < |(f_j - f_i + shift) L| <=
    cut``: their distances and atoms written to ``r_out``, ``i_out``, ``j_out`` (each of length
    n² x images at least); returns their number."""
    n = frac.shape[0]
    m = 0
    near = _near_shifts(lat, shifts, cut)
    for i in range(n):
        for j in range(n):
            d0 = frac[j, 0] - frac[i, 0]
            d1 = frac[j, 1] - frac[i, 1]
            d2 = frac[j, 2] - frac[i, 2]
            for s in near:
                r = _length(lat, d0 + shifts[s, 0], d1 + shifts[s, 1], d2 + shifts[s, 2])
                if r <= cut and r > min_r:
                    r_out[m] = r
                    i_out[m] = i
                    j_out[m] = j
                    m += 1
    return m
