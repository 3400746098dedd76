"""Tests of the perovskite prototypes (c2np.catalog.prototypes) and the textbook crystals
(c2np.catalog.textbook)."""

from __future__ import annotations

import numpy as np
import pytest

from c2np.catalog.hydrides import composition
from c2np.catalog.prototypes import PROTOTYPE_SPACEGROUP, PROTOTYPES, build_prototype
from c2np.catalog.textbook import TEXTBOOK_PROTOTYPES, prototype_cell, prototype_names
from c2np.cells import standardize
from c2np.errors import C2NPInputError


@pytest.mark.parametrize("prototype", PROTOTYPES)
def test_prototypes_have_their_space_group(prototype: str) -> None:
    atoms = build_prototype(composition("NaMgH3"), prototype)
    expected_atoms = {"Pm-3m": 5, "I4/mcm": 10, "R-3c": 10, "Pnma": 20}[prototype]
    assert len(atoms) == expected_atoms
    formula = atoms.get_chemical_symbols()
    assert formula.count("H") == 3 * formula.count("Na") == 3 * formula.count("Mg")
    sg = standardize((atoms.cell[:], atoms.get_scaled_positions(), atoms.numbers), symprec_angstrom=1e-3)
    assert sg.spacegroup == PROTOTYPE_SPACEGROUP[prototype]


def test_tilted_prototype_keeps_b_h_bonds_near_start() -> None:
    a = 4.0
    atoms = build_prototype(composition("KMgH3"), "Pnma", a_angstrom=a, tilt_deg=10.0)
    d = atoms.get_all_distances(mic=True)
    mg = [i for i, s in enumerate(atoms.get_chemical_symbols()) if s == "Mg"]
    h = [i for i, s in enumerate(atoms.get_chemical_symbols()) if s == "H"]
    nearest = np.sort(d[np.ix_(mg, h)], axis=1)[:, :6]
    # six H per Mg at a/2, stretched by the first-order rotation about the (at most two)
    # tilt axes perpendicular to each bond: |(a/2)(1, t, t)| with t = tilt in radians
    t = np.radians(10.0)
    assert np.all(nearest > a / 2 - 1e-9)
    assert np.all(nearest <= a / 2 * np.sqrt(1 + 2 * t**2) + 1e-9)


def test_unknown_prototype_is_named() -> None:
    with pytest.raises(C2NPInputError, match="P1.*valid"):
        build_prototype(composition("KMgH3"), "P1")
    with pytest.raises(C2NPInputError, match="Unobtainium.*known"):
        prototype_cell("Unobtainium")


def test_textbook_crystals_have_their_space_group() -> None:
    assert prototype_names() == [p.name for p in TEXTBOOK_PROTOTYPES]
    for proto in TEXTBOOK_PROTOTYPES[:3]:
        assert standardize(prototype_cell(proto.name), symprec_angstrom=1e-3).spacegroup == proto.spacegroup
