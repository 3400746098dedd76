import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from c2np.cells import (
    UnitCell,
    bravais_lattice,
    crystal_system,
    lattice_parameters,
    read_cells,
    read_cif,
    standardize,
    write_cif,
)
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


# --- hostile CIF input ------------------------------------------------------------------
def _cif(a: str = "4.02", b: str = "4.02", c: str = "4.02", angles: tuple[str, str, str] = ("90", "90", "90"),
         sites: str = "K1 K 0.5 0.5 0.5\nMg1 Mg 0 0 0\nH1 H 0.5 0 0\nH2 H 0 0.5 0\nH3 H 0 0 0.5\n",
         group: str = "'P 1'") -> str:
    return (f"data_x\n_cell_length_a {a}\n_cell_length_b {b}\n_cell_length_c {c}\n"
            f"_cell_angle_alpha {angles[0]}\n_cell_angle_beta {angles[1]}\n_cell_angle_gamma {angles[2]}\n"
            f"_symmetry_space_group_name_H-M {group}\nloop_\n_atom_site_label\n_atom_site_type_symbol\n"
            f"_atom_site_fract_x\n_atom_site_fract_y\n_atom_site_fract_z\n{sites}")


@pytest.mark.parametrize("kwargs", [dict(a="-4.02"), dict(b="0"), dict(angles=("170", "170", "170")),
                                    dict(angles=("90", "90", "180")), dict(angles=("10", "10", "90"))])
def test_impossible_cell_parameters_are_refused(tmp_path: Path, kwargs: dict) -> None:
    from c2np.cells import read_cif_text

    with pytest.raises(C2NPInputError, match="bad.cif: impossible cell parameters"):
        read_cif_text(_cif(**kwargs), source="bad.cif")


def test_overlapping_atoms_are_refused() -> None:
    from c2np.cells import read_cif_text

    sites = "Mg1 Mg 0 0 0\nMg2 Mg 0.01 0 0\n"  # 0.04 Å apart
    with pytest.raises(C2NPInputError, match="o.cif: atoms 1 and 2 are 0.0402 Å apart.*overlapping"):
        read_cif_text(_cif(sites=sites), source="o.cif")
    across = "Mg1 Mg 0.001 0 0\nMg2 Mg 0.999 0 0\n"  # apart across the cell boundary only
    with pytest.raises(C2NPInputError, match="overlapping"):
        read_cif_text(_cif(sites=across), source="o.cif")


def test_symmetry_expansion_equals_ase_and_is_linear() -> None:
    """The fast expansion gives ASE's atoms in ASE's order; a 10,000-atom P1 file reads."""
    import io
    import warnings

    from ase.io.cif import parse_cif

    from c2np.cells import _block_atoms, read_cif_text

    text = _cif(a="5.1", b="5.1", c="5.1", group="'F m -3 m'",
                sites="Na1 Na 0 0 0\nCl1 Cl 0.5 0.5 0.5\nH1 H 0.25 0.25 0.25\nH2 H 0.75 0.75 0.75\n")
    block = next(b for b in parse_cif(io.StringIO(text)) if b.has_structure())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = block.get_atoms()
    mine, _ = _block_atoms(block, source="x")
    assert mine.get_chemical_symbols() == ref.get_chemical_symbols()
    assert np.array_equal(mine.get_scaled_positions(wrap=False), ref.get_scaled_positions(wrap=False))
    n_side = 22  # 10,648 atoms on a grid 1.8 Å apart
    grid = np.stack(np.meshgrid(*[np.arange(n_side) / n_side] * 3, indexing="ij"), -1).reshape(-1, 3)
    sites = "".join(f"H{i} H {x:.6f} {y:.6f} {z:.6f}\n" for i, (x, y, z) in enumerate(grid))
    big = read_cif_text(_cif(a="39.6", b="39.6", c="39.6", sites=sites), source="big.cif")
    assert big.n_atoms == n_side ** 3


def test_cif_limits_are_checked_before_expansion(monkeypatch: pytest.MonkeyPatch) -> None:
    from c2np import limits
    from c2np.cells import read_cif_text
    from c2np.errors import C2NPLimitError

    monkeypatch.setenv(limits.ENV_VAR, "cell_atoms=4")
    with pytest.raises(C2NPLimitError, match="k.cif .5 sites x 1 symmetry operations.*cell_atoms = 4"):
        read_cif_text(_cif(), source="k.cif")
    monkeypatch.setenv(limits.ENV_VAR, "cif_bytes=100")
    with pytest.raises(C2NPLimitError, match="cif_bytes"):
        read_cif_text(_cif(), source="k.cif")


