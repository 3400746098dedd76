"""Tests of the catalog build orchestration (c2np.catalog.build): resumable builds, worker
processes sharing a folder, and the lock file."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import stat
import tempfile
from pathlib import Path

import pytest

from c2np.catalog import build as bld
from c2np.catalog.shipped import catalog_data_dir, catalog_entries
from c2np.cells import read_cells
from c2np.errors import C2NPInputError

needs_chgnet = pytest.mark.skipif(importlib.util.find_spec("chgnet") is None, reason="needs chgnet")


def _seed_with_shipped(folder: Path, material_id: str) -> tuple[str, ...]:
    """Copy one shipped material (CIF + its record) into ``folder`` as a finished build;
    returns the prototypes it was built from."""
    entry = next(e for e in catalog_entries() if e.material_id == material_id)
    shipped = json.loads((catalog_data_dir() / "catalog.json").read_text(encoding="utf-8"))
    doc = dict(shipped, materials=[entry.to_dict()], failures=[])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "catalog.json").write_text(json.dumps(doc), encoding="utf-8")
    (folder / f"{material_id}.cif").write_text((catalog_data_dir() / f"{material_id}.cif").read_text())
    return tuple(p.prototype for p in entry.prototypes)


# --- inputs and resuming (no potential) -----------------------------------------------------
def test_unknown_ids_are_rejected_by_name() -> None:
    with pytest.raises(C2NPInputError, match="XyH3.*valid ids.*KMgH3"):
        bld.build_catalog("/nonexistent-never-created", only=["XyH3"], progress=False)


def test_finished_material_is_kept_and_lock_lives_in_the_output_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "cat"
    prototypes = _seed_with_shipped(out, "KMgH3")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    (entry,) = bld.build_catalog(out, only=["KMgH3"], prototypes=prototypes, progress=False)
    assert entry == next(e for e in catalog_entries() if e.material_id == "KMgH3")
    assert (out / bld.LOCK_NAME).is_file()
    assert list(tmp.iterdir()) == []  # nothing at a predictable path in the temp folder
    # the lock is hidden: reading the folder as cells sees only the CIF
    assert [c.material_id for c in read_cells(out)] == ["KMgH3"]


# --- the lock --------------------------------------------------------------------------------
def test_lock_excludes_a_second_holder(tmp_path: Path) -> None:
    with bld.build_lock(tmp_path) as lock:
        assert lock.path == tmp_path / bld.LOCK_NAME
        fd = os.open(lock.path, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    fd = os.open(tmp_path / bld.LOCK_NAME, os.O_RDWR)  # released on exit
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_lock_is_created_with_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        with bld.build_lock(tmp_path) as lock:
            mode = stat.S_IMODE(os.stat(lock.path).st_mode)
    finally:
        os.umask(old)
    assert mode == 0o640


def test_lock_never_follows_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / bld.LOCK_NAME).symlink_to(victim)
    with pytest.raises(C2NPInputError, match="symlink"), bld.build_lock(tmp_path):
        pass
    dangling = tmp_path / "other"
    dangling.mkdir()
    (dangling / bld.LOCK_NAME).symlink_to(tmp_path / "created-through-link")
    with pytest.raises(C2NPInputError, match="symlink"), bld.build_lock(dangling):
        pass
    assert victim.read_text() == "keep me"
    assert not (tmp_path / "created-through-link").exists()


def test_lock_refuses_a_non_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / bld.LOCK_NAME)
    with pytest.raises(C2NPInputError, match="not a regular file"), bld.build_lock(tmp_path):
        pass


def test_cli_build_with_planted_lock_symlink_exits_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from c2np.cli import build_app

    out = tmp_path / "cat"
    _seed_with_shipped(out, "KMgH3")
    (out / bld.LOCK_NAME).symlink_to(tmp_path / "elsewhere")
    res = CliRunner().invoke(build_app(), ["catalog", "build", "--only", "KMgH3", "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert "symlink" in res.output and not (tmp_path / "elsewhere").exists()


# --- building with CHGNet ---------------------------------------------------------------------
@needs_chgnet
def test_build_one_cubic_material_is_fast_and_cubic(tmp_path: Path) -> None:
    entries = bld.build_catalog(tmp_path, only=["KMgH3"], prototypes=("Pm-3m",), progress=False)
    (entry,) = entries
    assert entry.status == "ok" and entry.chosen_prototype == "Pm-3m"
    assert entry.spacegroup_symprec_1e_3 == 221 and entry.spacegroup_symprec_1e_1 == 221
    assert entry.max_force_ev_per_angstrom < 0.01
    assert 3.9 < entry.lattice_parameters["a"] < 4.15  # KMgH3, experiment 4.02 Å
    cells = read_cells(tmp_path)
    assert [c.material_id for c in cells] == ["KMgH3"]
    doc = json.loads((tmp_path / "catalog.json").read_text())
    assert [m["material_id"] for m in doc["materials"]] == ["KMgH3"]
    assert doc["n_not_built"] == 81
    # the shipped cell is what this build produces (when the cubic prototype won there)
    shipped = {e.material_id: e for e in catalog_entries()}.get("KMgH3")
    if shipped is not None and shipped.chosen_prototype == "Pm-3m":
        assert entry.lattice_parameters["a"] == pytest.approx(shipped.lattice_parameters["a"], abs=1e-5)
        assert entry.energy_per_atom_ev == pytest.approx(shipped.energy_per_atom_ev, abs=1e-5)
    # resumable: a second call finds KMgH3 done and relaxes nothing
    again = bld.build_catalog(tmp_path, only=["KMgH3"], prototypes=("Pm-3m",), progress=False)
    assert again[0].time_s == entry.time_s
    # another potential in the same folder is refused, not mixed in
    with pytest.raises(C2NPInputError, match="potential"):
        bld.build_catalog(tmp_path, potential="sevenn", only=["KMgH3"], progress=False)


@needs_chgnet
def test_parallel_build_equals_serial_build(tmp_path: Path) -> None:
    """Two worker processes share one folder: every material is built once, the document
    holds all of them, and the cells equal a one-process build's."""
    ids = ["KMgH3", "NaMgH3", "CsCaH3"]
    par = bld.build_catalog(tmp_path / "par", only=ids, prototypes=("Pm-3m",), progress=False,
                            workers=2)
    assert [e.material_id for e in par] == ids and all(e.status == "ok" for e in par)
    doc = json.loads((tmp_path / "par" / "catalog.json").read_text())
    assert sorted(m["material_id"] for m in doc["materials"]) == sorted(ids)
    assert doc["n_not_built"] == 82 - 3
    ser = bld.build_catalog(tmp_path / "ser", only=ids[:1], prototypes=("Pm-3m",), progress=False)
    assert par[0].lattice_parameters["a"] == pytest.approx(ser[0].lattice_parameters["a"], abs=1e-9)
    assert par[0].energy_per_atom_ev == pytest.approx(ser[0].energy_per_atom_ev, abs=1e-9)
    with pytest.raises(C2NPInputError, match="workers"):
        bld.build_catalog(tmp_path / "bad", only=ids, progress=False, workers=0)
    # no stray temp files of the atomic writes are left in the shared folder
    assert sorted(p.name for p in (tmp_path / "par").iterdir()) == sorted(
        [bld.LOCK_NAME, "catalog.json"] + [f"{m}.cif" for m in ids])


