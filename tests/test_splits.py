"""build_recipes input checks (the orientation sets are tested in test_orientations.py)."""

import numpy as np
import pytest

from c2np.errors import C2NPInputError
from c2np.splits import PAPER, build_recipes


def test_centre_frac_is_stored_as_three_floats(kmgh3) -> None:
    t = build_recipes([kmgh3], PAPER, radii_angstrom=[6], centre_frac=np.array([0.5, 0.5, 0.5]))
    assert t.centre_frac == (0.5, 0.5, 0.5)
    assert all(type(x) is float for x in t.centre_frac)


@pytest.mark.parametrize("centre", [(0.0, 0.0), (0.0, 0.0, 0.0, 0.0), (0.0, float("nan"), 0.0)])
def test_bad_centre_frac_is_bad_input(kmgh3, centre) -> None:
    with pytest.raises(C2NPInputError, match="centre_frac must be 3 finite"):
        build_recipes([kmgh3], PAPER, radii_angstrom=[6], centre_frac=centre)
