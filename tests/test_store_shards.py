"""Sharded dataset stores (build --shards K): the same samples as the single-file store,
verification, the fingerprint's definition and stability, refusal of missing, extra,
renamed or altered shards, a killed build, limits, and the CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from c2np.baselines import analytic_carve, predict
from c2np.cli import build_app
from c2np.errors import C2NPInputError, C2NPLimitError, C2NPStoreError
from c2np.limits import override
from c2np.store import DatasetStore, build_store, require_intact, verify_store
from c2np.store.manifest import partition_materials, read_manifest, shard_file_name, sharded_fingerprint
from c2np.tasks import ForwardTask, InverseTask
from helpers import perovskite

RADII = [6, 10]
SRC = Path(__file__).resolve().parents[1] / "src"


def four_cells() -> list:
    return [perovskite(), perovskite(a=3.9, ids="NaMgH3", A=11), perovskite(a=4.4, ids="RbCaH3", A=37, B=20),
            perovskite(a=4.2, ids="CsCaH3", A=55, B=20)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("sharded")
    single = build_store(four_cells(), tmp / "one.h5", radii_angstrom=RADII, progress=False)
    out = {"tmp": tmp, "single": single}
    for k in (1, 3):
        out[k] = build_store(four_cells(), tmp / f"k{k}" / "ds.json", radii_angstrom=RADII, progress=False,
                             shards=k)
    return out


def _copy(built: dict, k: int, dest: Path) -> Path:
    shutil.copytree(built[k].parent, dest)
    return dest / "ds.json"


@pytest.mark.parametrize("k", [1, 3])
def test_sharded_store_reads_the_same_samples(built: dict, k: int) -> None:
    one = DatasetStore.open(built["single"])
    for opened in (DatasetStore.open(built[k]), DatasetStore.open(built[k].parent)):  # manifest or folder
        assert len(opened.manifest.shards) == k
        assert opened.recipes.canonical_bytes() == one.recipes.canonical_bytes()
        assert opened.recipes.sample_ids() == one.recipes.sample_ids()
        assert opened.materials == one.materials and list(opened.cells) == list(one.cells)
        assert opened.recipes.summary == one.recipes.summary
        for row in range(len(one)):
            n1, x1 = one.particle_arrays(row)
            n2, x2 = opened.particle_arrays(row)
            assert np.array_equal(n1, n2) and np.array_equal(x1, x2) and x1.dtype == x2.dtype
        for m in one.materials:
            for r in RADII:
                assert np.array_equal(one.base_particle(m, r).positions_angstrom,
                                      opened.base_particle(m, r).positions_angstrom)
        s1, s2 = one.sample(7), opened.sample(7)
        assert (s1.sample_id, s1.split, s1.rotation_index) == (s2.sample_id, s2.split, s2.rotation_index)
        info = opened.info()
        assert info["n_shards"] == k and info["n_samples"] == len(one)
        assert info["per_split"] == one.info()["per_split"]
        assert info["file_bytes"] == sum(p.stat().st_size for p in opened.files())


@pytest.mark.parametrize("k", [1, 3])
def test_sharded_store_verifies(built: dict, k: int) -> None:
    report = verify_store(built[k])
    assert report.ok, report.problems
    assert report.recipes_match_protocol is True and report.n_base_checked == 8
    assert report.fingerprint_recomputed == DatasetStore.open(built[k]).fingerprint
    require_intact(DatasetStore.open(built[k]))


def test_fingerprint_definition_and_stability(built: dict, tmp_path: Path) -> None:
    single = DatasetStore.open(built["single"])
    one = DatasetStore.open(built[1])
    three = DatasetStore.open(built[3])
    # a one-shard store: its shard has the single-file fingerprint F; the store has f([(0, n, F)])
    assert one.manifest.shards[0].fingerprint == single.fingerprint
    assert one.fingerprint == sharded_fingerprint([(0, len(single), single.fingerprint)])
    assert one.fingerprint != single.fingerprint != three.fingerprint != one.fingerprint
    entries = three.manifest.shards
    assert three.fingerprint == sharded_fingerprint([(e.row_start, e.row_stop, e.fingerprint) for e in entries])
    # rebuilt elsewhere (and under another name): the same fingerprints, shard by shard
    again = DatasetStore.open(build_store(list(reversed(four_cells())), tmp_path / "x" / "other.json",
                                          radii_angstrom=RADII, progress=False, shards=3))
    assert again.fingerprint == three.fingerprint
    assert [e.fingerprint for e in again.manifest.shards] == [e.fingerprint for e in entries]
    assert [e.materials for e in again.manifest.shards] == [e.materials for e in entries]
    # the manifest is a documented JSON record
    doc = json.loads(built[3].read_text())
    assert doc["schema"] == "c2np.store-manifest/1" and doc["n_shards"] == 3
    assert [s["file"] for s in doc["shards"]] == [shard_file_name("ds", i, 3) for i in range(3)]
    assert sum(s["n_samples"] for s in doc["shards"]) == doc["n_samples"] == len(single)


def test_partition_is_contiguous_balanced_and_bounded() -> None:
    assert partition_materials([1, 1, 1, 1], 2) == [(0, 2), (2, 4)]
    assert partition_materials([10, 1, 1, 1, 1], 2) == [(0, 1), (1, 5)]
    assert partition_materials([1, 1, 1], 3) == [(0, 1), (1, 2), (2, 3)]
    assert partition_materials([0, 0, 0, 5], 3)[-1] == (3, 4)  # the heavy material alone
    for k in range(1, 8):
        cuts = partition_materials(list(np.random.default_rng(k).random(7)), k)
        assert cuts[0][0] == 0 and cuts[-1][1] == 7 and all(a < b for a, b in cuts)
        assert all(cuts[i][1] == cuts[i + 1][0] for i in range(k - 1))
    with pytest.raises(C2NPInputError, match="1 <= K <= 3"):
        partition_materials([1, 1, 1], 4)


def test_missing_shard_is_refused(built: dict, tmp_path: Path) -> None:
    mp = _copy(built, 3, tmp_path / "s")
    (mp.parent / shard_file_name("ds", 1, 3)).unlink()
    with pytest.raises(C2NPStoreError, match=r"ds-shard-00001-of-00003\.h5: shard 1 of 3 .* is missing"):
        DatasetStore.open(mp)


def test_renamed_shard_is_refused(built: dict, tmp_path: Path) -> None:
    mp = _copy(built, 3, tmp_path / "s")
    (mp.parent / shard_file_name("ds", 2, 3)).rename(mp.parent / "ds-shard-2.h5")
    with pytest.raises(C2NPStoreError, match=r"ds-shard-00002-of-00003\.h5: shard 2 of 3 .* is missing"):
        DatasetStore.open(mp)
    (mp.parent / "ds-shard-2.h5").rename(mp.parent / shard_file_name("ds", 2, 3))
    a, b = mp.parent / shard_file_name("ds", 0, 3), mp.parent / shard_file_name("ds", 1, 3)
    a.rename(tmp_path / "swap")
    b.rename(a)
    (tmp_path / "swap").rename(b)  # shards 0 and 1 swapped
    with pytest.raises(C2NPStoreError, match=r"ds-shard-0000[01]-of-00003\.h5: .*(bytes|sha256)"):
        DatasetStore.open(mp)


def test_extra_shard_is_refused(built: dict, tmp_path: Path) -> None:
    mp = _copy(built, 3, tmp_path / "s")
    shutil.copy(mp.parent / shard_file_name("ds", 0, 3), mp.parent / "ds-shard-00003-of-00004.h5")
    with pytest.raises(C2NPStoreError, match=r"ds-shard-00003-of-00004\.h5: a shard file of store 'ds' that "):
        DatasetStore.open(mp.parent)


def test_tampered_or_truncated_shard_is_refused(built: dict, tmp_path: Path) -> None:
    mp = _copy(built, 3, tmp_path / "s")
    sp = mp.parent / shard_file_name("ds", 1, 3)
    data = bytearray(sp.read_bytes())
    data[len(data) // 2] ^= 0xFF
    sp.write_bytes(bytes(data))
    with pytest.raises(C2NPStoreError, match=r"ds-shard-00001-of-00003\.h5: sha256 .* differs .*tampered"):
        DatasetStore.open(mp)
    sp.write_bytes(bytes(data[:-10]))
    with pytest.raises(C2NPStoreError, match=r"ds-shard-00001-of-00003\.h5: .* bytes, but .* records"):
        DatasetStore.open(mp)


def test_altered_shard_with_a_rewritten_manifest_fails_verify(built: dict, tmp_path: Path) -> None:
    """A shard changed in place whose manifest entry was rehashed opens, but verify and the
    scoring guard find it and name the shard."""
    import h5py

    from c2np.fileio import file_sha256

    mp = _copy(built, 3, tmp_path / "s")
    sp = mp.parent / shard_file_name("ds", 2, 3)
    with h5py.File(sp, "r+") as f:
        f["base/positions"][0] = f["base/positions"][0] + np.float32(0.05)
    doc = json.loads(mp.read_text())
    doc["shards"][2].update(sha256=file_sha256(sp), bytes=sp.stat().st_size)
    mp.write_text(json.dumps(doc))
    store = DatasetStore.open(mp)
    report = verify_store(mp)
    assert not report.ok
    assert any(p.startswith("ds-shard-00002-of-00003.h5: ") and "positions differ" in p for p in report.problems)
    with pytest.raises(C2NPStoreError, match="does not match its fingerprint"):
        require_intact(store)


def test_edited_manifest_is_refused(built: dict, tmp_path: Path) -> None:
    mp = _copy(built, 3, tmp_path / "s")
    good = json.loads(mp.read_text())
    cases = {
        "fingerprint": (lambda d: d.update(fingerprint="0" * 64), "manifest was edited"),
        "shard fp": (lambda d: d["shards"][0].update(fingerprint="1" * 64), "manifest was edited"),
        "file": (lambda d: d["shards"][0].update(file="../evil.h5"), "shard file name '../evil.h5' is not a safe"),
        "other file": (lambda d: d["shards"][0].update(file="ds-shard-9.h5"), "names the file 'ds-shard-9.h5'"),
        "rows": (lambda d: d["shards"][1].update(rows=[0, 5]), "do not continue"),
        "schema": (lambda d: d.update(schema="c2np.store-manifest/9"), "not a c2np store manifest"),
        "name": (lambda d: d.update(name="../x"), "not a safe name"),
        "index": (lambda d: d["shards"][2].update(index=True), "wrong type"),
        "counts": (lambda d: d["shards"][1].update(n_base_atoms=d["shards"][1]["n_base_atoms"] + 1),
                   "counts differ from its entry"),
        "summary": (lambda d: d["summary"].update(n_samples=1), "summary differs"),
    }
    for edit, message in cases.values():
        doc = json.loads(json.dumps(good))
        edit(doc)
        mp.write_text(json.dumps(doc))
        with pytest.raises(C2NPStoreError, match=message):
            DatasetStore.open(mp)
    mp.write_text("{not json")
    with pytest.raises(C2NPStoreError, match=r"ds\.json: store manifest is not valid JSON"):
        DatasetStore.open(mp)


def test_a_shard_alone_is_refused_naming_its_manifest(built: dict) -> None:
    with pytest.raises(C2NPStoreError, match=r"is shard 0 of 3 of the sharded store 'ds'; open its manifest ds\.json"):
        DatasetStore.open(built[3].parent / shard_file_name("ds", 0, 3))


def test_readers_are_transparent(built: dict) -> None:
    """Tasks, predictions, scoring and the PyTorch loader give the single-file answers."""
    one, three = DatasetStore.open(built["single"]), DatasetStore.open(built[3])
    t1, t3 = ForwardTask(one, "ood"), ForwardTask.open(built[3], "ood")
    q1, q3 = list(t1.queries()), list(t3.queries())
    assert [q.sample_id for q in q1] == [q.sample_id for q in q3]
    p1, p3 = predict(t1, analytic_carve), predict(t3, analytic_carve)
    assert p1.keys() == p3.keys()
    assert all(np.array_equal(p1[s].positions_angstrom, p3[s].positions_angstrom) for s in p1)
    r1, r3 = t1.evaluate(p1, n_resamples=50), t3.evaluate(p3, n_resamples=50)
    assert r1.data["metrics"] == r3.data["metrics"] and r1.data["samples"] == r3.data["samples"]
    assert r1.n_samples == r3.n_samples > 0
    assert three.fingerprint in json.dumps(r3.data["dataset"]) and one.fingerprint in json.dumps(r1.data["dataset"])
    i1, i3 = InverseTask(one, "id"), InverseTask.open(built[3].parent, "id")
    a1, a3 = list(i1.queries()), list(i3.queries())
    assert len(a1) == len(a3) > 0
    assert all(np.array_equal(x.particle.positions_angstrom, y.particle.positions_angstrom) for x, y in zip(a1, a3))
    # task-2 ids are opaque per store fingerprint (docs/explanation/dataset.md): they differ between the two
    assert {x.sample_id for x in a1}.isdisjoint({y.sample_id for y in a3})
    pytest.importorskip("torch")
    from c2np.loaders import torch_dataset

    d1, d3 = torch_dataset(one, "id"), torch_dataset(three, "id")
    assert len(d1) == len(d3) > 0
    for i in (0, len(d1) // 2, len(d1) - 1):
        a, b = d1[i], d3[i]
        assert a["sample_id"] == b["sample_id"] and bool((a["positions"] == b["positions"]).all())


def test_export_is_the_same(built: dict, tmp_path: Path) -> None:
    from c2np.formats import export_extxyz

    f1 = export_extxyz(DatasetStore.open(built["single"]), tmp_path / "a", splits=["ood"], progress=False)
    f3 = export_extxyz(DatasetStore.open(built[3]), tmp_path / "b", splits=["ood"], progress=False)
    assert [p.name for p in f1] == [p.name for p in f3]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(f1, f3))


def test_limits_are_honoured(tmp_path: Path, built: dict) -> None:
    with override(store_shards=2), pytest.raises(C2NPLimitError, match="store_shards"):
        build_store(four_cells(), tmp_path / "a.json", radii_angstrom=RADII, progress=False, shards=3)
    with override(store_bytes=10_000), pytest.raises(C2NPLimitError, match="estimated size"):
        build_store(four_cells(), tmp_path / "b.json", radii_angstrom=RADII, progress=False, shards=2)
    assert not (tmp_path / "a.json").exists() and not list(tmp_path.glob("*.h5"))
    with override(store_bytes=40_000), pytest.raises(C2NPLimitError, match=r"ds\.json: declared array sizes of its 3"):
        DatasetStore.open(built[3])
    with pytest.raises(C2NPInputError, match="1 <= K <= 4"):
        build_store(four_cells(), tmp_path / "c.json", radii_angstrom=RADII, progress=False, shards=5)
    with pytest.raises(C2NPInputError, match="shard file name .* is not a safe name .*longer than 128"):
        build_store(four_cells(), tmp_path / ("n" * 120 + ".json"), radii_angstrom=RADII, progress=False, shards=2)
    with pytest.raises(C2NPInputError, match="store name .* is not a safe name"):
        build_store(four_cells(), tmp_path / ".hidden.json", radii_angstrom=RADII, progress=False, shards=2)
    with pytest.raises(C2NPInputError, match="give -o NAME.json or a folder"):
        build_store(four_cells(), tmp_path / "d.h5", radii_angstrom=RADII, progress=False, shards=2)


def test_rebuild_replaces_the_old_shards(tmp_path: Path) -> None:
    mp = build_store(four_cells(), tmp_path / "ds.json", radii_angstrom=RADII, progress=False, shards=3)
    mp = build_store(four_cells(), tmp_path / "ds.json", radii_angstrom=RADII, progress=False, shards=2)
    assert sorted(p.name for p in tmp_path.glob("ds-shard-*")) == [shard_file_name("ds", i, 2) for i in range(2)]
    assert len(DatasetStore.open(mp).manifest.shards) == 2


_KILLED_BUILD = """
import os, sys, time
sys.path.insert(0, {tests!r})
import c2np.store.shards as st
from c2np.store import build_store
from helpers import perovskite
original = st._write_h5
def slow(path, *args, **kwargs):
    out = original(path, *args, **kwargs)
    if str(path).endswith("-shard-00000-of-00003.h5"):
        print("SHARD0", flush=True)
        time.sleep(120)
    return out
