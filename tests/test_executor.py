"""The executor seam (c2np.executor): local processes and a real Dask LocalCluster (two
worker processes) give the same results; a worker killed mid-job is replaced and its
task rerun, with nothing lost or duplicated; the --scheduler flag's errors."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from c2np.baselines import analytic_carve, predict
from c2np.cli import build_app
from c2np.errors import C2NPEnvironmentError, C2NPInputError
from c2np.executor import Context, LocalExecutor, make_executor, parse_scheduler
from c2np.particle import Particle
from c2np.predictions import write_forward_predictions
from c2np.store import DatasetStore
from c2np.tasks import ForwardTask
from helpers import two_perovskite_store

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DatasetStore:
    return DatasetStore.open(two_perovskite_store(tmp_path_factory.mktemp("ds") / "ds.h5"))


def _pid_and_square(state: int, item: int) -> tuple[int, int]:
    return os.getpid(), state * item * item


def _offset(k: int) -> int:
    return k


def test_parse_scheduler() -> None:
    assert parse_scheduler(None) == ("local", None)
    assert parse_scheduler("local:3") == ("dask-local", 3)
    assert parse_scheduler("tcp://10.0.0.1:8786") == ("dask", "tcp://10.0.0.1:8786")
    for bad in ("local:0", "local:x", "tcp://host", "slurm", "tcp://h:p"):
        with pytest.raises(C2NPInputError, match="--scheduler"):
            parse_scheduler(bad)


def test_missing_dask_is_a_clear_environment_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if not installed
    with pytest.raises(C2NPEnvironmentError, match=r"c2np\[dask\]"):
        make_executor(scheduler="local:2")
    res = CliRunner().invoke(build_app(), ["evaluate", "--store", "x.h5", "--task", "forward",
                                           "--predictions", __file__, "--split", "id", "-o", "o.json",
                                           "--scheduler", "bogus"])
    assert res.exit_code == 2 and "--scheduler" in res.output


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_local_executor_keeps_order_and_context(start_method: str) -> None:
    items = list(range(23))
    with LocalExecutor(2, start_method=start_method) as ex:
        out = [r for part in ex.map(_pid_and_square, items, context=Context(_offset, (3,)), chunk=4)
               for r in part]
    assert [v for _, v in out] == [3 * i * i for i in items]
    assert os.getpid() not in {p for p, _ in out}
    serial = [r for part in LocalExecutor(1).map(_pid_and_square, items, context=Context(_offset, (3,)))
              for r in part]
    assert [v for _, v in serial] == [v for _, v in out]


def test_dask_evaluate_and_predict_equal_local(store: DatasetStore, dask_executor,  # type: ignore[no-untyped-def]
                                               tmp_path: Path) -> None:
    task = ForwardTask(store, "id")
    local_preds = predict(task, analytic_carve)
    dask_preds = predict(task, analytic_carve, executor=dask_executor, chunk=3)
    assert list(dask_preds) == list(local_preds)
    for sid, p in local_preds.items():
        assert np.array_equal(p.numbers, dask_preds[sid].numbers)
        assert np.array_equal(p.positions_angstrom, dask_preds[sid].positions_angstrom)
    rng = np.random.default_rng(0)
    noisy = {sid: Particle(p.numbers, p.positions_angstrom + rng.normal(scale=0.2, size=(p.n_atoms, 3)))
             for sid, p in local_preds.items()}
    path = write_forward_predictions(tmp_path / "p.extxyz", noisy)
    a = task.evaluate(path, n_resamples=50)
    b = task.evaluate(path, n_resamples=50, executor=dask_executor)
    c = task.evaluate(path, n_resamples=50, workers=2)
    for other in (b, c):
        assert other.data["metrics"] == a.data["metrics"]
        assert other.data["samples"] == a.data["samples"]
        assert other.data["n_samples"] == a.data["n_samples"]


def _die_once(marker_dir: str, item: int) -> tuple[int, int]:
    """Kill this worker process the first time item 5 is seen (a marker file remembers)."""
    marker = Path(marker_dir) / "killed"
    if item == 5 and not marker.exists():
        marker.write_text(str(os.getpid()))
        os._exit(1)
    return item, os.getpid()


def test_killed_worker_is_rerun_nothing_lost_or_duplicated(dask_executor, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    items = list(range(12))
    out = [r for part in dask_executor.map(_die_once, items, context=Context(_offset, (str(tmp_path),)),
                                            chunk=2) for r in part]
    assert (tmp_path / "killed").exists()  # a worker did die
    assert [i for i, _ in out] == items  # every item once, in order
    killed = int((tmp_path / "killed").read_text())
    assert killed not in {pid for i, pid in out if i in (4, 5)}  # its chunk ran elsewhere


def test_dask_and_local_builds_give_the_same_store(dask_executor, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from c2np.store import build_store
    from helpers import perovskite

    cells = [perovskite(), perovskite(a=4.2, ids="NaMgH3", A=11)]
    a = DatasetStore.open(build_store(cells, tmp_path / "a.h5", radii_angstrom=[6, 8, 10], progress=False))
    b = DatasetStore.open(build_store(cells, tmp_path / "b.h5", radii_angstrom=[6, 8, 10], progress=False,
                                      executor=dask_executor))
    c = DatasetStore.open(build_store(cells, tmp_path / "c.h5", radii_angstrom=[6, 8, 10], progress=False,
                                      executor=LocalExecutor(2)))
    assert a.fingerprint == b.fingerprint == c.fingerprint
    for row in (0, len(a.recipes.radius_angstrom) - 1):
        assert np.array_equal(a.particle(row).positions_angstrom, b.particle(row).positions_angstrom)
