"""In-memory predictions as the objects other libraries build: :class:`ase.Atoms` and
pymatgen ``Molecule`` / ``Structure`` are converted at the task boundary
(:meth:`c2np.tasks.ForwardTask.evaluate`, :meth:`c2np.tasks.InverseTask.evaluate`).

* task 1: a :class:`~c2np.particle.Particle`, an ``ase.Atoms`` or a pymatgen ``Molecule`` /
  ``Structure`` becomes a Particle of its atomic numbers and Cartesian positions (Å), taken
  as they are (the particle's centred frame).
* task 2: besides the values :func:`c2np.predictions.inverse_values` reads, an ``ase.Atoms``
  with a cell or a pymatgen ``Structure`` is a predicted crystal: its standardized
  conventional cell (:func:`c2np.cells.standardize`) gives the lattice parameters and the
  space group. A crystal in which no symmetry is found is a failed sample (NaN values).

Anything else raises :class:`~c2np.errors.C2NPInputError` naming the sample id. pymatgen is
never imported here: its objects are recognised only when pymatgen is already loaded.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from c2np.errors import C2NPInputError
from c2np.particle import Particle

__all__ = ["forward_particle", "forward_predictions", "inverse_prediction", "inverse_predictions"]

_FORWARD_KINDS = "a c2np Particle, an ase.Atoms or a pymatgen Molecule / Structure"


def _pymatgen_kind(value: Any) -> str | None:
    """``"molecule"`` / ``"structure"`` for pymatgen objects (when pymatgen is loaded), else None."""
    mod = sys.modules.get("pymatgen.core.structure")
    if mod is None:
        return None
    if isinstance(value, mod.IStructure):
        return "structure"
    if isinstance(value, mod.IMolecule):
        return "molecule"
    return None


def _is_atoms(value: Any) -> bool:
    from ase import Atoms

    return isinstance(value, Atoms)


def _pymatgen_arrays(value: Any, sample_id: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        numbers = np.asarray(value.atomic_numbers, dtype=np.int64)
    except AttributeError as exc:  # a disordered site has no single species
        raise C2NPInputError(f"predictions: entry {sample_id!r}: a {type(value).__name__} with disordered "
                             f"(partially occupied) sites is not a prediction ({exc})") from exc
    return numbers, np.asarray(value.cart_coords, dtype=np.float64).reshape(-1, 3)


def forward_particle(value: Any, *, sample_id: str) -> Particle:
    """A task-1 prediction as a :class:`Particle` (atomic numbers, Cartesian positions Å)."""
    if isinstance(value, Particle):
        return value
    if _is_atoms(value):
        return Particle(value.numbers, value.positions)
    if _pymatgen_kind(value) is not None:
        return Particle(*_pymatgen_arrays(value, sample_id))
    raise C2NPInputError(f"predictions: entry {sample_id!r}: a task-1 prediction must be {_FORWARD_KINDS}, "
                         f"got {type(value).__module__}.{type(value).__qualname__}")


def forward_predictions(predictions: Mapping[str, Any]) -> dict[str, Particle]:
    """``{sample_id: Particle}`` of in-memory task-1 predictions (:func:`forward_particle`)."""
    return {str(sid): forward_particle(value, sample_id=str(sid)) for sid, value in predictions.items()}


def _crystal_prediction(lattice: np.ndarray, numbers: np.ndarray, frac: np.ndarray, *, sample_id: str,
                        symprec_angstrom: float) -> Any:
    from c2np.cells import UnitCell, standardize
    from c2np.predictions import InversePrediction

    try:
        std = standardize(UnitCell(f"prediction:{sample_id}", lattice, numbers, frac),
                          symprec_angstrom=symprec_angstrom)
    except C2NPInputError:  # no symmetry found, a degenerate cell: the sample fails
        return (*[math.nan] * 6, math.nan)
    return InversePrediction(std.parameters, int(std.spacegroup))


def inverse_prediction(value: Any, *, sample_id: str, symprec_angstrom: float = 1e-3) -> Any:
    """A task-2 prediction in a form :func:`c2np.predictions.inverse_values` reads: a
    predicted crystal (``ase.Atoms`` with a cell, pymatgen ``Structure``) becomes the
    :class:`~c2np.predictions.InversePrediction` of its standardized conventional cell
    (``symprec_angstrom``); other values pass unchanged. A particle or a molecule (no
    lattice) raises :class:`C2NPInputError` naming the sample id."""
    if _is_atoms(value):
        lattice = np.asarray(value.cell[:], dtype=np.float64)
        if abs(np.linalg.det(lattice)) < 1e-9:
            raise C2NPInputError(f"predictions: entry {sample_id!r}: a task-2 prediction needs a lattice; this "
                                 "ase.Atoms has no cell (a periodic crystal is needed, not a particle)")
        return _crystal_prediction(lattice, value.numbers, value.get_scaled_positions(wrap=True),
                                   sample_id=sample_id, symprec_angstrom=symprec_angstrom)
    kind = _pymatgen_kind(value)
    if kind == "structure":
        numbers, _ = _pymatgen_arrays(value, sample_id)
        return _crystal_prediction(np.asarray(value.lattice.matrix, dtype=np.float64), numbers,
                                   np.asarray(value.frac_coords, dtype=np.float64) % 1.0,
                                   sample_id=sample_id, symprec_angstrom=symprec_angstrom)
    if kind == "molecule" or isinstance(value, Particle):
        raise C2NPInputError(f"predictions: entry {sample_id!r}: a task-2 prediction needs a lattice and a "
                             f"space group; a {type(value).__name__} has none (give a Structure, an "
                             "ase.Atoms with a cell, or (a, b, c, alpha, beta, gamma, spacegroup))")
    return value


def inverse_predictions(predictions: Mapping[str, Any], *, symprec_angstrom: float = 1e-3) -> dict[str, Any]:
    """``{sample_id: value}`` with every predicted crystal converted (:func:`inverse_prediction`)."""
    return {str(sid): inverse_prediction(v, sample_id=str(sid), symprec_angstrom=symprec_angstrom)
            for sid, v in predictions.items()}
