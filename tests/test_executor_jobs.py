"""Every job on the executor seam gives, on a real 2-worker Dask
LocalCluster, exactly what the local path gives: verify, export (extxyz and original),
task-2 scoring, the solver over many files (identify) and the baselines' predictions
(the solver's sweeps), and catalog relaxations (with CHGNet installed)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from c2np.baselines import crystallographic_solver, predict
from c2np.cli import build_app
from c2np.executor import LocalExecutor
from c2np.formats import export_extxyz, export_original
from c2np.particle_io import write_extxyz
from c2np.predictions import write_inverse_predictions
from c2np.solver.batch import solve_files
from c2np.store import DatasetStore, verify_store
from c2np.tasks import InverseTask
from helpers import two_perovskite_store

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DatasetStore:
    return DatasetStore.open(two_perovskite_store(tmp_path_factory.mktemp("ds") / "ds.h5"))


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_verify_on_dask_equals_local(store: DatasetStore, dask_executor) -> None:  # type: ignore[no-untyped-def]
    a = verify_store(store.path)
    b = verify_store(store.path, executor=dask_executor)
    assert a.ok and b.to_dict() == a.to_dict()


def test_export_on_dask_equals_local(store: DatasetStore, dask_executor, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a = export_extxyz(store, tmp_path / "a", progress=False)
    b = export_extxyz(store, tmp_path / "b", progress=False, executor=dask_executor)
    c = export_extxyz(store, tmp_path / "c", progress=False, executor=LocalExecutor(2))
    assert [p.name for p in a] == [p.name for p in b] == [p.name for p in c] and a
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b") == _tree(tmp_path / "c")
    # the text is the one writer's: every sample once, in row order
    frames = (tmp_path / "a" / "id.extxyz").read_text().count("sample_id=")
    assert frames == len(store.rows("id"))
    export_original(store, tmp_path / "oa", progress=False)
    export_original(store, tmp_path / "ob", progress=False, executor=dask_executor)
    tree = _tree(tmp_path / "oa")
    assert tree == _tree(tmp_path / "ob") and sum(k.endswith(".xyz") for k in tree) == len(store)


def test_task2_scoring_on_dask_equals_local(store: DatasetStore, dask_executor, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    task = InverseTask(store, "id")
    rng = np.random.default_rng(0)
    preds = {q.sample_id: (4.0 + rng.normal(scale=0.3), 4.0, 4.0, 90.0, 90.0, 90.0, int(rng.choice([221, 1])))
             for k, q in enumerate(task.queries()) if k % 5}  # every fifth is missing
    path = write_inverse_predictions(tmp_path / "p.csv", preds)
    a = task.evaluate(path, n_resamples=50)
    for kw in ({"executor": dask_executor}, {"workers": 2}):
        b = task.evaluate(path, n_resamples=50, **kw)
        for key in ("metrics", "samples", "n_samples", "n_failed", "failed_samples", "spacegroup_confusion"):
            assert b.data[key] == a.data[key], key
    assert a.data["n_failed"] >= len(task) // 5


def test_solver_sweeps_on_dask_equal_local(store: DatasetStore, dask_executor, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    task = InverseTask(store, "id")
    local = predict(task, crystallographic_solver)
    dask = predict(task, crystallographic_solver, executor=dask_executor, chunk=2)
    assert dask == local and len(local) == len(task)
    # identify over many files: the same outcome per file, in order, failures included
    files = [write_extxyz(tmp_path / f"p{k}.extxyz", [(q.particle, {})])
             for k, q in enumerate(task.queries()) if k < 4]
    bad = tmp_path / "bad.xyz"
    bad.write_text("2\n\nH 0 0 0\n")  # a truncated frame
    files.insert(1, bad)

    def strip(outcomes):  # type: ignore[no-untyped-def]
        return [(o.file, o.error, o.kind, None if o.result is None else
                 {k: v for k, v in o.result.items() if k != "diagnostics"}) for o in outcomes]

    a = solve_files(files)
    b = solve_files(files, executor=dask_executor)
    assert strip(a) == strip(b)
    assert [o.exit_code for o in a] == [0, 2, 0, 0, 0]
    res = CliRunner().invoke(build_app(), ["identify", *map(str, files), "--json", "--scheduler", "local:2"])
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    assert [d["file"] for d in doc] == [str(f) for f in files] and doc[1]["kind"] == "bad input"
    assert doc[0]["spacegroup"] == a[0].result["spacegroup"]  # type: ignore[index]


def test_cli_verify_and_export_take_the_scheduler(store: DatasetStore, tmp_path: Path) -> None:
    app = build_app()
    res = CliRunner().invoke(app, ["verify", str(store.path), "--json", "--scheduler", "local:2"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["ok"]
    res = CliRunner().invoke(app, ["export", str(store.path), "-o", str(tmp_path / "x"), "--workers", "2"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["export", str(store.path), "-o", str(tmp_path / "y"), "--scheduler", "bogus"])
    assert res.exit_code == 2 and "--scheduler" in res.output


@pytest.mark.skipif(importlib.util.find_spec("chgnet") is None, reason="needs chgnet")
def test_catalog_relaxations_on_dask(dask_executor, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from c2np.catalog import build as bld

    ids = ["KMgH3", "NaMgH3"]
    par = bld.build_catalog(tmp_path / "dask", only=ids, prototypes=("Pm-3m",), progress=False,
                            executor=dask_executor)
    assert [e.material_id for e in par] == ids and all(e.status == "ok" for e in par)
    ser = bld.build_catalog(tmp_path / "ser", only=ids[:1], prototypes=("Pm-3m",), progress=False)
    assert par[0].lattice_parameters["a"] == pytest.approx(ser[0].lattice_parameters["a"], abs=1e-9)
    assert (tmp_path / "dask" / "KMgH3.cif").read_text() == (tmp_path / "ser" / "KMgH3.cif").read_text()


def test_every_baseline_predicts_the_same_on_dask(dask_executor, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """c2np benchmark --scheduler: every baseline's predictions equal the local ones."""
    from c2np.baselines import FORWARD_BASELINES, INVERSE_BASELINES
    from c2np.tasks import ForwardTask

    st = DatasetStore.open(two_perovskite_store(tmp_path / "t.h5", radii_angstrom=(6, 8, 10)))
    for table, cls in ((FORWARD_BASELINES, ForwardTask), (INVERSE_BASELINES, InverseTask)):
        task = cls(st, "id")
        for name, make in table.items():
            model = make(task)  # type: ignore[arg-type]
            a, b = predict(task, model), predict(task, model, executor=dask_executor)
            assert list(a) == list(b) and a, name
            for sid, p in a.items():
                q = b[sid]
                if hasattr(p, "positions_angstrom"):
                    assert np.array_equal(p.numbers, q.numbers), name
                    assert np.array_equal(p.positions_angstrom, q.positions_angstrom), name
                else:
                    assert p == q, name
