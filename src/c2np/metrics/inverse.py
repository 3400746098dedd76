"""Task-2 (inverse) metrics (contract §7): predicted lattice parameters (a, b, c in Å,
alpha, beta, gamma in degrees) and space group against the target, the standardized
conventional cell. An unusable prediction is a failure scored by :func:`inverse_failure`
(every metric at its documented penalty)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from c2np.lattice import LATTICE_PARAMETER_NAMES, LatticeParameters
from c2np.metrics.registry import MAX_COORDINATE_ANGSTROM, Metric, MetricInfo, Scores

__all__ = [
    "InverseTarget",
    "inverse_metric_info",
    "inverse_metrics",
    "inverse_failure",
    "inverse_penalties",
    "check_inverse_prediction",
    "permutation_invariant_lattice_rmse",
]

_PARAMS = LATTICE_PARAMETER_NAMES
_AXIS_PERMUTATIONS = ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))


@dataclass(frozen=True)
class InverseTarget:
    """Task-2 target of a material: the standardized conventional cell's lattice parameters
    and space group (built by :func:`c2np.tasks.inverse_target`).

    Attributes:
        parameters: a, b, c (Å), alpha, beta, gamma (degrees).
        spacegroup: international number 1..230.
    """

    parameters: LatticeParameters
    spacegroup: int

    @property
    def params(self) -> np.ndarray:
        """(6,) a, b, c, alpha, beta, gamma."""
        return self.parameters.as_array()

    def to_dict(self) -> dict[str, float | int]:
        """JSON form: ``a_angstrom`` ... ``gamma_deg`` and ``spacegroup``."""
        return {**vars(self.parameters), "spacegroup": int(self.spacegroup)}


def inverse_metric_info() -> dict[str, MetricInfo]:
    """The aggregated task-2 metrics, in display order (:class:`Metric`)."""
    return {m.value: m.info for m in Metric if m.task == "inverse"}


def permutation_invariant_lattice_rmse(pred: np.ndarray, target: np.ndarray) -> float:
    """Smallest six-number RMSE over the 6 axis permutations of the prediction, each axis
    moved together with its opposite angle (α with a, β with b, γ with c)."""
    p = np.asarray(pred, dtype=np.float64)
    t = np.asarray(target, dtype=np.float64)
    best = math.inf
    for perm in _AXIS_PERMUTATIONS:
        q = np.concatenate([p[list(perm)], p[[3 + i for i in perm]]])
        best = min(best, float(np.sqrt(np.mean((q - t) ** 2))))
    return best


def _inverse_values(pred: np.ndarray, sg_pred: int, target: InverseTarget, *,
                    length_tol_angstrom: float, angle_tol_deg: float,
                    length_rel_tol: float) -> dict[str, float]:
    from c2np.cells import bravais_lattice, crystal_system

    t = target.params
    err = np.abs(pred - t)
    sg_ok = int(sg_pred) == int(target.spacegroup)
    paper_ok = sg_ok and bool(np.all(err[:3] <= length_tol_angstrom)) and bool(
        np.all(err[3:] <= angle_tol_deg))
    strict_ok = sg_ok and bool(np.all(err[:3] <= length_rel_tol * t[:3])) and bool(
        np.all(err[3:] <= angle_tol_deg))
    values = {
        "spacegroup_accuracy": float(sg_ok),
        "crystal_system_accuracy": float(crystal_system(sg_pred) == crystal_system(target.spacegroup)),
        "bravais_accuracy": float(bravais_lattice(sg_pred) == bravais_lattice(target.spacegroup)),
        "joint_accuracy_paper": float(paper_ok),
        "joint_accuracy_strict": float(strict_ok),
        "length_rmse": float(np.sqrt(np.mean(err[:3] ** 2))),
        "angle_rmse": float(np.sqrt(np.mean(err[3:] ** 2))),
        "lattice_rmse_paper": float(np.sqrt(np.mean(err ** 2))),
        "lattice_rmse_perm_invariant": permutation_invariant_lattice_rmse(pred, t),
    }
    for i, p in enumerate(_PARAMS):
        values[f"abs_error_{p}"] = float(err[i])
    return values


def inverse_penalties(target: InverseTarget) -> dict[str, float]:
    """Value of every task-2 metric for a failed sample: accuracies 0, length errors the
    target length (predicting 0 Å), angle errors ``max(θ, 180° − θ)`` (the largest error a
    valid angle can have); the RMSEs follow from these parameter errors."""
    t = target.params
    err = np.concatenate([t[:3], np.maximum(t[3:], 180.0 - t[3:])])
    values = {
        "spacegroup_accuracy": 0.0, "crystal_system_accuracy": 0.0, "bravais_accuracy": 0.0,
        "joint_accuracy_paper": 0.0, "joint_accuracy_strict": 0.0,
        "length_rmse": float(np.sqrt(np.mean(err[:3] ** 2))),
        "angle_rmse": float(np.sqrt(np.mean(err[3:] ** 2))),
        "lattice_rmse_paper": float(np.sqrt(np.mean(err ** 2))),
        "lattice_rmse_perm_invariant": float(np.sqrt(np.mean(err ** 2))),
    }
    for i, p in enumerate(_PARAMS):
        values[f"abs_error_{p}"] = float(err[i])
    return values


def inverse_failure(reason: str, target: InverseTarget) -> Scores:
    """Scores of an unusable task-2 prediction: every metric at its penalty value."""
    return Scores(values=inverse_penalties(target), ok=False, failure_reason=reason)


def check_inverse_prediction(params: Sequence[float] | np.ndarray | None,
                             spacegroup: float | int | None) -> str | None:
    """Why a task-2 prediction cannot be scored, or None when it can."""
    if params is None or spacegroup is None:
        return "missing prediction"
    p = np.asarray(params, dtype=np.float64).reshape(-1)
    if p.shape != (6,):
        return f"expected 6 lattice parameters, got {p.shape[0]}"
    if not np.all(np.isfinite(p)):
        return "non-finite lattice parameter"
    if np.any(p[:3] <= 0):
        return "non-positive lattice length"
    if np.any(p[3:] <= 0) or np.any(p[3:] >= 180):
        return "lattice angle outside (0, 180) degrees"
    if np.any(p[:3] > MAX_COORDINATE_ANGSTROM):
        return f"lattice length beyond {MAX_COORDINATE_ANGSTROM:g} Å"
    if not LatticeParameters.from_array(p).is_valid():
        return "the angles close no cell (e.g. 170°, 170°, 170°)"
    sg = float(spacegroup)
    if not math.isfinite(sg) or sg != int(sg) or not 1 <= int(sg) <= 230:
        return f"space group {spacegroup!r} outside 1..230"
    return None


def inverse_metrics(params: Sequence[float] | np.ndarray | None,
                    spacegroup: float | int | None, target: InverseTarget, *,
                    length_tol_angstrom: float = 0.5, angle_tol_deg: float = 0.5,
                    length_rel_tol: float = 0.01) -> Scores:
    """All task-2 metrics of one prediction (a, b, c in Å, alpha, beta, gamma in degrees,
    space-group number) against ``target``; an unusable one returns :func:`inverse_failure`.

    Joint accuracy (paper): space group right and every |Δlength| <= ``length_tol_angstrom``
    and every |Δangle| <= ``angle_tol_deg``. Strict: space group right, every
    |Δlength| <= ``length_rel_tol`` · target length, every |Δangle| <= ``angle_tol_deg``.
    """
    reason = check_inverse_prediction(params, spacegroup)
    if reason is not None:
        return inverse_failure(reason, target)
    p = np.asarray(params, dtype=np.float64).reshape(6)
    values = _inverse_values(p, int(float(spacegroup)), target,  # type: ignore[arg-type]
                             length_tol_angstrom=length_tol_angstrom, angle_tol_deg=angle_tol_deg,
                             length_rel_tol=length_rel_tol)
    bad = [k for k, v in values.items() if not math.isfinite(v)]
    if bad:
        return inverse_failure(f"metric {bad[0]} is not finite", target)
    return Scores(values=values)