st._write_h5 = slow
cells = [perovskite(), perovskite(a=3.9, ids="NaMgH3", A=11), perovskite(a=4.4, ids="RbCaH3", A=37, B=20),
         perovskite(a=4.2, ids="CsCaH3", A=55, B=20)]
build_store(cells, {out!r}, radii_angstrom=[6, 10], progress=False, shards=3)
print("DONE", flush=True)
"""


@pytest.mark.parametrize("rebuild", [False, True])
def test_killed_build_leaves_the_old_store_or_none(tmp_path: Path, rebuild: bool) -> None:
    out = tmp_path / "ds.json"
    old_fp = None
    if rebuild:  # an intact store is there; a rebuild over it is killed
        build_store(four_cells(), out, radii_angstrom=RADII, progress=False, shards=3)
        old_fp = DatasetStore.open(out).fingerprint
    script = textwrap.dedent(_KILLED_BUILD).format(tests=str(Path(__file__).parent), out=str(out))
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "SHARD0"
        staged = list(tmp_path.glob(".ds.json.*.tmp"))  # new shards are written beside, not in place
        assert len(staged) == 1 and (staged[0] / shard_file_name("ds", 0, 3)).is_file()
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    if rebuild:  # the old store is untouched
        assert DatasetStore.open(out).fingerprint == old_fp
    else:
        assert not out.exists() and not (tmp_path / shard_file_name("ds", 0, 3)).exists()
        with pytest.raises(C2NPStoreError, match="no such dataset store"):
            DatasetStore.open(out)
        with pytest.raises(C2NPStoreError, match="without a c2np store manifest"):
            DatasetStore.open(tmp_path)
    # the next build goes through, removes the killed build's staging folder, leaves exactly its shards
    mp = build_store(four_cells(), out, radii_angstrom=RADII, progress=False, shards=3)
    assert verify_store(mp).ok
    assert not list(tmp_path.glob(".ds.json.*.tmp"))
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == \
        [shard_file_name("ds", i, 3) for i in range(3)] + ["ds.json"]


def test_cli_build_info_verify_and_refusals(tmp_path: Path, built: dict) -> None:
    runner = CliRunner()
    app = build_app()
    cifs = tmp_path / "cifs"
    cifs.mkdir()
    from c2np.cells import write_cif

    for c in four_cells():
        write_cif(c, cifs / f"{c.material_id}.cif")
    res = runner.invoke(app, ["build", "--cifs", str(cifs), "--radii", "6,10", "--shards", "3",
                              "-o", str(tmp_path / "st"), "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert info["n_shards"] == 3 and (tmp_path / "st" / "store.json").is_file()
    assert info["fingerprint"] == DatasetStore.open(built[3]).fingerprint
    res = runner.invoke(app, ["verify", str(tmp_path / "st"), "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["ok"]
    for bad in (["--shards", "0"], ["--shards", "5"], ["--shards", "2", "-o", str(tmp_path / "x.h5")]):
        res = runner.invoke(app, ["build", "--cifs", str(cifs), "--radii", "6", *bad])
        assert res.exit_code == 2, (bad, res.output)
    (tmp_path / "st" / shard_file_name("store", 2, 3)).unlink()
    for cmd in (["info"], ["verify"], ["export", "-o", str(tmp_path / "e")]):
        res = runner.invoke(app, [*cmd, str(tmp_path / "st")])
        assert res.exit_code == 2, res.output
        lines = [x for x in res.output.strip().splitlines() if x.strip()]
        assert len(lines) == 1 and "store-shard-00002-of-00003.h5" in lines[0] and "missing" in lines[0]


def test_read_manifest_round_trip(built: dict) -> None:
    m = read_manifest(built[3])
    assert m.name == "ds" and len(m.shards) == 3 and m.n_samples == sum(s.n_samples for s in m.shards)
    assert [s.row_start for s in m.shards] == [0, m.shards[0].row_stop, m.shards[1].row_stop]


def test_shards_built_by_parallel_tasks_equal_serial(built: dict, tmp_path: Path) -> None:
    """K shards as K tasks: local processes and a real 2-worker Dask LocalCluster give the
    serial build's shards (fingerprints, materials, particles), and score on it as in-process."""
    from c2np.executor import LocalExecutor, make_executor

    serial = DatasetStore.open(built[3])
    executors = [LocalExecutor(2)]
    try:
        import distributed  # noqa: F401
    except ImportError:
        pass
    else:
        executors.append(make_executor(scheduler="local:2"))
    task = ForwardTask(serial, "ood")
    preds = predict(task, analytic_carve)
    expected = task.evaluate(preds, n_resamples=50).data
    for n, ex in enumerate(executors):
        with ex:
            mp = build_store(four_cells(), tmp_path / f"p{n}" / "ds.json", radii_angstrom=RADII, progress=False,
                             shards=3, executor=ex)
            # workers reopen the sharded store by its manifest path (Dask) or inherit it (fork)
            got = ForwardTask.open(mp, "ood").evaluate(preds, n_resamples=50, executor=ex).data
        assert got["metrics"] == expected["metrics"] and got["samples"] == expected["samples"]
        other = DatasetStore.open(mp)
        assert other.fingerprint == serial.fingerprint, ex.kind
        assert [e.fingerprint for e in other.manifest.shards] == [e.fingerprint for e in serial.manifest.shards]
        assert np.array_equal(other.base.positions_angstrom, serial.base.positions_angstrom)


