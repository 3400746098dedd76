"""The outcome of an assignment (:class:`AssignmentResult`) and the rules every path
shares: when a certified gap is accepted (the far rule) and sums rounded in a known
direction, so that the bounds stay certified."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["AssignmentResult", "EXACT_RTOL", "FAR_RMSD_ANGSTROM", "FAR_REL_GAP"]

EXACT_RTOL = 1e-9  # exact: bound within this relative tolerance of the value
FAR_RMSD_ANGSTROM = 1.0  # an element whose certified RMSD bound is at least this (Å) ...
FAR_REL_GAP = 5e-2  # ... stops once its RMSD value is within this share of the bound (decision 0030)


@dataclass(frozen=True)
class AssignmentResult:
    """Outcome of :func:`min_sq_assignment`.

    Attributes:
        sum_sq_angstrom2: Σ |s − l|² of the pairing found (an upper bound of the optimum).
        lower_bound_angstrom2: a certified lower bound of the optimum (Å²).
        n_pairs: number of pairs (``min(n_s, n_l)``).
        exact: True when the bound meets the value within ``tolerance_angstrom2`` (the value
            is then the optimum up to it).
        tolerance_angstrom2: allowance of the exactness test: ``1e-9 (1 + value)`` plus
            the integer rounding of the costs handed to the auction (``(n_s + 2) · unit``,
            unit a power of 2 Å² with the largest possible pair cost · (n_l + 1) <= 2^50).
        method: the path that found the value: ``"nearest"``, ``"dense"``, ``"greedy"`` (the
            sparse path's first pairing, accepted by the far rule of
            :func:`min_sq_assignment`), ``"auction"`` or ``"aligned"`` (the sparse path in
            coordinates aligned on centre and size).
        rounds: fine stages run (0 for the first two methods).
    """

    sum_sq_angstrom2: float
    lower_bound_angstrom2: float
    n_pairs: int
    exact: bool
    tolerance_angstrom2: float = 0.0
    method: str = "nearest"
    rounds: int = 0

    @property
    def gap_angstrom2(self) -> float:
        """Value minus lower bound (Å², >= 0)."""
        return max(0.0, self.sum_sq_angstrom2 - self.lower_bound_angstrom2)


def _far_rule(value: float, bound: float, far_sum: float | None, rel: float) -> bool:
    """The far rule (Å²): the certified ``bound`` is at least ``far_sum`` (None: never) and the
    RMSD of ``value`` is within ``rel`` (relative) of the bound's."""
    return far_sum is not None and bound >= far_sum and value <= max(bound, 0.0) * (1.0 + rel) ** 2


def _sum_below(x: np.ndarray) -> float:
    """A float no larger than the exact sum of the 1-D float64 array ``x``: numpy's pairwise
    sum less a bound of its rounding error, ``(log2 n + 24) eps Σ|x|`` (blocks of 128 in 8
    accumulators, then pairwise: at most ``log2 n + 13`` roundings per term). About 25x
    cheaper than ``math.fsum`` on the bounds' arrays (thousands of terms)."""
    a = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    n = len(a)
    if n == 0:
        return 0.0
    err = (math.log2(n) + 24.0) * float(np.finfo(np.float64).eps) * float(np.abs(a).sum())
    return float(a.sum()) - err


def _sum_above(x: np.ndarray) -> float:
    """A float no smaller than the exact sum of ``x`` (:func:`_sum_below` of ``-x``, negated)."""
    return -_sum_below(-np.asarray(x, dtype=np.float64))


def _pair_sum(small: np.ndarray, large: np.ndarray, cols: np.ndarray) -> float:
    d = small - large[cols]
    return float(np.einsum("ij,ij->", d, d))
