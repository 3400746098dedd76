"""c2np: the Crystal-to-Nanoparticle benchmark and toolkit.

The stable public API, grouped by concept. Names are resolved lazily on first use
(PEP 562), so ``import c2np`` imports nothing heavy and computes nothing::

    from c2np import ForwardTask, read_cif, carve

Each name lives in the module named beside it; importing from that module directly is
equally supported. Docstrings cite the benchmark contract by section ("contract §6"):
docs/reference/contract.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from c2np._lazy import lazy_getattr
from c2np.version import __version__

# name -> module that owns it (one home per concept)
_EXPORTS: dict[str, str] = {
    # errors
    "C2NPError": "c2np.errors",
    "C2NPInputError": "c2np.errors",
    # cells and records
    "UnitCell": "c2np.cells",
    "StandardCell": "c2np.cells",
    "read_cif": "c2np.cells",
    "read_cells": "c2np.cells",
    "write_cif": "c2np.cells",
    "standardize": "c2np.cells",
    "LatticeParameters": "c2np.lattice",
    "Particle": "c2np.particle",
    # carving and orientations
    "carve": "c2np.carving",
    "CarveResult": "c2np.carving",
    "sample_orientations": "c2np.orientations",
    "geodesic_angle_deg": "c2np.orientations",
    # recipes and the store
    "Protocol": "c2np.splits",
    "get_protocol": "c2np.splits",
    "build_store": "c2np.store",
    "DatasetStore": "c2np.store",
    "verify_store": "c2np.store",
    # the task API
    "ForwardTask": "c2np.tasks",
    "InverseTask": "c2np.tasks",
    "ForwardQuery": "c2np.tasks",
    "InverseQuery": "c2np.tasks",
    # predictions, metrics, results
    "InversePrediction": "c2np.predictions",
    "Metric": "c2np.metrics",
    "Results": "c2np.evaluation.results",
    # the solver
    "solve_particle": "c2np.solver",
    "SolverSettings": "c2np.solver",
    "SolverResult": "c2np.solver",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from c2np.carving import CarveResult, carve
    from c2np.cells import StandardCell, UnitCell, read_cells, read_cif, standardize, write_cif
    from c2np.errors import C2NPError, C2NPInputError
    from c2np.evaluation.results import Results
    from c2np.lattice import LatticeParameters
    from c2np.metrics import Metric
    from c2np.orientations import geodesic_angle_deg, sample_orientations
    from c2np.particle import Particle
    from c2np.predictions import InversePrediction
    from c2np.solver import SolverResult, SolverSettings, solve_particle
    from c2np.splits import Protocol, get_protocol
    from c2np.store import DatasetStore, build_store, verify_store
    from c2np.tasks import ForwardQuery, ForwardTask, InverseQuery, InverseTask


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
