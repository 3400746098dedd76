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
(assignments and tolerance matchings). Every name below is importable from here, resolved
on first use (a submodule imports only what it needs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from c2np._lazy import lazy_getattr

# name -> the module that defines it (resolved on first use, PEP 562)
_EXPORTS: dict[str, str] = {
    "F1_TOLERANCES_ANGSTROM": "c2np.metrics.registry",
    "RDF_R_MAX_ANGSTROM": "c2np.metrics.registry",
    "RDF_N_BINS": "c2np.metrics.registry",
    "EDGE_SNAP_ANGSTROM": "c2np.metrics.pair_histogram",
    "MAX_ATOMIC_NUMBER": "c2np.metrics.registry",
    "MAX_COORDINATE_ANGSTROM": "c2np.metrics.registry",
    "MetricInfo": "c2np.metrics.registry",
    "Metric": "c2np.metrics.registry",
    "HEADLINE": "c2np.metrics.registry",
    "PRIMARY": "c2np.metrics.registry",
    "f1_name": "c2np.metrics.registry",
    "ReferenceSummary": "c2np.metrics.forward",
    "Scores": "c2np.metrics.registry",
    "pair_distance_counts": "c2np.metrics.pair_histogram",
    "TooManyPairs": "c2np.metrics.pair_histogram",
    "density_normalised_histogram": "c2np.metrics.paper",
    "rdf_energy": "c2np.metrics.paper",
    "pair_distance_error": "c2np.metrics.pair_histogram",
    "hull_volume_angstrom3": "c2np.metrics.forward",
    "hull_volume_ratio": "c2np.metrics.forward",
    "composition_distance": "c2np.metrics.forward",
    "matched_sq_distances": "c2np.metrics.matching",
    "matched_atom_count": "c2np.metrics.matching",
    "maximum_matching": "c2np.metrics.matching",
    "tolerance_matching": "c2np.metrics.matching",
    "forward_metric_info": "c2np.metrics.forward",
    "forward_metrics": "c2np.metrics.forward",
    "forward_failure": "c2np.metrics.forward",
    "forward_penalties": "c2np.metrics.forward",
    "check_forward_prediction": "c2np.metrics.forward",
    "check_prediction_size": "c2np.metrics.forward",
    "InverseTarget": "c2np.metrics.inverse",
    "inverse_metric_info": "c2np.metrics.inverse",
    "inverse_metrics": "c2np.metrics.inverse",
    "inverse_failure": "c2np.metrics.inverse",
    "inverse_penalties": "c2np.metrics.inverse",
    "check_inverse_prediction": "c2np.metrics.inverse",
    "permutation_invariant_lattice_rmse": "c2np.metrics.inverse",
}

__all__ = [*_EXPORTS]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
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


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
