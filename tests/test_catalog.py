"""Tests of the material catalog: prototypes, relaxation, the shipped data and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from c2np import catalog as cat
from c2np.cells import read_cells, standardize
from c2np.errors import C2NPInputError


def _comp(material_id: str) -> cat.Composition:
    return next(c for c in cat.compositions() if c.material_id == material_id)


# --- compositions and prototypes (no potential) -------------------------------------------
def test_compositions_are_the_82_of_the_issue() -> None:
    ids = cat.material_ids()
    assert len(ids) == 82 == len(set(ids))
    assert {"KMgH3", "NaMgH3", "CsZnH3", "LiBeH3", "SrLiH3", "BaLiH3"} <= set(ids)
    assert ids == sorted(ids)


@pytest.mark.parametrize("prototype", cat.PROTOTYPES)
def test_prototypes_have_their_space_group(prototype: str) -> None:
    atoms = cat.build_prototype(_comp("NaMgH3"), prototype)
    expected_atoms = {"Pm-3m": 5, "I4/mcm": 10, "R-3c": 10, "Pnma": 20}[prototype]
    assert len(atoms) == expected_atoms
    formula = atoms.get_chemical_symbols()
    assert formula.count("H") == 3 * formula.count("Na") == 3 * formula.count("Mg")
    sg = standardize((atoms.cell[:], atoms.get_scaled_positions(), atoms.numbers), symprec_angstrom=1e-3)
    assert sg.spacegroup == cat.PROTOTYPE_SPACEGROUP[prototype]


def test_tilted_prototype_keeps_b_h_bonds_near_start() -> None:
    a = 4.0
    atoms = cat.build_prototype(_comp("KMgH3"), "Pnma", a_angstrom=a, tilt_deg=10.0)
    d = atoms.get_all_distances(mic=True)
    mg = [i for i, s in enumerate(atoms.get_chemical_symbols()) if s == "Mg"]
    h = [i for i, s in enumerate(atoms.get_chemical_symbols()) if s == "H"]
    nearest = np.sort(d[np.ix_(mg, h)], axis=1)[:, :6]
    # six H per Mg at a/2, stretched by the first-order rotation about the (at most two)
    # tilt axes perpendicular to each bond: |(a/2)(1, t, t)| with t = tilt in radians
    t = np.radians(10.0)
    assert np.all(nearest > a / 2 - 1e-9)
    assert np.all(nearest <= a / 2 * np.sqrt(1 + 2 * t**2) + 1e-9)


def test_start_lattice_constant_from_radii() -> None:
    a = cat.start_lattice_constant_angstrom(_comp("KMgH3"), "Pm-3m")
    assert 3.9 < a < 4.3
    assert cat.start_lattice_constant_angstrom(_comp("CsCaH3"), "Pm-3m") > a


def test_shortest_distance_sees_periodic_images() -> None:
    lat = np.diag([3.0, 5.0, 5.0])
    assert cat.shortest_distance_angstrom(lat, np.array([[0.0, 0.0, 0.0]])) == pytest.approx(3.0)
    frac = np.array([[0.02, 0.5, 0.5], [0.98, 0.5, 0.5]])  # 0.12 Å apart across the boundary
    assert cat.shortest_distance_angstrom(lat, frac) == pytest.approx(0.12)


def test_framework_check_flags_lost_octahedra() -> None:
    from ase import Atoms

    for prototype in cat.PROTOTYPES:
        assert cat.framework_defect(cat.build_prototype(_comp("NaMgH3"), prototype), "Mg") == ""
    # c doubled: Mg keeps only 4 H close (square-planar), the apical H is 2 x further
    squashed = Atoms("MgKH3", scaled_positions=[[0, 0, 0], [0.5, 0.5, 0.5], [0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5]],
                     cell=[4.0, 4.0, 8.0], pbc=True)
    assert "4 H neighbours" in cat.framework_defect(squashed, "Mg")


def test_unknown_ids_are_rejected_by_name() -> None:
    with pytest.raises(C2NPInputError, match="XyH3.*valid ids.*KMgH3"):
        cat.build_catalog("/nonexistent-never-created", only=["XyH3"], progress=False)
    with pytest.raises(C2NPInputError, match="valid ids"):
        cat.get_cell("NotAMaterial")


def test_sevenn_missing_gives_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name: str, *args: object, **kwargs: object) -> object:
        if name == "sevenn" or name.startswith("sevenn."):
            raise ImportError("no sevenn")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.delitem(cat._POTENTIAL_CACHE, "sevenn", raising=False)
    with pytest.raises(C2NPInputError, match="sevenn"):
        cat._load_potential("sevenn")


# --- relaxation with CHGNet ----------------------------------------------------------------
pytest.importorskip("chgnet")


def test_build_one_cubic_material_is_fast_and_cubic(tmp_path: Path) -> None:
    entries = cat.build_catalog(tmp_path, only=["KMgH3"], prototypes=("Pm-3m",), progress=False)
    (entry,) = entries
    assert entry.status == "ok" and entry.chosen_prototype == "Pm-3m"
    assert entry.spacegroup_symprec_1e_3 == 221 and entry.spacegroup_symprec_1e_1 == 221
    assert entry.max_force_ev_per_angstrom < 0.01
    assert 3.9 < entry.lattice_parameters["a"] < 4.15  # KMgH3, experiment 4.02 Å
    assert entry.time_s < 30
    cells = read_cells(tmp_path)
    assert [c.material_id for c in cells] == ["KMgH3"]
    doc = json.loads((tmp_path / "catalog.json").read_text())
    assert [m["material_id"] for m in doc["materials"]] == ["KMgH3"]
    assert doc["n_not_built"] == 81
    # the shipped cell is what this build produces (when the cubic prototype won there)
    shipped = {e.material_id: e for e in cat.catalog_entries()}.get("KMgH3")
    if shipped is not None and shipped.chosen_prototype == "Pm-3m":
        assert entry.lattice_parameters["a"] == pytest.approx(shipped.lattice_parameters["a"], abs=1e-5)
        assert entry.energy_per_atom_ev == pytest.approx(shipped.energy_per_atom_ev, abs=1e-5)
    # resumable: a second call finds KMgH3 done and relaxes nothing
    again = cat.build_catalog(tmp_path, only=["KMgH3"], prototypes=("Pm-3m",), progress=False)
    assert again[0].time_s == entry.time_s
    # another potential in the same folder is refused, not mixed in
    with pytest.raises(C2NPInputError, match="potential"):
        cat.build_catalog(tmp_path, potential="sevenn", only=["KMgH3"], progress=False)


def test_loading_chgnet_keeps_stdout_clean(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """chgnet prints banners when it loads; they go to stderr, so `--json` stays JSON."""
    monkeypatch.delitem(cat._POTENTIAL_CACHE, "chgnet", raising=False)
    cat._load_potential("chgnet")
    assert capsys.readouterr().out == ""


def test_parallel_build_equals_serial_build(tmp_path: Path) -> None:
    """Two worker processes share one folder: every material is built once, the document
    holds all of them, and the cells equal a one-process build's."""
    ids = ["KMgH3", "NaMgH3", "CsCaH3"]
    par = cat.build_catalog(tmp_path / "par", only=ids, prototypes=("Pm-3m",), progress=False,
                            workers=2)
    assert [e.material_id for e in par] == ids and all(e.status == "ok" for e in par)
    doc = json.loads((tmp_path / "par" / "catalog.json").read_text())
    assert sorted(m["material_id"] for m in doc["materials"]) == sorted(ids)
    assert doc["n_not_built"] == 82 - 3
    ser = cat.build_catalog(tmp_path / "ser", only=ids[:1], prototypes=("Pm-3m",), progress=False)
    assert par[0].lattice_parameters["a"] == pytest.approx(ser[0].lattice_parameters["a"], abs=1e-9)
    assert par[0].energy_per_atom_ev == pytest.approx(ser[0].energy_per_atom_ev, abs=1e-9)
    with pytest.raises(C2NPInputError, match="workers"):
        cat.build_catalog(tmp_path / "bad", only=ids, progress=False, workers=0)