def test_folder_and_zip_agree_on_suffix_case_and_names(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "KMgH3.CIF").write_text(GOOD_CIF)
    (folder / "notes.txt").write_text("not a cif")
    assert [c.material_id for c in read_cells(folder)] == ["KMgH3"]
    zpath = tmp_path / "c.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("KMgH3.CIF", GOOD_CIF)
    assert [c.material_id for c in read_cells(zpath)] == ["KMgH3"]
    (folder / "kmgh3.cif").write_text(GOOD_CIF)
    with pytest.raises(C2NPInputError, match="differ only in case"):
        read_cells(folder)


@pytest.mark.parametrize("member", ["a b.cif", "KMgH₃.cif", "-x.cif", "sub/.hidden.cif", "x\ny.cif", "a[1].cif"])
def test_unsafe_cif_names_are_refused(tmp_path: Path, member: str) -> None:
    zpath = tmp_path / "c.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr(member, GOOD_CIF)
    with pytest.raises(C2NPInputError, match="not a safe name"):
        read_cells(zpath)


def test_zip_folders_never_reach_the_material_id(tmp_path: Path) -> None:
    zpath = tmp_path / "c.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("../../Evil.cif", GOOD_CIF)
        zf.writestr("/abs/Other.cif", GOOD_CIF)
    assert [c.material_id for c in read_cells(zpath)] == ["Evil", "Other"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.zip"]


def test_zip_bomb_member_is_refused_before_decompression(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from c2np import limits
    from c2np.errors import C2NPLimitError

    zpath = tmp_path / "bomb.zip"
    with zipfile.ZipFile(zpath, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("Zeros.cif", b"\0" * 5_000_000)  # 5 MB of zeros, ~5 kB compressed
    assert zpath.stat().st_size < 100_000
    monkeypatch.setenv(limits.ENV_VAR, "cif_bytes=1e6")
    with pytest.raises(C2NPLimitError, match="bomb.zip!Zeros.cif .uncompressed.: 5,000,000 bytes.*cif_bytes"):
        read_cells(zpath)
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(zpath.read_bytes()[:-30])
    with pytest.raises(C2NPInputError, match="damaged.zip"):
        read_cells(damaged)


def test_unreadable_atom_type_is_a_clear_error() -> None:
    """Found by tools/fuzz_readers.py (atheris): ASE's has_structure() raised
    AttributeError on a type symbol that is not an element."""
    from c2np.cells import read_cif_text

    crash = (
        "data_KMgH3\n_cell_length_a +.02\n_cell_length_b 4.02\n_cell_length_c 4.02\n"
        "_cell_angle_alpha 9\n_cell_angle_beta 90\n_cell_angle_gamma \x000\n"
        "_symmetry_space_group_name_H-M 'P m -3 m'\nloop_\n_atom_site_label\n_atom_site_type_symbol\n"
        "_atom_site_fract_x\n_atom_site_fract_y\n_atom_site_fract_z\nK1 K 0.5 0.5 0.5\n�g1 Mg 0 0 0\n"
        "H1 � 0.5 0 0\n"
    )
    with pytest.raises(C2NPInputError, match="f.cif: not a readable CIF .AttributeError"):
        read_cif_text(crash, source="f.cif")
    with pytest.raises(C2NPInputError, match="f.cif: could not build a structure .KeyError"):
        read_cif_text(_cif(sites="K1 K 0.5 0.5 0.5\nH1 M-m 0.5 0 0\n"), source="f.cif")


@pytest.mark.parametrize(
    "kwargs, shortest", [(dict(c="0.00001"), "1e-05"), (dict(angles=("90", "90", "0.5")), "0.0351")]
)
def test_flat_or_collapsed_cells_are_refused_quickly(kwargs: dict, shortest: str) -> None:
    """Found by tools/hostile_inputs.py: a cell 1e-5 Å thick made the overlap search
    enumerate millions of periodic images (timeout); the reduced lattice is checked first."""
    from c2np.cells import read_cif_text

    with pytest.raises(C2NPInputError, match=f"flat.cif: the lattice has a translation of {shortest} Å"):
        read_cif_text(_cif(**kwargs), source="flat.cif")


_GROUPS = {225: "c", 227: "c", 229: "c", 221: "c", 194: "h", 191: "h", 167: "h", 166: "h", 62: "o", 14: "m",
           12: "m", 2: "a", 141: "t", 136: "t", 186: "h"}


def _on_the_merge_boundary(sg: int, sites: list, *, symprec: float = 1e-3, margin: float = 1e-9) -> bool:
    """Whether two symmetry images of the sites differ, on some axis, by the merge tolerance to
    within ``margin`` (fractional). There ASE decides on its Cartesian round trip's last bit
    (0.001 becomes 0.000999…), so both answers are right and the comparison is not made.
    Found by hypothesis: sites (0, 0.25, 0) and (0.001, 0.25, 0) in P-1."""
    from ase.spacegroup import Spacegroup

    rot, trans = (np.array(x, dtype=float) for x in zip(*Spacegroup(sg).get_symop()))
    pts = np.concatenate([(np.einsum("oij,j->oi", rot, np.asarray(p, float)) + trans) % 1.0
                          for p in sites] + [np.asarray(sites, float)])
    diff = np.abs(pts[:, None, :] - pts[None, :, :])
    diff = np.abs(diff - np.rint(diff))
    return bool(np.any(np.abs(diff - symprec) < margin))


@settings(max_examples=25, deadline=None)
@given(sg=st.sampled_from(sorted(_GROUPS)),
       sites=st.lists(st.tuples(*[st.sampled_from([0.0, 0.25, 0.5, 1 / 3, 2 / 3]) | st.floats(0, 1)] * 3),
                      min_size=1, max_size=4))
def test_symmetry_expansion_equals_ase_property(sg: int, sites: list) -> None:
    """For any sites in these groups (special positions included) the fast expansion gives
    ASE's atoms in ASE's order."""
    import io
    import warnings

    from ase.io.cif import parse_cif

    from c2np.cells import _block_atoms

    assume(not _on_the_merge_boundary(sg, sites))
    family = _GROUPS[sg]
    a, b, c, al, be, ga = 5.1, 6.2, 7.3, 90, 90, 90
    if family == "c":
        b = c = a
    elif family == "h":
        b, ga = a, 120
    elif family == "t":
        b = a
    elif family == "m":
        be = 101
    elif family == "a":
        al, be, ga = 81, 95, 102
    text = (f"data_t\n_cell_length_a {a}\n_cell_length_b {b}\n_cell_length_c {c}\n_cell_angle_alpha {al}\n"
            f"_cell_angle_beta {be}\n_cell_angle_gamma {ga}\n_symmetry_Int_Tables_number {sg}\nloop_\n"
            "_atom_site_label\n_atom_site_type_symbol\n_atom_site_fract_x\n_atom_site_fract_y\n_atom_site_fract_z\n"
            + "".join(f"H{i} H {x:.6f} {y:.6f} {z:.6f}\n" for i, (x, y, z) in enumerate(sites)))
    block = next(b for b in parse_cif(io.StringIO(text)) if b.has_structure())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = block.get_atoms()
    mine, frac = _block_atoms(block, source="t.cif")
    assert mine.get_chemical_symbols() == ref.get_chemical_symbols()
    # the same sites in the same order; the last bits differ (ours skip ASE's Cartesian round
    # trip, whose bits depend on the CPU's BLAS kernel) and a site at 1 - 1e-16 is ours at 0
    diff = frac - ref.get_scaled_positions(wrap=False)
    assert np.max(np.abs(diff - np.rint(diff)), initial=0.0) < 1e-12


# ----------------------------------------------------------------------------------------
# symmetrized CIF: the conventional cell in its space group
# ----------------------------------------------------------------------------------------
def test_symop_xyz_strings() -> None:
    from c2np.cells import symop_xyz

    assert symop_xyz(np.eye(3), np.zeros(3)) == "x, y, z"
    rot = np.array([[0, -1, 0], [1, -1, 0], [0, 0, 1]])
    assert symop_xyz(rot, np.array([0.0, 0.0, 1 / 3])) == "-y, x-y, z+1/3"
    assert symop_xyz(-np.eye(3), np.array([0.5, -0.25, 1.0])) == "-x+1/2, -y+3/4, -z"


@pytest.mark.parametrize("name", ["perovskite", "cubic", "tetragonal", "orthorhombic", "hexagonal", "trigonal",
                                  "monoclinic"])
def test_symmetrized_cif_round_trips_in_its_space_group(name: str, tmp_path) -> None:
    from c2np.cells import write_symmetrized_cif
    from helpers import crystal_zoo, perovskite

    zoo = {"perovskite": perovskite(), **crystal_zoo()}
    cell = zoo[name]
    std = write_symmetrized_cif(cell, tmp_path / "c.cif")
    text = (tmp_path / "c.cif").read_text()
    assert f"_space_group_IT_number   {std.spacegroup}" in text
    ops = [ln for ln in text.splitlines() if ln[:1].isdigit() and "'" in ln]
    sites = text.split("_atom_site_occupancy\n")[1].strip().splitlines()
    if std.spacegroup > 1:
        assert len(ops) > 1 and len(sites) < len(std.numbers)  # operations + asymmetric unit, not P1
    back = read_cif(tmp_path / "c.cif")
    again = standardize(back)
    assert again.spacegroup == std.spacegroup
    assert np.allclose(again.lattice_params, std.lattice_params, atol=1e-6)
    assert sorted(back.numbers.tolist()) == sorted(std.numbers)
