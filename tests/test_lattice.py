"""LatticeParameters: one record for the six cell numbers."""

from __future__ import annotations

import numpy as np
import pytest
from ase.geometry import cellpar_to_cell

from c2np.lattice import LatticeParameters


def test_roundtrip_through_lattice_matches_ase() -> None:
    par = [5.1, 6.2, 7.3, 80.0, 95.0, 110.0]
    lp = LatticeParameters.from_lattice(cellpar_to_cell(par))
    np.testing.assert_allclose(lp.as_array(), par, atol=1e-9)
    assert LatticeParameters.from_array(par) == LatticeParameters(*par)
    assert lp.is_valid()


@pytest.mark.parametrize("par", [[4, 4, 4, 170, 170, 170], [4, 4, -1, 90, 90, 90], [4, 4, 4, 90, 90, 180],
                                 [4, 4, float("nan"), 90, 90, 90], [4, 4, 4, 10, 10, 60]])
def test_impossible_cells_are_invalid(par: list[float]) -> None:
    assert not LatticeParameters.from_array(par).is_valid()


def test_wrong_length_is_an_error() -> None:
    with pytest.raises(ValueError, match="6 numbers"):
        LatticeParameters.from_array([1, 2, 3])
