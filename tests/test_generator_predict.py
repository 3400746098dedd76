"""`c2np predict --run <crystal generator or pool folder>` (issue 13): the shipped task-2
generators write the prediction files `c2np evaluate` scores, for the same rows and ids as a
trained run; shards merge into exactly one run's file; bad combinations are one clear line."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from c2np.cli import build_app
from c2np.models.inverse.pool import PoolRule, save_pool
from c2np.models.inverse.predict import is_generator_folder
from c2np.store import build_store
from helpers import cheap_generator_copy, perovskite

PRETRAINED = Path(__file__).resolve().parents[1] / "pretrained"
runner = CliRunner()
app = build_app()


def _cheap_copy(name: str, dst: Path) -> Path:
    return cheap_generator_copy(name, dst, n_samples=1, sample_steps=20, refine_evals=10)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cells = [perovskite(a=a, ids=f"M{i}", A=z) for i, (a, z) in enumerate(zip((3.4, 4.0, 4.6, 5.2, 5.8),
                                                                              (19, 11, 37, 55, 3)))]
    return build_store(cells, tmp_path_factory.mktemp("g") / "strict.h5", "strict", radii_angstrom=[6, 7],
                       progress=False)


def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(path.read_text().splitlines()))


def test_generator_and_pool_folders_predict_evaluate_and_shard(store_path: Path, tmp_path: Path) -> None:
    gen = _cheap_copy("diffcsp-inverse", tmp_path / "diffcsp")
    assert is_generator_folder(gen) and not is_generator_folder(tmp_path)
    one = tmp_path / "one.csv"
    args = ["predict", "--run", str(gen), "--store", str(store_path), "--split", "heldout"]
    r = runner.invoke(app, [*args, "-o", str(one), "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output)
    rows = _rows(one)
    assert rows[0][0] == "sample_id" and len(rows) - 1 == summary["n_samples"] >= 16
    assert summary["kind"] == "crystal generator (diffcsp)" and summary["store_check"]["store_protocol"] == "strict"
    # the harness scores the file: every row of the eval subset answered
    r = runner.invoke(app, ["evaluate", "--store", str(store_path), "--task", "inverse", "--split", "heldout",
                            "--workers", "1", "--no-progress", "--predictions", str(one),
                            "-o", str(tmp_path / "res.json")])
    assert r.exit_code in (0, 1), r.output
    res = json.loads((tmp_path / "res.json").read_text())
    assert res["n_samples"] == summary["n_samples"] and res["n_failed"] == 0
    # two shards merge into exactly the one run's file
    parts = []
    for i in range(2):
        part = tmp_path / f"part{i}.csv"
        r = runner.invoke(app, [*args, "-o", str(part), "--shard", f"{i}/2", "--json"])
        assert r.exit_code == 0, r.output
        parts.append(str(part))
    merged = tmp_path / "merged.csv"
    r = runner.invoke(app, ["merge-predictions", *parts, "-o", str(merged)])
    assert r.exit_code == 0, r.output
    assert merged.read_text() == one.read_text()
    # a pool folder predicts through the same command
    pool = save_pool(tmp_path / "pool", [("d", gen), ("f", _cheap_copy("flowmm-inverse", tmp_path / "flowmm"))],
                     PoolRule())
    r = runner.invoke(app, [*args, "-o", str(tmp_path / "pool.csv"), "--run", str(pool), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["kind"] == "generator pool"
    assert [x[0] for x in _rows(tmp_path / "pool.csv")] == [x[0] for x in rows]


def test_generator_folder_refuses_training_run_options(store_path: Path, tmp_path: Path) -> None:
    gen = _cheap_copy("flowmm-inverse", tmp_path / "flowmm")
    base = ["predict", "--run", str(gen), "--store", str(store_path), "--split", "heldout"]
    for extra in (["--steps", "10"], ["--checkpoint", "last"]):
        r = runner.invoke(app, [*base, "-o", str(tmp_path / "x.csv"), *extra])
        assert r.exit_code == 2 and "its own settings" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, [*base, "-o", str(tmp_path / "x.extxyz")])
    assert r.exit_code == 2 and ".csv" in r.output
    (gen / "model.safetensors").write_bytes(b"not weights")
    r = runner.invoke(app, [*base, "-o", str(tmp_path / "y.csv")])
    assert r.exit_code == 2 and "Traceback" not in r.output and "model.safetensors" in r.output


def test_a_generator_submission_on_a_one_rotation_leaderboard(tmp_path: Path) -> None:
    """The path a generator takes to the leaderboard: `c2np predict --per-group 1` for every
    split, a model.yml declaring 1 rotation per (material, R), `c2np benchmark --per-group 1`
    for the baselines (the descriptor-neighbour floors too, the store being strict), all scored
    on the same rows."""
    import yaml

    from c2np.store import DatasetStore
    from c2np.tasks import select_rows

    cells = [perovskite(a=a, ids=f"M{i}", A=z) for i, (a, z) in enumerate(zip((3.4, 4.0, 4.6, 5.2, 5.8),
                                                                              (19, 11, 37, 55, 3)))]
    store_path = build_store(cells, tmp_path / "strict.h5", "strict", radii_angstrom=[6, 8, 10], progress=False)
    bench = tmp_path / "bench"
    r = runner.invoke(app, ["benchmark", "--store", str(store_path), "-o", str(bench), "--tasks", "inverse",
                            "--per-group", "1", "--workers", "1", "--json"])
    assert r.exit_code == 0, r.output
    plots = {Path(p).name for p in json.loads(r.output)["plots"]}  # held-out rows plotted on their own
    assert {"inverse_joint_accuracy_paper_vs_radius.png",
            "inverse_joint_accuracy_paper_heldout_dev_vs_radius.png"} <= plots
    subs = bench / "submissions"
    assert {"solver", "descriptor-neighbour", "descriptor-neighbour-noisy"} <= {p.name for p in subs.iterdir()}
    gen = _cheap_copy("diffcsp-inverse", tmp_path / "diffcsp")
    sub = subs / "diffcsp-small"
    (sub / "inverse").mkdir(parents=True)
    for split in ("id", "ood", "heldout"):
        out = tmp_path / f"{split}.csv"
        r = runner.invoke(app, ["predict", "--run", str(gen), "--store", str(store_path), "--split", split,
                                "--per-group", "1", "-o", str(out), "--json"])
        assert r.exit_code == 0, r.output
        shutil.copy(out, sub / "inverse" / f"{split}.csv")
    doc = yaml.safe_load((subs / "solver" / "model.yml").read_text())
    doc["model"].update(id="diffcsp-small", name="DiffCSP (test settings)", family="DiffCSP",
                        category="learned+prior", priors=["spacegroup-templates", "profile-refinement"])
    (sub / "model.yml").write_text(yaml.safe_dump(doc))
    assert doc["rotations_per_material_radius"] == 1
    site = tmp_path / "site"
    r = runner.invoke(app, ["leaderboard", str(subs), "--store", str(store_path), "-o", str(site),
                            "--per-group", "1", "--bootstrap", "10", "--workers", "1", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads((site / "leaderboard.json").read_text())["rows"]
    n = len(select_rows(DatasetStore.open(store_path).recipes, "heldout", per_group=1))
    held = {row["model"]: row for row in rows if row["split"] == "heldout-dev"}  # the store's one held-out
    assert not any(row["split"] == "heldout-test" for row in rows)                 # material is development
    assert {"diffcsp-small", "solver", "descriptor-neighbour", "composition-lookup"} <= set(held)
    assert {row["n_samples"] for row in held.values()} == {n}
    assert held["composition-lookup"]["metrics"]["joint_accuracy_paper"] == 0.0  # held-out: no lookup wins
