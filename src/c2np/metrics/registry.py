"""The metric registry (contract §6-7): every aggregated metric of both tasks as a
:class:`Metric` member (name, task, unit, direction, failure penalty), the headline and
primary metrics of each task, the per-sample :class:`Scores` record and the constants
that define the metrics (F1 tolerances, pair-histogram range, prediction bounds)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "F1_TOLERANCES_ANGSTROM",
    "RDF_R_MAX_ANGSTROM",
    "RDF_N_BINS",
    "MAX_ATOMIC_NUMBER",
    "MAX_COORDINATE_ANGSTROM",
    "MetricInfo",
    "Metric",
    "HEADLINE",
    "PRIMARY",
    "f1_name",
    "Scores",
]

F1_TOLERANCES_ANGSTROM: tuple[float, ...] = (0.1, 0.5)
RDF_R_MAX_ANGSTROM: float = 10.0
RDF_N_BINS: int = 128
MAX_ATOMIC_NUMBER = 118

#: Coordinates and lattice lengths beyond this (Å) are not a prediction of a particle or a
#: crystal: the sample fails (their squares would overflow the metrics).
MAX_COORDINATE_ANGSTROM = 1e4


@dataclass(frozen=True)
class MetricInfo:
    """Description of one aggregated metric.

    Attributes:
        name: key in score dicts and results files.
        unit: e.g. ``"Å"``, ``"1"`` (dimensionless), ``"Å³"``.
        better: ``"lower"`` or ``"higher"``.
        penalty: how a failed sample is scored (human-readable rule).
        paper: True for the paper-compatible numbers.
    """

    name: str
    unit: str
    better: str
    penalty: str
    paper: bool = False


class Metric(str, Enum):
    """Every aggregated metric of both tasks: its name in score dicts and results files
    (the member's value), its unit, which direction is better and how a failure is scored.

    Task-1 precision / recall / F1 exist at any tolerance (:func:`f1_name`); the members are
    those at the default tolerances 0.1 Å and 0.5 Å.
    """

    def __new__(cls, name: str, task: str, unit: str, better: str, penalty: str,
                paper: bool = False) -> Metric:
        obj = str.__new__(cls, name)
        obj._value_ = name
        obj.task = task
        obj.unit = unit
        obj.better = better
        obj.penalty = penalty
        obj.paper = paper
        return obj

    task: str
    unit: str
    better: str
    penalty: str
    paper: bool

    # task 1 (forward)
    F1_0_1 = ("f1@0.1", "forward", "1", "higher", "0")
    PRECISION_0_1 = ("precision@0.1", "forward", "1", "higher", "0")
    RECALL_0_1 = ("recall@0.1", "forward", "1", "higher", "0")
    F1_0_5 = ("f1@0.5", "forward", "1", "higher", "0")
    PRECISION_0_5 = ("precision@0.5", "forward", "1", "higher", "0")
    RECALL_0_5 = ("recall@0.5", "forward", "1", "higher", "0")
    COUNT_ERROR = ("count_error", "forward", "1", "lower", "1 (the value of predicting no atoms)")
    COMPOSITION_DISTANCE = ("composition_distance", "forward", "1", "lower", "1 (its maximum)")
    HAUSDORFF = ("hausdorff", "forward", "Å", "lower", "2R (the sphere diameter)")
    CHAMFER = ("chamfer", "forward", "Å", "lower", "2R")
    MATCHED_RMSD = ("matched_rmsd", "forward", "Å", "lower", "2R")
    HULL_VOLUME_REL_ERROR = ("hull_volume_rel_error", "forward", "1", "lower",
                             "1 (the value of a zero volume)")
    HULL_VOLUME_RATIO = ("hull_volume_ratio", "forward", "1", "closer to 1", "0 (zero volume)")
    VOLUME_RATIO_SPHERE_PAPER = ("volume_ratio_sphere_paper", "forward", "1", "closer to the reference",
                                 "0 (zero volume)", True)
    PAIR_DISTANCE_ERROR = ("pair_distance_error", "forward", "1", "lower", "1 (its maximum)")
    PAPER_RMSD = ("paper_rmsd", "forward", "Å", "lower", "2R/√3", True)
    PAPER_HAUSDORFF = ("paper_hausdorff", "forward", "Å", "lower", "2R", True)
    PAPER_ABS_DELTA_HULL_VOLUME = ("paper_abs_delta_hull_volume", "forward", "Å³", "lower",
                                   "V_hull(G)", True)
    PAPER_RDF_ENERGY = ("paper_rdf_energy", "forward", "1/Å²", "lower",
                        "1/Δ² + Σ h_G² (its upper bound)", True)
    # task 2 (inverse)
    SPACEGROUP_ACCURACY = ("spacegroup_accuracy", "inverse", "1", "higher", "0")
    CRYSTAL_SYSTEM_ACCURACY = ("crystal_system_accuracy", "inverse", "1", "higher", "0")
    BRAVAIS_ACCURACY = ("bravais_accuracy", "inverse", "1", "higher", "0")
    JOINT_ACCURACY_PAPER = ("joint_accuracy_paper", "inverse", "1", "higher", "0", True)
    JOINT_ACCURACY_STRICT = ("joint_accuracy_strict", "inverse", "1", "higher", "0")
    LENGTH_RMSE = ("length_rmse", "inverse", "Å", "lower", "error of predicting 0 Å for every length")
    ANGLE_RMSE = ("angle_rmse", "inverse", "°", "lower", "max(θ, 180° − θ) per angle (its maximum)")
    LATTICE_RMSE_PAPER = ("lattice_rmse_paper", "inverse", "mixed (Å, °)", "lower",
                          "from the parameter penalties", True)
    LATTICE_RMSE_PERM_INVARIANT = ("lattice_rmse_perm_invariant", "inverse", "mixed (Å, °)", "lower",
                                   "from the parameter penalties")
    ABS_ERROR_A = ("abs_error_a", "inverse", "Å", "lower", "target length")
    ABS_ERROR_B = ("abs_error_b", "inverse", "Å", "lower", "target length")
    ABS_ERROR_C = ("abs_error_c", "inverse", "Å", "lower", "target length")
    ABS_ERROR_ALPHA = ("abs_error_alpha", "inverse", "°", "lower", "max(θ, 180° − θ)")
    ABS_ERROR_BETA = ("abs_error_beta", "inverse", "°", "lower", "max(θ, 180° − θ)")
    ABS_ERROR_GAMMA = ("abs_error_gamma", "inverse", "°", "lower", "max(θ, 180° − θ)")

    def __str__(self) -> str:
        return str(self.value)

    __hash__ = str.__hash__  # a member and its name string are the same dict key

    @property
    def higher_is_better(self) -> bool | None:
        """True / False for higher / lower is better; None for the volume ratios (closer to
        1, or to the reference's own value)."""
        return {"higher": True, "lower": False}.get(self.better)

    @property
    def perfect(self) -> float | None:
        """The value of a perfect prediction: 1 for ``higher`` and ``closer to 1``, 0 for
        ``lower``; None for ``volume_ratio_sphere_paper`` (the reference's own ratio, < 1)."""
        return {"higher": 1.0, "lower": 0.0, "closer to 1": 1.0}.get(self.better)

    @property
    def info(self) -> MetricInfo:
        """The member as a :class:`MetricInfo` record."""
        return MetricInfo(self.value, self.unit, self.better, self.penalty, self.paper)


#: The headline metrics of each task, in display order: the columns of the leaderboard and
#: of ``c2np evaluate``'s table. ``PRIMARY`` is the one number a task is ranked by.
HEADLINE: dict[str, tuple[Metric, ...]] = {
    "forward": (Metric.F1_0_1, Metric.F1_0_5, Metric.COUNT_ERROR, Metric.CHAMFER,
                Metric.MATCHED_RMSD, Metric.HAUSDORFF, Metric.HULL_VOLUME_REL_ERROR,
                Metric.PAIR_DISTANCE_ERROR),
    "inverse": (Metric.SPACEGROUP_ACCURACY, Metric.JOINT_ACCURACY_PAPER, Metric.JOINT_ACCURACY_STRICT,
                Metric.LENGTH_RMSE, Metric.ANGLE_RMSE, Metric.LATTICE_RMSE_PERM_INVARIANT),
}
PRIMARY: dict[str, Metric] = {"forward": Metric.F1_0_1, "inverse": Metric.JOINT_ACCURACY_PAPER}


def f1_name(kind: str, tol_angstrom: float) -> str:
    """Name of the ``kind`` (``f1``, ``precision``, ``recall``) metric at a tolerance (Å)."""
    return f"{kind}@{_tol_tag(tol_angstrom)}"


@dataclass(frozen=True)
class Scores:
    """Scores of one sample.

    Attributes:
        values: metric name -> value (the penalty value for a failed sample).
        ok: False when the prediction was unusable (a failure).
        failure_reason: why it failed (None when ok).
        details: extra per-sample facts (atom counts, whether the matched RMSD is certified
            optimal, ...), not averaged.
    """

    values: dict[str, float]
    ok: bool = True
    failure_reason: str | None = None
    details: dict[str, float | int | bool] = field(default_factory=dict)


def _tol_tag(tol: float) -> str:
    return f"{tol:g}"
