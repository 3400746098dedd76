"""Pair-distance histograms of task 1: the counts of atom pairs per distance bin
(:func:`pair_distance_counts`, a compiled sweep over columns of the sorted positions, with
the tuning that chooses how bins are counted) and the pair-distance error built on them."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from c2np.assignment import bounding_box
from c2np.metrics.registry import RDF_N_BINS, RDF_R_MAX_ANGSTROM

__all__ = [
    "EDGE_SNAP_ANGSTROM",
    "TooManyPairs",
    "pair_distance_counts",
    "pair_distance_error",
]

EDGE_SNAP_ANGSTROM: float = 1e-9


class TooManyPairs(ValueError):
    """More atom pairs within the histogram range than allowed (``max_pairs`` of
    :func:`pair_distance_counts`); ``pairs_counted``: the count when counting stopped."""

    def __init__(self, pairs_counted: int, max_pairs: int) -> None:
        super().__init__(f"more than {max_pairs} atom pairs within the histogram range")
        self.pairs_counted = pairs_counted
        self.max_pairs = max_pairs


def pair_distance_counts(positions_angstrom: np.ndarray, *,
                         r_max_angstrom: float = RDF_R_MAX_ANGSTROM,
                         n_bins: int = RDF_N_BINS,
                         column_angstrom: float | None = None,
                         max_pairs: int | None = None) -> np.ndarray:
    """Histogram of all unordered pair distances ``d_ij`` (i < j) on ``[0, r_max]`` Å.

    Returns ``(n_bins,)`` int64 counts; bin k holds ``k Δ <= d + ε < (k + 1) Δ`` with
    ``Δ = r_max / n_bins``, i.e. bin index ``floor((d + ε) · n_bins / r_max)``, and the last
    bin is closed (it also holds ``d + ε`` up to ``r_max + 2ε``). ``ε = 1e-9`` Å snaps lattice
    distances that lie exactly on a bin edge (e.g. 10 Å) to the same bin in every
    orientation, whatever the rounding of rotated coordinates; otherwise this is numpy's
    ``histogram(pdist(x), n_bins, (0, r_max))``.

    Exact: every distance is computed in float64 in the order ``pdist`` uses, but only pairs
    that can be within ``r_max`` are visited. Atoms are sorted into xy columns of width
    ``column_angstrom`` (default about ``r_max / 2``) and by z within a column; for each pair of
    columns close enough to hold a pair, the candidates of each atom are one run in z,
    found with two sliding pointers. The sweep is a compiled (numba) loop, built on first
    use and cached on disk; for dense clouds (about 1,000 pairs per atom or more, up to 254
    bins) it counts two pairs' bins with one increment of a table of bin pairs
    (docs/decisions/0030-matched-rmsd-certified-gap.md).

    ``max_pairs``: when more pairs than this lie within ``r_max``, :class:`TooManyPairs` is
    raised; the sweep checks its count as it goes (every 65,536 candidates) and stops once
    past the limit, so a dense cloud costs about ``max_pairs`` distances instead of ``n²/2``.
    """
    x = np.asarray(positions_angstrom, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"pair_distance_counts: positions must have shape (n, 3), got {x.shape}")
    n = len(x)
    if n < 2:
        return np.zeros(n_bins, dtype=np.int64)
    if not np.all(np.isfinite(x)):
        raise ValueError("pair_distance_counts: positions must be finite")
    r = float(r_max_angstrom)
    xs, starts, ends, nb_start, nb_end, window = _column_layout(x, r, column_angstrom)
    r2 = (r + EDGE_SNAP_ANGSTROM) ** 2
    x0, x1, x2 = (np.ascontiguousarray(xs[:, d]) for d in range(3))
    v = n_bins + 2
    hist = np.zeros((_HIST_COPIES, v), dtype=np.int64)
    paired = v <= _PACKED_MAX_VALUES and _pairs_per_atom(x, r) >= _PACKED_MIN_PAIRS_PER_ATOM
    pairs = np.zeros((2, v * v if paired else 0), dtype=np.int64)
    limit = -1 if max_pairs is None else max(int(max_pairs), 0)
    seen = int(_pair_sweep_kernel()(x0, x1, x2, starts, ends, nb_start, nb_end, window, r2, n_bins / r,
                                    EDGE_SNAP_ANGSTROM, hist, pairs,
                                    np.empty(_SWEEP_BUFFER, dtype=np.int32),
                                    np.empty(_SWEEP_BUFFER // 2, dtype=np.int32), limit))
    if seen > limit >= 0:
        raise TooManyPairs(seen, limit)
    out = hist.sum(axis=0)
    if paired:  # cell a · v + b of `pairs` holds pairs of bins (a, b): both count
        p = pairs.sum(axis=0).reshape(v, v)
        out += p.sum(axis=0) + p.sum(axis=1)
    inside = int(out[:n_bins + 1].sum())
    if inside > limit >= 0:
        raise TooManyPairs(inside, limit)
    out[n_bins - 1] += out[n_bins]  # d == r_max exactly: closed right edge
    return out[:n_bins].copy()


def _column_layout(x: np.ndarray, r: float, column_angstrom: float | None
                   ) -> tuple[np.ndarray, ...]:
    """The candidate runs of :func:`pair_distance_counts` for ``(n, 3)`` float64 positions
    (n >= 2) and range ``r`` (Å): ``(xs, starts, ends, nb_start, nb_end, window)``, the
    positions sorted by (column, z), each column's span, its neighbour columns' spans per
    offset and the largest |dz| of a pair per offset (the arguments of
    :func:`c2np.metrics._pair_kernels.pair_sweep`)."""
    n = len(x)
    lo, hi, amax = bounding_box(x)
    extent = hi - lo
    # cell assignment and z windows are rounded: widen every window by a proven margin
    margin = 64.0 * float(np.spacing(amax + float(extent.max()) + r)) + 1e-9
    reach = r + EDGE_SNAP_ANGSTROM + margin
    # default: columns of half the reach, 5 x 5 neighbour columns (measured fastest)
    h = float(column_angstrom) if column_angstrom is not None else reach / 2.0
    h = max(h, float(extent[:2].max()) / 2.0 ** 20)  # at most 2^20 columns along x and y
    m = int(math.ceil(reach / h))
    cxy = np.floor((x[:, :2] - lo[:2]) / h).astype(np.int64)
    ny = int(cxy[:, 1].max()) + 2 * m + 1
    col = cxy[:, 0] * ny + (cxy[:, 1] + m)  # offsets |dy| <= m never wrap to another row
    order = np.lexsort((x[:, 2], col))
    xs = x[order]
    ucols, starts = np.unique(col[order], return_index=True)
    ends = np.append(starts[1:], n)
    offsets = [(0, 0)] + [(dx, dy) for dx in range(0, m + 1) for dy in range(-m, m + 1)
                          if dx > 0 or dy > 0]
    gap2 = np.array([(max(abs(dx) - 1, 0) ** 2 + max(abs(dy) - 1, 0) ** 2) * h * h
                     for dx, dy in offsets])
    keep = gap2 <= reach * reach
    off = np.array(offsets, dtype=np.int64)[keep]
    window = np.sqrt(reach * reach - gap2[keep])  # largest |dz| of a pair, per offset
    target = ucols[:, None] + (off[:, 0] * ny + off[:, 1])[None, :]
    pos = np.minimum(np.searchsorted(ucols, target), len(ucols) - 1)
    found = ucols[pos] == target
    nb_start = np.where(found, starts[pos], 0)
    nb_end = np.where(found, ends[pos], 0)
    return xs, starts, ends, nb_start, nb_end, window


_HIST_COPIES = 8  # interleaved histogram copies (row t & 7): increments do not wait on each other
_SWEEP_BUFFER = 8192  # bins computed before they are counted (32 KiB of int32)
_PACKED_MIN_PAIRS_PER_ATOM = 1000.0  # estimated; below, bins are counted one by one
_PACKED_MAX_VALUES = 256  # bin values v = n_bins + 2 up to which two bins share an increment


def _pairs_per_atom(x: np.ndarray, r: float) -> float:
    """Rough number of pairs within ``r`` per atom of the ``(n, 3)`` positions: half the atoms
    times the share of a sphere of radius r in the bounding box (each side at least r).
    Only chooses how the bins are counted, never the counts."""
    lo, hi, _ = bounding_box(x)
    box = float(np.prod(np.maximum(hi - lo, r)))
    return 0.5 * len(x) * min(1.0, 4.0 / 3.0 * math.pi * r ** 3 / box)


@functools.cache
def _pair_sweep_kernel() -> Callable[..., int]:
    """The compiled sweep (:func:`c2np.metrics._pair_kernels.pair_sweep`, numba), imported on first
    use. The machine code is cached on disk (``__pycache__`` beside that file, else
    ``NUMBA_CACHE_DIR`` or the user cache); where no cache folder is writable it is
    compiled once per process instead."""
    from c2np.metrics import _pair_kernels

    return _pair_kernels.pair_sweep

def pair_distance_error(counts_pred: np.ndarray, n_pred: int, counts_ref: np.ndarray,
                        n_ref: int) -> float:
    """Pair-distance distribution error in [0, 1]: with per-atom neighbour histograms
    ``a_k = 2 c_P,k / n_P`` and ``b_k = 2 c_G,k / n_G`` (mean neighbours per atom in shell k),
    ``Σ|a − b| / (Σa + Σb)``. 0 for identical distributions, 1 when nothing overlaps (or
    the prediction has no pairs)."""
    a = 2.0 * np.asarray(counts_pred, dtype=np.float64) / max(int(n_pred), 1)
    b = 2.0 * np.asarray(counts_ref, dtype=np.float64) / max(int(n_ref), 1)
    denom = float(a.sum() + b.sum())
    if denom == 0:
        return 0.0
    return float(np.abs(a - b).sum() / denom)