def test_tilted_prototype_keeps_its_space_group() -> None:
    entry, cell = cat.relax_material("NaMgH3", prototypes=("R-3c",))
    (res,) = entry.prototypes
    assert res.status == "ok", res.reason
    assert res.spacegroup_symprec_1e_3 == 167
    assert entry.spacegroup_symprec_1e_3 == 167 and cell is not None
    assert standardize(cell, symprec_angstrom=1e-3).spacegroup == 167


def test_non_converged_relaxation_is_rejected_with_reason() -> None:
    entry, cell = cat.relax_material("KMgH3", prototypes=("Pnma",), max_steps=1)
    assert cell is None and entry.status == "failed"
    assert entry.prototypes[0].status == "rejected"
    assert "not converged" in entry.reason


# --- the shipped catalog --------------------------------------------------------------------
def test_shipped_catalog_loads_and_matches_catalog_json() -> None:
    cells = cat.load_catalog()
    entries = cat.catalog_entries()
    assert len(cells) > 0
    assert [c.material_id for c in cells] == [e.material_id for e in entries]
    assert [c.material_id for c in cells] == sorted(c.material_id for c in cells)
    data_dir = cat.catalog_data_dir()
    cif_ids = sorted(p.name[:-4] for p in data_dir.iterdir() if p.name.endswith(".cif"))
    assert cif_ids == [e.material_id for e in entries]
    left_out = [f["material_id"] for f in cat.catalog_failures()]
    assert sorted(cif_ids + left_out) == cat.material_ids()
    for f in cat.catalog_failures():
        assert f["reason"]
    for cell, entry in zip(cells, entries):
        assert cell.formula.replace("H3", "") in (entry.a_site + entry.b_site, entry.b_site + entry.a_site)
        std = standardize(cell, symprec_angstrom=1e-3)
        assert std.spacegroup == entry.spacegroup_symprec_1e_3
        assert std.parameters.a_angstrom == pytest.approx(entry.lattice_parameters["a"], abs=1e-6)
        assert entry.shortest_distance_angstrom > cat.MIN_DISTANCE_ANGSTROM
        assert entry.potential == "chgnet" and entry.fmax_ev_per_angstrom == 0.01


