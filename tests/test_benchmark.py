import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from c2np.benchmark import run_benchmark
from c2np.cli import build_app
from c2np.store import build_store


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    from helpers import crystal_zoo, perovskite

    return build_store([perovskite(), crystal_zoo()["hexagonal"]], tmp_path_factory.mktemp("bm") / "ds.h5",
                       radii_angstrom=[6, 8, 10], progress=False)


def test_run_benchmark_ceiling_floor_and_files(tmp_path: Path, store_path: Path) -> None:
    s = run_benchmark(store_path, tmp_path / "out", inverse_models=["composition-lookup", "majority-class"],
                      n_resamples=50, progress=False)
    rows = {(r.model, r.task, r.split): r for r in s.rows}
    for split in ("id", "ood"):
        ceil = rows[("analytic-carve", "forward", split)]
        floor = rows[("random-ball", "forward", split)]
        assert ceil.metrics["f1@0.1"] == 1.0 and ceil.n_failed == 0
        assert floor.metrics["f1@0.1"] < 0.2
        assert ceil.normalised["f1@0.1"] == pytest.approx(1.0)
        assert floor.normalised["f1@0.1"] == pytest.approx(0.0)
        mem = rows[("memorisation", "forward", split)]
        assert 0.0 < mem.normalised["chamfer"] <= 1.0 + 1e-6
        assert rows[("majority-class", "inverse", split)].normalised["joint_accuracy_paper"] == pytest.approx(0.0)
    md = s.leaderboard_md.read_text()
    assert "| analytic-carve | analytic | id |" in md and "plots/" in md
    ceil_id = rows[("analytic-carve", "forward", "id")]
    lo, hi = ceil_id.ci95["f1@0.1"]
    assert f"1.000 [{lo:.2f}, {hi:.2f}] (1.00)" in md  # every cell with its 95 % interval
    data = json.loads(s.leaderboard_json.read_text())
    assert len(data["rows"]) == len(s.rows) == 2 * (3 + 2)
    assert all(p.is_file() and p.suffix == ".png" for p in s.plots)
    names = {p.name for p in s.plots}
    assert "forward_id_vs_ood.png" in names and any(n.startswith("inverse_confusion") for n in names)
    assert any(n.startswith("forward_particle_") for n in names)
    for f in s.results:
        res = json.loads(f.read_text())
        assert res["dataset"]["fingerprint"] and res["predictions"]["sha256"]


def _my_submission(folder: Path, store_path: Path, *, nan_first: bool = True) -> list[str]:
    """A "trained model" submission for task 1 / OOD: one H atom per sample (NaN for the first)."""
    from c2np.store import DatasetStore
    from c2np.tasks import ForwardTask

    store = DatasetStore.open(store_path)
    ids = [q.sample_id for q in ForwardTask(store, "ood").queries()]
    (folder / "forward").mkdir(parents=True)
    frames = []
    for k, sid in enumerate(ids):
        xyz = "nan nan nan" if (k == 0 and nan_first) else "0 0 0"
        frames.append(f'1\nProperties=species:S:1:pos:R:3 sample_id={sid} pbc="F F F"\nH {xyz}\n')
    (folder / "forward" / "ood.extxyz").write_text("".join(frames))
    (folder / "model.yml").write_text(
        "schema: c2np.submission/1\n"
        "model: {id: my-model, name: My model, version: '1', family: test, category: learned,\n"
        "        authors: [me], repository: here, license: MIT}\n"
        f"training: {{protocol: paper, store_fingerprint: {store.fingerprint}}}\n"
        "hardware: laptop\nwall_time_seconds: {training: 1, inference: 1}\n"
        "c2np_version: 0.1.0\ndate: 2026-01-19\ntasks: [forward]\n")
    return ids


def test_a_submission_dropped_beside_the_baselines_is_ranked(tmp_path: Path, store_path: Path) -> None:
    out = tmp_path / "out"
    ids = _my_submission(out / "submissions" / "my-model", store_path)
    s = run_benchmark(store_path, out, splits=["ood"], tasks=["forward"],
                      forward_models=["analytic-carve", "random-ball"], n_resamples=20, progress=False)
    row = next(r for r in s.rows if r.model == "my-model")
    assert row.n_samples == len(ids) and row.n_failed == 1  # the NaN sample is a failure, counted
    assert row.category == "learned" and row.priors == ()  # from its model.yml, into the results
    assert row.metrics["f1@0.1"] < 0.05
    assert (out / "submissions" / "analytic-carve" / "model.yml").is_file()
    assert (out / "report" / "models" / "my-model.html").is_file()


def test_an_invalid_submission_stops_the_benchmark(tmp_path: Path, store_path: Path) -> None:
    from c2np.leaderboard import SubmissionProblems

    out = tmp_path / "out"
    ids = _my_submission(out / "submissions" / "my-model", store_path)
    f = out / "submissions" / "my-model" / "forward" / "ood.extxyz"
    f.write_text(f.read_text().replace(f"sample_id={ids[-1]} ", "sample_id=KMgH3/R6/rot_9999 "))
    assert "rot_9999" in f.read_text()
    with pytest.raises(SubmissionProblems) as exc:
        run_benchmark(store_path, out, splits=["ood"], tasks=["forward"], forward_models=["random-ball"],
                      n_resamples=20, progress=False)
    text = str(exc.value)
    assert "rot_9999" in text and "unknown sample id" in text and ids[-1] in text  # both problems named


def test_cli_benchmark_json_and_bad_input(tmp_path: Path, store_path: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(build_app(), ["benchmark", "--store", str(store_path), "-o", str(tmp_path / "b"),
                                    "--splits", "ood", "--tasks", "inverse",
                                    "--inverse-baselines", "majority-class", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rows"][0]["model"] == "majority-class"
    r = runner.invoke(build_app(), ["benchmark", "--store", str(store_path), "-o", str(tmp_path / "c"),
                                    "--forward-baselines", "nope"])
    assert r.exit_code == 2 and "nope" in r.output
    r = runner.invoke(build_app(), ["benchmark", "--store", str(store_path), "-o", str(tmp_path / "d"),
                                    "--workers", "-2"])
    assert r.exit_code == 2 and "--workers" in r.output


def test_benchmark_task1_scores_do_not_depend_on_workers(tmp_path: Path, store_path: Path) -> None:
    kw = dict(splits=("ood",), tasks=("forward",), forward_models=["analytic-carve", "random-ball"],
              n_resamples=20, progress=False)
    one = run_benchmark(store_path, tmp_path / "one", workers=1, **kw)
    two = run_benchmark(store_path, tmp_path / "two", workers=2, **kw)
    assert [(r.model, r.metrics) for r in one.rows] == [(r.model, r.metrics) for r in two.rows]
