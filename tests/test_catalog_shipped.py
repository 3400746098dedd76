"""Tests of the shipped catalog (c2np.catalog.shipped) and the ``c2np catalog`` commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from c2np.catalog import shipped
from c2np.catalog.families import typed_material_ids
from c2np.catalog.hydrides import material_ids
from c2np.catalog.relaxation import MIN_DISTANCE_ANGSTROM
from c2np.cells import read_cells, standardize
from c2np.errors import C2NPInputError


def test_unknown_id_names_the_valid_ones() -> None:
    with pytest.raises(C2NPInputError, match="NotAMaterial.*valid ids"):
        shipped.get_cell("NotAMaterial")


def test_shipped_catalog_loads_and_matches_catalog_json() -> None:
    cells = shipped.load_catalog("all")
    entries = shipped.catalog_entries()
    assert len(cells) > 0
    assert [c.material_id for c in cells] == [e.material_id for e in entries]
    assert [c.material_id for c in cells] == sorted(c.material_id for c in cells)
    abh3 = shipped.load_catalog()
    assert [c.material_id for c in abh3] == [e.material_id for e in entries if e.material_id in material_ids()]
    data_dir = shipped.catalog_data_dir()
    cif_ids = sorted(p.name[:-4] for p in data_dir.iterdir() if p.name.endswith(".cif"))
    assert cif_ids == [e.material_id for e in entries]
    left_out = [f["material_id"] for f in shipped.catalog_failures()]
    assert sorted(cif_ids + left_out) == sorted(material_ids() + typed_material_ids())
    for f in shipped.catalog_failures():
        assert f["reason"]
    for cell, entry in zip(cells, entries):
        if entry.material_id in material_ids():
            assert cell.formula.replace("H3", "") in (entry.a_site + entry.b_site, entry.b_site + entry.a_site)
        std = standardize(cell, symprec_angstrom=1e-3)
        assert std.spacegroup == entry.spacegroup_symprec_1e_3
        assert std.parameters.a_angstrom == pytest.approx(entry.lattice_parameters["a"], abs=1e-6)
        assert entry.shortest_distance_angstrom > MIN_DISTANCE_ANGSTROM
        assert entry.potential == "chgnet" and entry.fmax_ev_per_angstrom == 0.01


def test_demo_materials_span_several_space_groups() -> None:
    ids = shipped.default_demo_materials()
    entries = {e.material_id: e for e in shipped.catalog_entries()}
    assert len(ids) == 4 and set(ids) <= set(entries)
    assert ids == shipped.default_demo_materials()
    assert len({entries[m].spacegroup_symprec_1e_3 for m in ids}) >= 2


def test_corrupted_cif_in_user_folder_is_named(tmp_path: Path) -> None:
    good = shipped.catalog_data_dir() / f"{shipped.catalog_entries()[0].material_id}.cif"
    (tmp_path / "Good.cif").write_text(good.read_text())
    (tmp_path / "Broken.cif").write_text("data_x\n_cell_length_a 4.0\nloop_\n_atom_site_label\n_atom_site")
    with pytest.raises(C2NPInputError, match="Broken.cif"):
        read_cells(tmp_path)


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