def test_demo_materials_span_several_space_groups() -> None:
    ids = cat.default_demo_materials()
    entries = {e.material_id: e for e in cat.catalog_entries()}
    assert len(ids) == 4 and set(ids) <= set(entries)
    assert ids == cat.default_demo_materials()
    assert len({entries[m].spacegroup_symprec_1e_3 for m in ids}) >= 2


def test_corrupted_cif_in_user_folder_is_named(tmp_path: Path) -> None:
    good = cat.catalog_data_dir() / f"{cat.catalog_entries()[0].material_id}.cif"
    (tmp_path / "Good.cif").write_text(good.read_text())
    (tmp_path / "Broken.cif").write_text("data_x\n_cell_length_a 4.0\nloop_\n_atom_site_label\n_atom_site")
    with pytest.raises(C2NPInputError, match="Broken.cif"):
        read_cells(tmp_path)


# --- CLI ------------------------------------------------------------------------------------
def test_cli_list_show_and_unknown_id() -> None:
    from typer.testing import CliRunner

    from c2np.cli import build_app

    runner = CliRunner()
    app = build_app()
    res = runner.invoke(app, ["catalog", "list", "--json"])
    assert res.exit_code == 0, res.output
    listed = json.loads(res.stdout)
    first = listed["materials"][0]["material_id"]
    res = runner.invoke(app, ["catalog", "show", first, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["material_id"] == first
    res = runner.invoke(app, ["catalog", "show", "NoSuchH3"])
    assert res.exit_code == 2
    assert "NoSuchH3" in res.output