def _planted_shard(folder: Path, ids: list[str], index: int, count: int) -> None:
    """A finished shard folder without relaxing: the shipped entries and CIFs of its share."""
    from c2np.sharding import shard_positions

    mine = [ids[int(k)] for k in shard_positions(len(ids), index, count)]
    folder.mkdir(parents=True)
    shipped = {e.material_id: e for e in catalog_entries()}
    entries = [shipped[m] for m in mine]
    for m in mine:
        (folder / f"{m}.cif").write_text((Path(str(catalog_data_dir())) / f"{m}.cif").read_text())
    doc = bld._catalog_document(entries, potential=entries[0].potential, fmax=entries[0].fmax_ev_per_angstrom,
                                started=f"2026-01-0{index + 1}T00:00:00+00:00")
    (folder / "catalog.json").write_text(json.dumps(doc, indent=1) + "\n")
    run = bld._run_identity(ids, potential=entries[0].potential, fmax=entries[0].fmax_ev_per_angstrom,
                            prototypes=list(bld.PROTOTYPES), max_steps=1000, optimizer="FIRE")
    (folder / bld.SHARD_RECORD).write_text(json.dumps({
        "schema": bld.SHARD_SCHEMA, "shard": {"index": index, "count": count}, "run": run,
        "n_rows": len(ids), "materials": mine}))


def test_catalog_shards_merge_into_one_document(tmp_path: Path) -> None:
    """catalog merge: the shards' materials, CIFs and entries in one catalog.json, as one build
    writes it; missing, repeated, foreign and unfinished shards are refused."""
    ids = [e.material_id for e in catalog_entries()][:5]
    parts = [tmp_path / f"part{i}" for i in range(3)]
    for i, p in enumerate(parts):
        _planted_shard(p, ids, i, 3)
    merged = bld.merge_catalogs(list(reversed(parts)), tmp_path / "out")
    assert [e.material_id for e in merged] == ids
    doc = json.loads((tmp_path / "out" / "catalog.json").read_text())
    shipped = {e.material_id: e for e in catalog_entries()}
    one = bld._catalog_document([shipped[m] for m in ids], potential=doc["potential"],
                                fmax=doc["fmax_ev_per_angstrom"], started="2026-01-01T00:00:00+00:00")
    assert doc == json.loads(json.dumps(one))
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == sorted(["catalog.json"] + [f"{m}.cif" for m in ids])
    with pytest.raises(C2NPInputError, match="missing shard"):
        bld.merge_catalogs(parts[:2], tmp_path / "o2")
    with pytest.raises(C2NPInputError, match="given twice"):
        bld.merge_catalogs([parts[0], *parts], tmp_path / "o3")
    _planted_shard(tmp_path / "foreign", ids[:4], 1, 3)
    with pytest.raises(C2NPInputError, match="another run"):
        bld.merge_catalogs([parts[0], tmp_path / "foreign", parts[2]], tmp_path / "o4")
    with pytest.raises(C2NPInputError, match="not an empty folder"):
        bld.merge_catalogs(parts, tmp_path / "out")
    doc1 = json.loads((parts[1] / "catalog.json").read_text())
    doc1["materials"] = doc1["materials"][:-1]
    (parts[1] / "catalog.json").write_text(json.dumps(doc1))
    with pytest.raises(C2NPInputError, match="not finished"):
        bld.merge_catalogs(parts, tmp_path / "o5")


@needs_chgnet
def test_catalog_build_shard_writes_its_share_and_record(tmp_path: Path) -> None:
    ids = ["KMgH3", "NaMgH3", "CsCaH3"]
    got = bld.build_catalog(tmp_path / "s1", only=ids, prototypes=("Pm-3m",), progress=False, shard=(1, 2))
    assert [e.material_id for e in got] == ["NaMgH3"]
    rec = json.loads((tmp_path / "s1" / bld.SHARD_RECORD).read_text())
    assert rec["shard"] == {"index": 1, "count": 2} and rec["materials"] == ["NaMgH3"] and rec["n_rows"] == 3
