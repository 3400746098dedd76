"""Exports where researchers load data: Parquet with a dataset card (read by ``datasets`` and
pandas: same rows and fingerprint as the store), ``c2np verify-export`` (a damaged file is
one line, exit 2), ASE's database, and extxyz split files without held-out rows in train."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from c2np.cli import build_app
from c2np.errors import C2NPInputError
from c2np.store import DatasetStore, build_store, quaternions_to_matrices
from c2np.tasks import example_rows, inverse_target, select_rows
from helpers import perovskite

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cells = [perovskite(a=4.0 + 0.05 * i, ids=f"M{i}", A=[19, 11, 37, 55, 3][i]) for i in range(5)]
    return build_store(cells, tmp_path_factory.mktemp("ex") / "strict.h5", "strict", radii_angstrom=[6, 13, 14],
                       progress=False)


@pytest.fixture(scope="module")
def export(store_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pq") / "export"
    res = CliRunner().invoke(build_app(), ["export", str(store_path), "--format", "parquet", "-o", str(out),
                                           "--split", "train,val,heldout", "--rotations-per-group", "1"])
    assert res.exit_code == 0, res.output
    return out


def test_parquet_export_has_the_store_rows_and_fingerprint(export: Path, store_path: Path) -> None:
    import pyarrow.parquet as pq

    from c2np.parquet_export import read_parquet_export

    store = DatasetStore.open(store_path)
    t = store.recipes
    assert sorted(p.name for p in export.iterdir()) == ["README.md", "base.parquet", "cells.parquet",
                                                        "recipes.parquet", "samples.parquet"]
    recipes = pd.read_parquet(export / "recipes.parquet")
    assert recipes["sample_id"].tolist() == t.sample_ids()
    assert np.array_equal(np.stack(recipes["quaternion_xyzw"].to_numpy()), t.quaternion)
    # split == train / val is exactly what a model may learn from; held-out materials never in it
    for split in ("train", "val"):
        assert np.array_equal(np.flatnonzero(recipes["split"] == split), example_rows(t, split))
    assert np.array_equal(np.flatnonzero(recipes["heldout_material"]), select_rows(t, "heldout", "full"))
    assert not recipes.loc[recipes["split"] == "train", "material"].isin(t.heldout_materials).any()
    # a sample's particle: its base particle rotated by its quaternion
    base = pd.read_parquet(export / "base.parquet")
    for row in (0, len(t) // 2, len(t) - 1):
        b = base.iloc[int(recipes["base_index"][row])]
        pos = np.stack(b["positions_angstrom"]).astype(np.float64) @ quaternions_to_matrices(t.quaternion[row])[0].T
        nums, want = store.particle_arrays(row)
        assert np.array_equal(np.asarray(b["numbers"], dtype=np.int64), nums) and np.allclose(pos, want, atol=1e-9)
    # the fingerprint: recorded in every file and recomputed from the tables
    meta = json.loads(pq.read_schema(export / "base.parquet").metadata[b"c2np"])
    assert meta["fingerprint"] == store.fingerprint
    back = read_parquet_export(export)
    assert back.recipes.canonical_bytes() == t.canonical_bytes()
    assert np.array_equal(back.base.positions_angstrom, store.base.positions_angstrom)  # float32, exact
    check = back.check()
    assert check.ok, check.problems
    assert check.fingerprint_recomputed == back.fingerprint == store.fingerprint
    card = (export / "README.md").read_text()
    assert store.fingerprint in card and "license: mit" in card and "positions_angstrom" in card and "Å" in card
    # materialised rows: the loaders' rows, targets on train / val only
    samples = pd.read_parquet(export / "samples.parquet")
    n_train, n_val = (len(example_rows(t, s, rotations_per_group=1)) for s in ("train", "val"))
    assert samples["split"].value_counts().to_dict() == {"train": n_train, "val": n_val,
                                                         "heldout": len(select_rows(t, "heldout", "full"))}
    first = samples.iloc[0]
    target = inverse_target(store.cells[first["material"]])
    assert first["spacegroup"] == target.spacegroup and np.allclose(first["lattice_parameters"],
                                                                     target.parameters.as_array())
    assert samples.loc[samples["split"] == "heldout", "spacegroup"].isna().all()


def test_datasets_loads_the_export_offline(export: Path, store_path: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    datasets = pytest.importorskip("datasets")
    store = DatasetStore.open(store_path)
    ds = {name: datasets.load_dataset("parquet", data_files=str(export / f"{name}.parquet"), split="train",
                                      cache_dir=str(tmp_path / "hf")) for name in ("recipes", "base")}
    assert ds["recipes"].num_rows == len(store) and ds["recipes"]["sample_id"] == store.recipes.sample_ids()
    assert ds["base"].num_rows == len(store.base.material_index)
    got = ds["recipes"].filter(lambda r: r["split"] == "train")
    assert sorted(got["sample_id"]) == sorted(store.recipes.sample_id(int(r))
                                              for r in example_rows(store.recipes, "train"))
    b0 = ds["base"][0]
    nums, pos = store.base.get(0)
    assert b0["numbers"] == nums.tolist() and np.allclose(np.array(b0["positions_angstrom"]), pos)


def test_verify_export_damaged_and_tampered(export: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from c2np import limits

    monkeypatch.setenv(limits.ENV_VAR, "")  # restored after the test: --limit writes it

    import pyarrow.parquet as pq

    runner = CliRunner()
    res = runner.invoke(build_app(), ["verify-export", str(export)])
    assert res.exit_code == 0 and "intact" in res.output
    broken = tmp_path / "broken"
    shutil.copytree(export, broken)
    data = (broken / "base.parquet").read_bytes()
    (broken / "base.parquet").write_bytes(data[: len(data) // 2])
    res = runner.invoke(build_app(), ["verify-export", str(broken)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "base.parquet" in lines[0] and "not a readable Parquet file" in lines[0]
    (broken / "base.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(C2NPInputError, match="base.parquet: not a readable Parquet file"):
        from c2np.parquet_export import read_parquet_export

        read_parquet_export(broken)
    # a readable but edited table: the recomputed fingerprint differs (exit 1)
    tampered = tmp_path / "tampered"
    shutil.copytree(export, tampered)
    table = pq.read_table(tampered / "recipes.parquet")
    radii = table.column("radius_angstrom").to_numpy().copy()
    radii[0] += 1
    table = table.set_column(table.column_names.index("radius_angstrom"), "radius_angstrom", pa.array(radii))
    pq.write_table(table, tampered / "recipes.parquet")
    res = runner.invoke(build_app(), ["verify-export", str(tampered), "--json"])
    assert res.exit_code == 1 and json.loads(res.stdout)["ok"] is False
    moved = tmp_path / "moved"  # one base position moved by 0.01 Å
    shutil.copytree(export, moved)
    table = pq.read_table(moved / "base.parquet")
    pos = table.column("positions_angstrom").to_pylist()
    pos[0][0][0] += 0.01
    col = pa.array(pos, type=table.schema.field("positions_angstrom").type)
    table = table.set_column(table.column_names.index("positions_angstrom"), "positions_angstrom", col)
    pq.write_table(table, moved / "base.parquet")
    res = runner.invoke(build_app(), ["verify-export", str(moved)])
    assert res.exit_code == 1 and "positions differ from the re-carve" in res.output
    res = runner.invoke(build_app(), ["--limit", "store_bytes=1000", "verify-export", str(export)])
    assert res.exit_code == 2 and "store_bytes" in res.output
    res = runner.invoke(build_app(), ["verify-export", str(tmp_path / "absent")])
    assert res.exit_code == 2 and "no such export folder" in res.output


def test_a_sharded_store_exports_with_its_fingerprint(tmp_path: Path) -> None:
    from c2np.parquet_export import export_parquet, read_parquet_export

    cells = [perovskite(a=4.0 + 0.05 * i, ids=f"S{i}", A=[19, 11, 37][i]) for i in range(3)]
    path = build_store(cells, tmp_path / "sharded" / "store.json", radii_angstrom=[6, 7], progress=False, shards=2)
    store = DatasetStore.open(path)
    assert store.manifest is not None
    export_parquet(path, tmp_path / "export")
    check = read_parquet_export(tmp_path / "export").check()
    assert check.ok and check.fingerprint_recomputed == store.fingerprint


def test_asedb_and_extxyz_exports(store_path: Path, tmp_path: Path) -> None:
    from ase.db import connect

    from c2np.formats import export_extxyz
    from c2np.particle_io import iter_extxyz

    store = DatasetStore.open(store_path)
    t = store.recipes
    res = CliRunner().invoke(build_app(), ["export", str(store_path), "--format", "asedb", "-o",
                                           str(tmp_path / "c2np.db"), "--split", "val,ood"])
    assert res.exit_code == 0, res.output
    db = connect(tmp_path / "c2np.db")
    assert db.metadata["fingerprint"] == store.fingerprint
    assert db.count(kind="cell") == 5 and db.count(kind="base") == len(store.base.material_index)
    assert db.count(split="val") == len(example_rows(t, "val"))
    assert db.count(split="ood") == len(select_rows(t, "ood", "full"))
    val = next(db.select(split="val"))
    assert val.spacegroup == 221 and val.material not in t.heldout_materials and np.isclose(val.a, 4.0, atol=0.3)
    ood = next(db.select(split="ood"))
    assert "spacegroup" not in ood.key_value_pairs and "material" not in ood.key_value_pairs
    row = int(store.rows_for_ids([ood.sample_id])[0])
    assert np.allclose(ood.toatoms().positions, store.particle_arrays(row)[1])
    res = CliRunner().invoke(build_app(), ["export", str(store_path), "--format", "asedb", "-o",
                                           str(tmp_path / "x.db"), "--split", "everything"])
    assert res.exit_code == 2 and "unknown split" in res.output
    # extxyz: train.extxyz holds no held-out material; heldout.extxyz holds its train / val radii
    paths = export_extxyz(store, tmp_path / "xyz", splits=["train", "heldout"], progress=False)
    train = [info for _, _, info in iter_extxyz(paths[0])]
    assert [i["sample_id"] for i in train] == [t.sample_id(int(r)) for r in example_rows(t, "train")]
    held = [info for _, _, info in iter_extxyz(paths[1])]
    assert held and {i["material"] for i in held} == set(t.heldout_materials)
    assert {i["split"] for i in held} == {"heldout"}
