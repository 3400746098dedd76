"""Per-sample metrics of both tasks (contract §6-7): typed pure functions on NumPy arrays.

Task 1 (forward) compares a predicted particle P with the reference particle G, both as
species ``(n,)`` int atomic numbers and positions ``(n, 3)`` in Å in the centred frame.
Every metric is free of atom order. Quantities of G that do not depend on the rotation
(atom counts, pair-distance histogram, hull volume) are computed once per (material, R) in
a :class:`ReferenceSummary`.

Task 2 (inverse) compares predicted lattice parameters and space group with the target
(the standardized conventional cell).

A prediction that cannot be scored (missing, empty, non-finite, unknown species, invalid
lattice) is a *failure*: :func:`forward_failure` / :func:`inverse_failure` give it the
documented penalty value of every metric (never the best value); see docs/explanation/metrics.md.

Modules: :mod:`~c2np.metrics.registry` (the :class:`Metric` members, :class:`Scores`),
:mod:`~c2np.metrics.forward` (task 1), :mod:`~c2np.metrics.inverse` (task 2),
:mod:`~c2np.metrics.pair_histogram` (pair-distance counts and their compiled sweep),
:mod:`~c2np.metrics.paper` (the paper's RDF energy) and :mod:`~c2np.metrics.matching`
(assignments and tolerance matchings). Every name below is importable from here.
"""

from __future__ import annotations

from c2np.metrics.forward import (
    ReferenceSummary,
    check_forward_prediction,
    check_prediction_size,
    composition_distance,
    forward_failure,
    forward_metric_info,
    forward_metrics,
    forward_penalties,
    hull_volume_angstrom3,
    hull_volume_ratio,
)
from c2np.metrics.inverse import (
    InverseTarget,
    check_inverse_prediction,
    inverse_failure,
    inverse_metric_info,
    inverse_metrics,
    inverse_penalties,
    permutation_invariant_lattice_rmse,
)
from c2np.metrics.matching import matched_atom_count, matched_sq_distances, maximum_matching, tolerance_matching
from c2np.metrics.pair_histogram import EDGE_SNAP_ANGSTROM, TooManyPairs, pair_distance_counts, pair_distance_error
from c2np.metrics.paper import density_normalised_histogram, rdf_energy
from c2np.metrics.registry import (
    F1_TOLERANCES_ANGSTROM,
    HEADLINE,
    MAX_ATOMIC_NUMBER,
    MAX_COORDINATE_ANGSTROM,
    PRIMARY,
    RDF_N_BINS,
    RDF_R_MAX_ANGSTROM,
    Metric,
    MetricInfo,
    Scores,
    f1_name,
)

__all__ = [
    "F1_TOLERANCES_ANGSTROM",
    "RDF_R_MAX_ANGSTROM",
    "RDF_N_BINS",
    "EDGE_SNAP_ANGSTROM",
    "MAX_ATOMIC_NUMBER",
    "MAX_COORDINATE_ANGSTROM",
    "MetricInfo",
    "Metric",
    "HEADLINE",
    "PRIMARY",
    "f1_name",
    "ReferenceSummary",
    "Scores",
    "pair_distance_counts",
    "TooManyPairs",
    "density_normalised_histogram",
    "rdf_energy",
    "pair_distance_error",
    "hull_volume_angstrom3",
    "hull_volume_ratio",
    "composition_distance",
    "matched_sq_distances",
    "matched_atom_count",
    "maximum_matching",
    "tolerance_matching",
    "forward_metric_info",
    "forward_metrics",
    "forward_failure",
    "forward_penalties",
    "check_forward_prediction",
    "check_prediction_size",
    "InverseTarget",
    "inverse_metric_info",
    "inverse_metrics",
    "inverse_failure",
    "inverse_penalties",
    "check_inverse_prediction",
    "permutation_invariant_lattice_rmse",
]
