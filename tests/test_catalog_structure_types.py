"""Structure types beyond the ABH3 tilt variants: prototypes, the topology check, the shipped
materials, protocol strict-structure and the unchanged paper / strict protocols."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from c2np.catalog.families import double_perovskite_type, typed_compositions, typed_material_ids
from c2np.catalog.hydrides import material_ids
from c2np.catalog.structure_types import (
    STRUCTURE_TYPES,
    _hexagonal_polytype,
    build_structure_type,
    polytype_layers,
)
from c2np.catalog.topology import coordination_signature, topology_defect
from c2np.errors import C2NPInputError

#: Recorded from main before the structure types were added (``c2np build --radii 6``, and
#: ``--protocol strict``): the paper store and strict's held-out materials must not change.
PAPER_RADIUS_6_FINGERPRINT = "de975d382d4ce90948738de0c0cec6c93f4e8979c3d4ab7f30934728d43d9b28"
STRICT_RADIUS_6_FINGERPRINT = "29df40bfe06905d69e81180cd69e404d6b6925b0735f73f5c5e49b11bf933a36"
STRICT_HELDOUT = ["CsSrH3", "CsZnH3", "KBaH3", "KCrH3", "KFeH3", "KNiH3", "KTiH3", "LiFeH3", "LiVH3",
                  "NaBaH3", "NaBeH3", "NaMnH3", "NaSrH3", "NaZnH3", "RbNiH3", "RbScH3", "SrLiH3"]


def test_polytype_stacking_letters() -> None:
    assert polytype_layers("hh") == "AB"
    assert polytype_layers("hchc") == "ABCB"
    assert polytype_layers("hcchcc") == "ABCACB"
    assert polytype_layers("ccc") == "ABC"
    with pytest.raises(C2NPInputError):
        polytype_layers("hx")


def test_cubic_stacking_is_the_cubic_perovskite() -> None:
    import spglib

    lat, sp, frac = _hexagonal_polytype("ccc", {"A": "K", "B": "Mg"})
    nums = [{"K": 19, "Mg": 12, "H": 1}[s] for s in sp]
    assert spglib.get_symmetry_dataset((lat, frac, nums), symprec=1e-3).number == 221


@pytest.mark.parametrize("name", sorted(STRUCTURE_TYPES))
def test_every_prototype_has_its_space_group_and_formula(name: str) -> None:
    comp = next(c for c in typed_compositions() if c.structure_type == name)
    atoms = build_structure_type(name, comp.roles)  # raises unless the space group is the type's
    counts = Counter(atoms.get_chemical_symbols())
    st = STRUCTURE_TYPES[name]
    per_fu = {comp.roles.get(r, r): n for r, n in st.formula}
    k = counts["H"] // per_fu["H"]
    assert k >= 1 and all(counts[el] == n * k for el, n in per_fu.items())


def test_coordination_signatures_tell_the_topologies_apart() -> None:
    two_h = coordination_signature(build_structure_type("2H", {"A": "Cs", "B": "Mg"}), ["Mg"])
    assert two_h == (("H", "Mg", 2, 6), ("Mg", "H", 6, 2))  # face-sharing: every H bridges two Mg
    rp1 = coordination_signature(build_structure_type("RP1", {"A": "K", "B": "Mg"}), ["Mg"])
    assert ("H", "Mg", 1, 2) in rp1 and ("H", "Mg", 2, 2) in rp1  # apical and equatorial H
    k2 = coordination_signature(build_structure_type("K2PtCl6", {"A": "Mg", "B": "Fe"}), ["Fe"])
    assert k2 == (("Fe", "H", 6, 1), ("H", "Fe", 1, 6))  # isolated octahedra


def test_topology_check_refuses_collapse_and_broken_bonds() -> None:
    start = build_structure_type("RP1", {"A": "K", "B": "Mg"})
    assert topology_defect(start, start.copy(), ["Mg"], spacegroup=139, relaxed_spacegroup=139) == ""
    assert "space group" in topology_defect(start, start.copy(), ["Mg"], spacegroup=139, relaxed_spacegroup=123)
    squeezed = start.copy()
    squeezed.set_cell(start.cell[:] * 0.8, scale_atoms=True)
    assert "volume changed by -49 %" in topology_defect(start, squeezed, ["Mg"], spacegroup=139,
                                                          relaxed_spacegroup=139)
    moved = start.copy()
    h = [i for i, s in enumerate(moved.get_chemical_symbols()) if s == "H"][0]
    mg = [i for i, s in enumerate(moved.get_chemical_symbols()) if s == "Mg"][0]
    pos = moved.get_positions()
    pos[h] = pos[mg] + np.array([0.0, 0.0, 0.3])  # an H pushed into the Mg: bonds change
    moved.set_positions(pos)
    assert "coordination changed" in topology_defect(start, moved, ["Mg"], spacegroup=139, relaxed_spacegroup=139)


def test_typed_compositions_are_unique_and_do_not_reuse_abh3_ids() -> None:
    ids = typed_material_ids()
    assert len(ids) == len(set(ids)) >= 120
    assert not set(ids) & set(material_ids())
    assert "CsMgH3-2H" in ids and "K2MgH4" in ids and "Mg2FeH6" in ids and "K2LiAlH6" in ids
    assert double_perovskite_type("Cs", "Li", "Al") == "DP-Fm-3m"
    assert double_perovskite_type("Na", "Li", "Y") == "DP-P21/n"


def test_shipped_catalog_has_the_structure_types_with_provenance() -> None:
    from c2np.catalog import catalog_entries

    entries = catalog_entries()
    types = Counter(e.structure_type_name for e in entries)
    sgs = {e.spacegroup_symprec_1e_3 for e in entries}
    assert len(entries) >= 200 and len(types) >= 8 and len(sgs) >= 10, (len(entries), types, sgs)
    abh3 = set(material_ids())
    for e in entries:
        assert e.potential_version.startswith("chgnet") and e.fmax_ev_per_angstrom == 0.01
        assert e.max_force_ev_per_angstrom is not None and e.max_stress_gpa is not None
        assert e.energy_above_polymorph_ev_per_atom is not None and e.energy_above_polymorph_ev_per_atom >= 0
        if e.material_id not in abh3:
            st = STRUCTURE_TYPES[e.structure_type_name]
            assert e.prototype_compound == st.prototype
            assert e.prototypes[0].spacegroup_symprec_1e_3 == st.spacegroup  # the topology check held
    # a polytype and the perovskite of one composition: one of them is the lowest
    pair = {e.material_id: e for e in entries if e.formula == "CsMgH3"}
    assert len(pair) >= 2 and min(e.energy_above_polymorph_ev_per_atom for e in pair.values()) == 0.0


def _cli(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "c2np", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def test_catalog_list_filters_by_structure_type_and_show_names_the_prototype() -> None:
    res = _cli("catalog", "list", "--json", "--structure-type", "RP1,2H")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["materials"]
    assert rows and {r["structure_type"] for r in rows} == {"RP1", "2H"}
    assert all(r["provenance"]["potential"].startswith("chgnet") for r in rows)
    bad = _cli("catalog", "list", "--structure-type", "nonsense")
    assert bad.returncode == 2 and "nonsense" in bad.stderr and "Traceback" not in bad.stderr
    show = _cli("catalog", "show", "K2MgH4")
    assert show.returncode == 0 and "prototype K2NiF4" in show.stdout


def _store_info(path: Path) -> tuple[str, list[str]]:
    import h5py

    with h5py.File(path, "r") as f:
        return str(f.attrs["fingerprint"]), json.loads(f["recipes"].attrs["heldout_materials"])


def test_paper_and_strict_stores_are_unchanged(tmp_path: Path) -> None:
    for protocol, fp in (("paper", PAPER_RADIUS_6_FINGERPRINT), ("strict", STRICT_RADIUS_6_FINGERPRINT)):
        out = tmp_path / f"{protocol}.h5"
        res = _cli("build", "--out", str(out), "--radii", "6", "--protocol", protocol, "--json")
        assert res.returncode == 0, res.stderr
        got, held = _store_info(out)
        assert got == fp, protocol
        assert held == (STRICT_HELDOUT if protocol == "strict" else [])


def test_strict_structure_holds_out_whole_types(tmp_path: Path) -> None:
    from c2np.catalog import catalog_entries
    from c2np.sealed import heldout_parts

    entries = catalog_entries()
    by_type: dict[str, list[str]] = {}
    for e in entries:
        by_type.setdefault(e.structure_type_name, []).append(e.material_id)
    pick = sorted(by_type["perovskite-R-3c"][:2] + by_type["K2PtCl6"][:2] + by_type["RP1"][:6]
                  + by_type["perovskite-Pm-3m"][:6] + STRICT_HELDOUT[:2])
    out = tmp_path / "ss.h5"
    res = _cli("build", "--out", str(out), "--radii", "6", "--protocol", "strict-structure",
               "--materials", ",".join(pick), "--json")
    assert res.returncode == 0, res.stderr
    _, held = _store_info(out)
    unseen = set(by_type["perovskite-R-3c"][:2] + by_type["K2PtCl6"][:2])
    assert unseen <= set(held)
    assert set(STRICT_HELDOUT[:2]) <= set(held)  # strict's held-out ABH3 stay held out
    assert set(held) < set(pick)  # some materials of the seen types train
    parts = heldout_parts(held)
    assert set(parts.dev) | set(parts.test) == set(held)
    # task-2 results carry one aggregate per structure type, and which types training saw
    from c2np.catalog.shipped import structure_types_of
    from c2np.store import DatasetStore
    from c2np.tasks import evaluate_task

    store = DatasetStore.open(out)
    res = evaluate_task("inverse", store, {}, "heldout", "eval", per_group=1, n_resamples=50)
    groups = res.data["metrics"]["per_structure_type"]
    assert set(groups) == set(structure_types_of(held))
    assert sum(g["spacegroup_accuracy"]["n"] for g in groups.values()) == res.data["n_samples"]
    trained = set(res.data["structure_types_in_training"])
    assert "perovskite-R-3c" not in trained and "K2PtCl6" not in trained and "RP1" in trained


def test_structure_type_tables_mark_unseen_types_and_show_intervals() -> None:
    from c2np.report import LeaderboardRow, structure_type_table
    from c2np.site.tables import structure_type_site_table

    def group(mean: float) -> dict:
        return {"spacegroup_accuracy": {"mean": mean, "ci95": [mean - 0.1, mean], "n": 4, "n_failed": 0}}

    rows = [LeaderboardRow(model=m, task="inverse", split="heldout-dev", protocol="strict-structure",
                           metrics={"spacegroup_accuracy": v}, higher_is_better={"spacegroup_accuracy": True},
                           n_samples=8, n_failed=0, per_structure_type={"RP1": group(v), "K2PtCl6": group(v / 2)},
                           structure_types_in_training=("RP1",))
            for m, v in (("solver", 1.0), ("majority-class", 0.5))]
    md = "\n".join(structure_type_table(rows, ["spacegroup_accuracy"]))
    assert "| RP1 | seen | 4 | 0.500 [0.40, 0.50] | 1.000 [0.90, 1.00] |" in md
    assert "| K2PtCl6 | **unseen** | 4 |" in md
    table = structure_type_site_table(rows, "heldout-dev", "spacegroup_accuracy", kinds={}, info={},
                                      table_id="t", title="t")
    assert table is not None and [r["model"] for r in table.records] == ["solver", "majority-class"]
    assert [c.label for c in table.columns if c.kind == "metric"] == ["RP1 (seen, n=4)", "K2PtCl6 (unseen, n=4)"]
    assert structure_type_site_table(rows, "id", "spacegroup_accuracy", kinds={}, info={}, table_id="t",
                                     title="t") is None
