"""Tests of the catalog compositions (c2np.catalog.hydrides)."""

from __future__ import annotations

import pytest

from c2np.catalog import hydrides as comps
from c2np.errors import C2NPInputError


def test_compositions_are_the_82_of_the_issue() -> None:
    ids = comps.material_ids()
    assert len(ids) == 82 == len(set(ids))
    assert {"KMgH3", "NaMgH3", "CsZnH3", "LiBeH3", "SrLiH3", "BaLiH3"} <= set(ids)
    assert ids == sorted(ids)
    # inverse perovskites put the alkaline earth on the A site
    assert comps.composition("SrLiH3") == comps.Composition("Sr", "Li")


def test_unknown_composition_names_the_valid_ids() -> None:
    with pytest.raises(C2NPInputError, match="XyH3.*valid ids.*KMgH3"):
        comps.composition("XyH3")


def test_start_lattice_constant_from_radii() -> None:
    kmg = comps.composition("KMgH3")
    a = comps.start_lattice_constant_angstrom(kmg, "Pm-3m")
    assert 3.9 < a < 4.3
    assert comps.start_lattice_constant_angstrom(comps.composition("CsCaH3"), "Pm-3m") > a
    # tilted prototypes start from the octahedral value, never larger than the cubic one
    assert comps.start_lattice_constant_angstrom(kmg, "Pnma") <= a


def test_tolerance_factor_orders_a_site_size() -> None:
    t = [comps.tolerance_factor(comps.composition(f"{a}MgH3")) for a in comps.A_SITES]
    assert t == sorted(t)  # Li < Na < K < Rb < Cs
