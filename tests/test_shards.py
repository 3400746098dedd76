"""Shards for job arrays (c2np.evaluation.shards / merge): N parts merged equal one run
(metrics, intervals, samples, fingerprint); a missing, repeated or foreign part is an
error; the CLI path (evaluate --shard, merge-results)."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from c2np.baselines import analytic_carve, predict
from c2np.cli import build_app
from c2np.errors import C2NPInputError
from c2np.evaluation.merge import merge_results
from c2np.evaluation.results import Results
from c2np.evaluation.shards import parse_shard, shard_positions
from c2np.particle import Particle
from c2np.predictions import write_forward_predictions
from c2np.store import DatasetStore
from c2np.tasks import ForwardTask
from helpers import two_perovskite_store

_SAME = ("metrics", "samples", "n_samples", "n_failed", "failed_samples", "dataset", "predictions",
         "tolerances", "bootstrap", "subset_definition", "matched_rmsd_uncertified", "matched_rmsd_bounds")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("shards")
    store_path = two_perovskite_store(tmp / "ds.h5")
    store = DatasetStore.open(store_path)
    preds = predict(ForwardTask(store, "id"), analytic_carve)
    rng = np.random.default_rng(2)
    noisy = {sid: Particle(p.numbers, p.positions_angstrom + rng.normal(scale=0.15, size=(p.n_atoms, 3)))
             for k, (sid, p) in enumerate(preds.items()) if k != 3}  # one missing: a failure
    path = write_forward_predictions(tmp / "p.extxyz", noisy)
    return tmp, store_path, store, path


def test_shard_spec_and_positions() -> None:
    assert parse_shard("2/5") == (2, 5)
    for bad in ("5/5", "1", "a/b", "-1/3", "0/0"):
        with pytest.raises(C2NPInputError, match="--shard"):
            parse_shard(bad)
    parts = [shard_positions(11, i, 3) for i in range(3)]
    assert sorted(np.concatenate(parts).tolist()) == list(range(11))


@pytest.mark.parametrize("n", [1, 3, 16])
def test_merged_shards_equal_one_run(setup, n: int) -> None:  # type: ignore[no-untyped-def]
    tmp, _, store, path = setup
    task = ForwardTask(store, "id")
    one = task.evaluate(path, n_resamples=200, seed=4)
    files = []
    for i in reversed(range(n)):  # order of the parts does not matter
        part = task.evaluate(path, n_resamples=200, seed=4, shard=(i, n))
        files.append(part.write(tmp / f"part_{n}_{i}.json"))
    merged = merge_results(files)
    for key in _SAME:
        assert merged.data[key] == one.data[key], key
    assert merged.n_failed == 1
    # the merged document is a valid results file
    out = merged.write(tmp / f"merged_{n}.json")
    assert Results.read(out).data["metrics"] == one.data["metrics"]


def test_missing_repeated_and_foreign_parts_are_errors(setup) -> None:  # type: ignore[no-untyped-def]
    tmp, _, store, path = setup
    task = ForwardTask(store, "id")
    parts = [task.evaluate(path, n_resamples=50, shard=(i, 3)).write(tmp / f"p{i}.json") for i in range(3)]
    with pytest.raises(C2NPInputError, match="missing shard"):
        merge_results(parts[:2])
    with pytest.raises(C2NPInputError, match="given twice"):
        merge_results([parts[0], parts[0], parts[1], parts[2]])
    other = task.evaluate(path, n_resamples=51, shard=(2, 3)).write(tmp / "other.json")
    with pytest.raises(C2NPInputError, match="another run"):
        merge_results([parts[0], parts[1], other])
    bad = tmp / "bad.json"
    bad.write_text("{}")
    with pytest.raises(C2NPInputError, match="not a partial results file"):
        merge_results([bad])


def test_cli_shards_and_merge(setup) -> None:  # type: ignore[no-untyped-def]
    tmp, store_path, store, path = setup
    app = build_app()
    run = CliRunner()
    base = ["evaluate", "--store", str(store_path), "--task", "forward", "--predictions", str(path),
            "--split", "id", "--bootstrap", "100", "--no-progress", "--workers", "1"]
    for i in range(2):
        res = run.invoke(app, base + ["--shard", f"{i}/2", "-o", str(tmp / f"cli{i}.json")])
        assert res.exit_code == 0, res.output
    res = run.invoke(app, ["merge-results", str(tmp / "cli0.json"), str(tmp / "cli1.json"),
                           "-o", str(tmp / "cli.json")])
    assert res.exit_code == 0, res.output
    whole = run.invoke(app, base + ["-o", str(tmp / "whole.json")])
    assert whole.exit_code == 0, whole.output
    a, b = Results.read(tmp / "cli.json"), Results.read(tmp / "whole.json")
    assert a.data["metrics"] == b.data["metrics"] and a.data["samples"] == b.data["samples"]
    res = run.invoke(app, ["merge-results", str(tmp / "cli0.json"), "-o", str(tmp / "x.json")])
    assert res.exit_code == 2 and "missing shard" in res.output
    res = run.invoke(app, base + ["--shard", "2/2", "-o", str(tmp / "y.json")])
    assert res.exit_code == 2 and "--shard" in res.output
