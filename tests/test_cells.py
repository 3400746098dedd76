import zipfile
from pathlib import Path

import numpy as np
import pytest

from c2np.cells import (UnitCell, bravais_lattice, crystal_system, lattice_parameters, read_cells,
                        read_cif, standardize, write_cif)
from c2np.errors import C2NPInputError

GOOD_CIF = """data_KMgH3
_cell_length_a 4.02
_cell_length_b 4.02
_cell_length_c 4.02
_cell_angle_alpha 90
_cell_angle_beta 90
_cell_angle_gamma 90
_symmetry_space_group_name_H-M 'P 1'
loop_
_atom_site_label
_atom_site_type_symbol
_atom_site_fract_x
_atom_site_fract_y
_atom_site_fract_z
_atom_site_occupancy
K1 K 0.5 0.5 0.5 1.0
Mg1 Mg 0 0 0 1.0
H1 H 0.5 0 0 1.0
H2 H 0 0.5 0 1.0
H3 H 0 0 0.5 1.0
"""


def test_read_cif_and_standardize(tmp_path: Path) -> None:
    p = tmp_path / "KMgH3.cif"
    p.write_text(GOOD_CIF)
    cell = read_cif(p)
    assert cell.material_id == "KMgH3" and cell.n_atoms == 5 and cell.formula == "KMgH3"
    std = standardize(cell)
    assert std.spacegroup == 221 and std.crystal_system == "cubic" and std.bravais == "cP"
    assert std.parameters.a_angstrom == pytest.approx(4.02) and std.library == "spglib" and std.library_version


def test_partial_occupancy_rejected(tmp_path: Path) -> None:
    p = tmp_path / "bad.cif"
    p.write_text(GOOD_CIF.replace("K1 K 0.5 0.5 0.5 1.0", "K1 K 0.5 0.5 0.5 0.5"))
    with pytest.raises(C2NPInputError, match=r"bad\.cif.*partial occupancy"):
        read_cif(p)


@pytest.mark.parametrize("text", ["", "data_x\n_cell_length_a 4\n", "this is not a cif {{{"])
def test_malformed_cif_names_file(tmp_path: Path, text: str) -> None:
    p = tmp_path / "broken.cif"
    p.write_text(text)
    with pytest.raises(C2NPInputError, match="broken.cif"):
        read_cif(p)


def test_read_cells_folder_reports_corrupt_file(tmp_path: Path) -> None:
    (tmp_path / "A.cif").write_text(GOOD_CIF)
    (tmp_path / "B.cif").write_text("garbage")
    with pytest.raises(C2NPInputError, match="B.cif"):
        read_cells(tmp_path)


def test_zip_members_are_never_written(tmp_path: Path) -> None:
    z = tmp_path / "cells.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("../../evil.cif", GOOD_CIF)
        zf.writestr("sub/KMgH3.cif", GOOD_CIF.replace("data_KMgH3", "data_x"))
    before = set(tmp_path.parent.rglob("*"))
    cells = read_cells(z)
    assert sorted(c.material_id for c in cells) == ["KMgH3", "evil"]
    assert set(tmp_path.parent.rglob("*")) == before  # nothing extracted anywhere


def test_write_cif_roundtrip(tmp_path: Path, kmgh3: UnitCell) -> None:
    p = write_cif(kmgh3, tmp_path / "out" / "KMgH3.cif")
    back = read_cif(p)
    assert np.allclose(back.lattice_angstrom, kmgh3.lattice_angstrom)
    assert np.array_equal(back.numbers, kmgh3.numbers)


def test_unitcell_validation() -> None:
    with pytest.raises(C2NPInputError, match="singular"):
        UnitCell("x", np.zeros((3, 3)), [1], [[0, 0, 0]])
    with pytest.raises(C2NPInputError, match="not finite"):
        UnitCell("x", np.eye(3), [1], [[np.nan, 0, 0]])
    with pytest.raises(C2NPInputError, match="species"):
        UnitCell("x", np.eye(3), [1, 1], [[0, 0, 0]])


def test_crystal_system_and_bravais() -> None:
    assert crystal_system(1) == "triclinic" and crystal_system(62) == "orthorhombic"
    assert crystal_system(167) == "trigonal" and crystal_system(225) == "cubic"
    assert bravais_lattice(225) == "cF" and bravais_lattice(229) == "cI" and bravais_lattice(166) == "hR"
    assert bravais_lattice(62) == "oP" and bravais_lattice(63) == "oS" and bravais_lattice(194) == "hP"
    with pytest.raises(C2NPInputError):
        crystal_system(231)


def test_lattice_parameters_hexagonal() -> None:
    from ase.geometry import cellpar_to_cell

    pars = (3.2, 3.2, 5.2, 90.0, 90.0, 120.0)
    assert np.allclose(lattice_parameters(cellpar_to_cell(pars)), pars)


def test_standardize_tilted(zoo: dict[str, UnitCell]) -> None:
    assert standardize(zoo["orthorhombic"]).spacegroup == 62
    assert standardize(zoo["hexagonal"]).spacegroup == 194
    assert standardize(zoo["trigonal"]).spacegroup == 166
