"""Path 4 of the assignment: sets that differ in centre or size (a prediction of the wrong
size or place) solved on the smaller set mapped onto the larger one's centroid and RMS
radius, valued and certified in the original coordinates through an exact identity of the
pair costs."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from c2np.assignment.auction import _sparse_assignment
from c2np.assignment.grid import _kernels, nearest_neighbours
from c2np.assignment.result import (
    EXACT_RTOL,
    FAR_REL_GAP,
    AssignmentResult,
    _far_rule,
    _pair_sum,
    _sum_above,
    _sum_below,
)

#: the smaller set's centroid farther from the larger set's than this share of the larger of
#: the two RMS radii, or its RMS radius this far (relative) from the larger set's, and the
#: pairing is solved in aligned coordinates (a random ball's elements stay below both)
ALIGN_SHIFT_REL = 0.1
ALIGN_SCALE_REL = 0.05
#: sets that differ strongly (:data:`STRONG_SHIFT_REL`, :data:`STRONG_SCALE_REL`) are solved aligned first, and that
#: result is reported when it is exact or far off (its RMSD bound at least
#: ``far_rmsd_angstrom``) with its RMSD value within this share of its bound; a mild
#: mismatch is solved as the sets are first, and aligned only when that leaves a gap the far
#: rule does not accept (so it never reports worse than before). When the first result is
#: not accepted, the better value and bound of the two are reported
ALIGN_ACCEPT_REL_GAP = FAR_REL_GAP  # the same share
#: a strong mismatch: centroids this share of the larger RMS radius apart, or RMS radii this
#: far apart (relative)
STRONG_SHIFT_REL = 0.3
STRONG_SCALE_REL = 0.15


def _alignment(small: np.ndarray, large: np.ndarray
               ) -> tuple[float, np.ndarray, np.ndarray, bool] | None:
    """``(s, c_s, c_l, strong)``: the smaller set's RMS radius over the larger set's, the two
    centroids (Å) and whether the mismatch is strong (:data:`STRONG_SHIFT_REL`,
    :data:`STRONG_SCALE_REL`), when the sets differ by more than :data:`ALIGN_SHIFT_REL` of
    the larger RMS radius in centre or :data:`ALIGN_SCALE_REL` in size (else None: solved as
    they are)."""
    kern = _kernels()
    c_s, rms_s = kern.centroid_rms(small)
    c_l, rms_l = kern.centroid_rms(large)
    if not (rms_s > 0.0 and rms_l > 0.0 and math.isfinite(rms_s / rms_l)):
        return None
    scale = rms_s / rms_l
    shift = float(np.linalg.norm(c_s - c_l)) / max(rms_s, rms_l)
    if shift <= ALIGN_SHIFT_REL and abs(scale - 1.0) <= ALIGN_SCALE_REL:
        return None
    return scale, c_s, c_l, shift > STRONG_SHIFT_REL or abs(scale - 1.0) > STRONG_SCALE_REL


def _aligned_assignment(small: np.ndarray, large: np.ndarray, scale: float, c_s: np.ndarray,
                        c_l: np.ndarray, *, accept_rel_gap: float | None = None,
                        **opts: Any) -> AssignmentResult:
    """The pairing solved with the smaller set mapped onto the larger one's centre and size,
    ``z = c_l + (x − c_s) / s``, valued and certified in the original coordinates.

    With ``f(y) = (s − 1)|y − c_l|² + 2 (c_s − c_l)·(y − c_l)`` and
    ``g(x) = |x − c_l|² − |x − c_s|² / s``, every pair cost is
    ``|x − y|² = s |y − z|² + g(x) − f(y)`` (an identity). So a pairing π costs
    ``s Σ|y_π − z|² + Σg − Σ_{j∈π} f(y_j)``: with equal set sizes the two problems have the
    same optimal pairings, and a certified bound L' of the aligned problem gives the
    certified bound ``s L' + Σg − (the n_s largest f)`` of the original one (less a rounding
    allowance). The value is the pairing's cost computed directly. Where the optimum moves
    atoms far (a prediction of the wrong size or place), the aligned sets overlap and the
    sparse graph holds the optimal pairs.

    ``accept_rel_gap`` (a strong mismatch's acceptance share, or None): the aligned solve
    stops as soon as the *original* problem's value and certified bound meet the far rule
    with that share (bound at least ``far_sum``, RMSD value within the share of the bound's),
    usually at the first greedy pairing: the aligned problem's own gap, scaled by ``s``, is a
    small part of a strong mismatch's cost, so an exact aligned optimum is not needed
    (docs/decisions/0030-matched-rmsd-certified-gap.md)."""
    ns, nl = len(small), len(large)
    z = c_l + (small - c_s) / scale
    r2_l = np.sum((small - c_l) ** 2, axis=1)
    g = r2_l - np.sum((small - c_s) ** 2, axis=1) / scale
    f = (scale - 1.0) * np.sum((large - c_l) ** 2, axis=1) + 2.0 * ((large - c_l) @ (c_s - c_l))
    top = np.partition(f, nl - ns)[nl - ns:] if ns < nl else f
    sum_g, top_above = _sum_below(g), _sum_above(top)
    base_magnitude = float(np.sum(np.abs(g))) + float(np.sum(np.abs(f))) + float(np.sum(r2_l))

    def original(cols: np.ndarray, inner_lb: float, dual: tuple[np.ndarray, np.ndarray] | None
                 ) -> tuple[float, float, float]:
        """Value, certified bound and exactness tolerance (Å²) of the original problem."""
        value = _pair_sum(small, large, cols)
        magnitude = scale * abs(inner_lb) + base_magnitude
        bound = scale * inner_lb + sum_g - top_above
        if dual is not None and ns < nl:
            # the aligned dual as prices of the original problem: P = s w + f gives
            # min_l (|x − l|² + P_l) = s u + g, hence the bound
            # s Σu + Σg + (n_l − n_s) min P − ΣP (module docstring)
            w, u = dual
            price = scale * w + f
            magnitude += scale * float(np.sum(np.abs(u))) + float(np.sum(np.abs(price)))
            bound = max(bound, scale * _sum_below(u) + sum_g + (nl - ns) * float(price.min())
                        - _sum_above(price))
        bound -= 1e-10 * magnitude
        bound = min(max(bound, 0.0), value)
        return value, bound, EXACT_RTOL * (1.0 + value) + 1e-10 * magnitude

    accept: Callable[[np.ndarray, float, tuple[np.ndarray, np.ndarray] | None], bool] | None = None
    far_sum = opts.get("far_sum")
    if accept_rel_gap is not None and far_sum is not None:
        rel = float(accept_rel_gap)

        def accept(cols: np.ndarray, inner_lb: float,
                   dual: tuple[np.ndarray, np.ndarray] | None) -> bool:
            value, bound, _ = original(cols, inner_lb, dual)
            return _far_rule(value, bound, far_sum, rel)

    d1, j1 = nearest_neighbours(z, large)
    dual: tuple[np.ndarray, np.ndarray] | None
    if int(np.bincount(j1, minlength=nl).max()) <= 1:
        cols, inner_lb, rounds, dual = j1, float(np.sum(d1 * d1)), 0, (np.zeros(nl), d1 * d1)
    else:
        inner, cols, dual = _sparse_assignment(z, large, d1, accept=accept, **opts)
        inner_lb, rounds = inner.lower_bound_angstrom2, inner.rounds
    value, bound, tol = original(cols, inner_lb, dual)
    return AssignmentResult(value, bound, ns, value - bound <= tol, tolerance_angstrom2=tol,
                            method="aligned", rounds=rounds)