def _leaves(doc: object, path: tuple = ()) -> list[tuple]:
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in _leaves(v, (*path, k))] + [path]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in _leaves(v, (*path, i))] + [path]
    return [path]


def test_mutated_manifests_fail_cleanly(built: dict, tmp_path: Path) -> None:
    """Seeded random edits of the manifest: every open succeeds or raises C2NPInputError."""
    mp = _copy(built, 3, tmp_path / "s")
    good = json.loads(mp.read_text())
    rng = np.random.default_rng(15)
    values = [None, True, -1, 0, 2**70, 1e308, float("nan"), "", "x" * 300, "../a", [], {}, [1, 2], {"a": 1},
              "0" * 64, "KMgH3"]
    leaves = [p for p in _leaves(good) if p]
    outcomes = {"opened": 0, "refused": 0}
    for _ in range(150):
        doc = json.loads(json.dumps(good))
        for _ in range(int(rng.integers(1, 3))):
            path = leaves[int(rng.integers(len(leaves)))]
            node = doc
            try:
                for key in path[:-1]:
                    node = node[key]
                node[path[-1]] = values[int(rng.integers(len(values)))]
            except (KeyError, IndexError, TypeError):
                continue
        mp.write_text(json.dumps(doc))
        try:
            DatasetStore.open(mp)
            outcomes["opened"] += 1
        except C2NPInputError as exc:
            assert "\n" not in str(exc)
            outcomes["refused"] += 1
    assert outcomes["refused"] > 100
    assert outcomes["opened"] > 0  # edits of fields nothing reads (the definition string, the version)


def test_strict_protocol_held_out_materials_survive_sharding(tmp_path: Path) -> None:
    one = DatasetStore.open(build_store(four_cells(), tmp_path / "one.h5", "strict", radii_angstrom=RADII,
                                        progress=False))
    mp = build_store(four_cells(), tmp_path / "ds.json", "strict", radii_angstrom=RADII, progress=False, shards=2)
    two = DatasetStore.open(mp)
    assert one.recipes.heldout_materials and two.recipes.heldout_materials == one.recipes.heldout_materials
    assert two.recipes.canonical_bytes() == one.recipes.canonical_bytes()
    held = one.recipes.heldout_materials[0]
    assert [held in e.materials for e in two.manifest.shards].count(True) == 1
    assert verify_store(mp).ok
