"""The evaluation harness (c2np.evaluation.harness) through the tasks and ``c2np evaluate``:
perfect and failed predictions, the id rules, workers, the store protocol it needs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from c2np.baselines import analytic_carve, predict
from c2np.carving import carve
from c2np.cli import build_app
from c2np.errors import C2NPInputError
from c2np.fileio import file_sha256
from c2np.particle import Particle
from c2np.predictions import write_forward_predictions, write_forward_predictions_h5, write_inverse_predictions
from c2np.splits import build_recipes
from c2np.store import DatasetStore
from c2np.tasks import ForwardTask, InverseTask, inverse_target, select_rows
from helpers import perovskite, two_perovskite_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DatasetStore:
    return DatasetStore.open(two_perovskite_store(tmp_path_factory.mktemp("ds") / "ds.h5"))


def evaluate_forward(store, predictions, split, subset="eval", **kw):  # type: ignore[no-untyped-def]
    return ForwardTask(store, split, subset).evaluate(predictions, **kw)


def evaluate_inverse(store, predictions, split, subset="eval", **kw):  # type: ignore[no-untyped-def]
    return InverseTask(store, split, subset).evaluate(predictions, **kw)


@pytest.fixture(scope="module")
def id_rows(store: DatasetStore) -> np.ndarray:
    return select_rows(store.recipes, "id", "eval")


@pytest.fixture(scope="module")
def perfect(store: DatasetStore, id_rows: np.ndarray) -> dict[str, Particle]:
    return predict(ForwardTask(store, "id"), analytic_carve)


def test_perfect_predictions_extxyz_and_h5_agree(tmp_path: Path, store: DatasetStore,
                                                 perfect: dict[str, Particle]) -> None:
    xyz = write_forward_predictions(tmp_path / "p.extxyz", perfect)
    h5 = write_forward_predictions_h5(tmp_path / "p.h5", perfect)
    a = evaluate_forward(store, xyz, "id", model="carve", n_resamples=200)
    b = evaluate_forward(store, h5, "id", model="carve", n_resamples=200)
    assert a.n_failed == 0 and a.data["n_samples"] == 16
    assert a.overall["f1@0.1"]["mean"] == 1.0 and b.overall["f1@0.1"]["mean"] == 1.0
    assert a.overall["matched_rmsd"]["mean"] < 1e-5 and b.overall["matched_rmsd"]["mean"] < 1e-5
    assert a.data["predictions"]["sha256"] == file_sha256(xyz)
    assert set(a.data["metrics"]["per_radius"]) == {"10"}
    assert set(a.data["metrics"]["per_material"]) == {"KMgH3", "NaMgH3"}


def test_workers_give_identical_results(store: DatasetStore, perfect: dict[str, Particle]) -> None:
    rng = np.random.default_rng(0)
    noisy = {sid: Particle(p.numbers, p.positions_angstrom + rng.normal(scale=0.1, size=(p.n_atoms, 3)))
             for sid, p in perfect.items()}
    a = evaluate_forward(store, noisy, "id", n_resamples=50)
    b = evaluate_forward(store, noisy, "id", n_resamples=50, workers=2)
    assert a.data["metrics"] == b.data["metrics"] and a.data["samples"] == b.data["samples"]
    assert 0.0 < a.overall["f1@0.1"]["mean"] < 1.0


def test_failures_are_counted_and_listed(tmp_path: Path, store: DatasetStore,
                                         perfect: dict[str, Particle]) -> None:
    ids = list(perfect)
    preds = dict(perfect)
    del preds[ids[0]]  # missing
    preds[ids[1]] = Particle(np.zeros(0, int), np.zeros((0, 3)))  # empty
    nan = preds[ids[2]].positions_angstrom.copy()
    nan[0, 0] = np.nan
    preds[ids[2]] = Particle(preds[ids[2]].numbers, nan)  # NaN
    path = write_forward_predictions(tmp_path / "f.extxyz", preds)
    res = evaluate_forward(store, path, "id", n_resamples=100)
    assert res.n_failed == 3
    reasons = {f["sample_id"]: f["reason"] for f in res.failed_samples}
    assert set(reasons) == set(ids[:3])
    assert "missing" in reasons[ids[0]] and "empty" in reasons[ids[1]] and "non-finite" in reasons[ids[2]]
    f1 = res.overall["f1@0.1"]
    assert f1["mean"] == pytest.approx(13 / 16) and f1["mean_successes"] == 1.0
    assert f1["n"] == 16 and f1["n_failed"] == 3
    haus = res.overall["hausdorff"]
    assert haus["mean"] == pytest.approx(3 * 20.0 / 16, rel=1e-3)  # penalty 2R = 20 Å
    assert not res.data["samples"]["ok"][res.data["samples"]["sample_id"].index(ids[0])]


def test_ids_outside_subset_are_ignored_unknown_and_duplicate_are_errors(
        tmp_path: Path, store: DatasetStore, perfect: dict[str, Particle]) -> None:
    extra = dict(perfect)
    part = next(iter(perfect.values()))
    extra["KMgH3/R6/rot_0"] = part  # in the store, not in the id split
    res = evaluate_forward(store, write_forward_predictions(tmp_path / "x.extxyz", extra), "id",
                           n_resamples=50)
    assert res.data["predictions"]["n_ignored_outside_subset"] == 1 and res.n_failed == 0
    bad = {"Nope/R6/rot_1": part}
    path = write_forward_predictions(tmp_path / "u.extxyz", bad)
    with pytest.raises(C2NPInputError, match=r"u\.extxyz: frame 0.*unknown sample id"):
        evaluate_forward(store, path, "id")
    sid = next(iter(perfect))
    text = (tmp_path / "d.extxyz")
    one = write_forward_predictions(tmp_path / "one.extxyz", {sid: perfect[sid]}).read_text()
    text.write_text(one + one)
    with pytest.raises(C2NPInputError, match=r"d\.extxyz: frame 1.*duplicate sample id"):
        evaluate_forward(store, text, "id")


def test_unknown_id_in_csv_names_the_line(tmp_path: Path, store: DatasetStore) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("sample_id,a,b,c,alpha,beta,gamma,spacegroup\nZZ/R10/rot_1,4,4,4,90,90,90,221\n")
    with pytest.raises(C2NPInputError, match=r"bad\.csv: line 2: unknown sample id"):
        evaluate_inverse(store, path, "id")


def test_malformed_file_error_reaches_the_caller(tmp_path: Path, store: DatasetStore) -> None:
    path = tmp_path / "bad.extxyz"
    path.write_text("1\nfoo=1\nH 0 0 0\n")
    with pytest.raises(C2NPInputError, match=r"bad\.extxyz: frame 0 \(line 2\): no sample_id"):
        evaluate_forward(store, path, "id")


def _inverse_rows(store: DatasetStore, rows: np.ndarray) -> dict[str, dict]:
    """Perfect task-2 predictions under the store's sample ids, as CSV-like mappings."""
    t = store.recipes
    out = {}
    for r in rows:
        tg = inverse_target(store.cells[t.materials[t.material_index[r]]])
        a, b, c, al, be, ga = tg.params
        out[t.sample_id(int(r))] = {"a": a, "b": b, "c": c, "alpha": al, "beta": be, "gamma": ga,
                                    "spacegroup": tg.spacegroup}
    return out


def test_inverse_perfect_and_failures(tmp_path: Path, store: DatasetStore, id_rows: np.ndarray) -> None:
    rows = _inverse_rows(store, id_rows)
    ids = list(rows)
    assert rows[ids[0]]["spacegroup"] == 221
    path = write_inverse_predictions(tmp_path / "p.csv", rows)
    res = evaluate_inverse(store, path, "id", n_resamples=100)
    assert res.n_failed == 0 and res.overall["joint_accuracy_strict"]["mean"] == 1.0
    assert res.overall["lattice_rmse_paper"]["mean"] < 1e-9
    rows[ids[0]]["a"] = float("nan")
    rows[ids[1]]["spacegroup"] = 0
    rows[ids[2]]["alpha"] = 180.0
    del rows[ids[3]]
    res = evaluate_inverse(store, write_inverse_predictions(tmp_path / "q.csv", rows), "id",
                           n_resamples=100)
    assert res.n_failed == 4
    assert res.overall["spacegroup_accuracy"]["mean"] == pytest.approx(12 / 16)
    assert res.overall["spacegroup_accuracy"]["mean_successes"] == 1.0


class _StandIn:
    """The minimal store interface the harness depends on, built from recipes + carve."""

    def __init__(self) -> None:
        cell = perovskite()
        self.cells = {cell.material_id: cell}
        self.recipes = build_recipes([cell], "paper", radii_angstrom=[6])
        self.fingerprint = "stand-in"

    def particle(self, row: int) -> Particle:
        t = self.recipes
        return carve(self.cells[t.materials[t.material_index[row]]], float(t.radius_angstrom[row]),
                     quaternion=t.quaternion[row]).particle

    def base_particle(self, material: str, radius_angstrom: int) -> Particle:
        return carve(self.cells[material], float(radius_angstrom)).particle


def test_harness_needs_only_the_store_protocol() -> None:
    st = _StandIn()
    rows = select_rows(st.recipes, "ood")
    ids = st.recipes.sample_ids()
    preds = {ids[r]: st.particle(int(r)) for r in rows}
    res = evaluate_forward(st, preds, "ood", n_resamples=20)
    assert res.overall["f1@0.1"]["mean"] == 1.0 and res.overall["hausdorff"]["mean"] == 0.0


def test_cli_evaluate_ok_and_bad_input(tmp_path: Path, store: DatasetStore, id_rows: np.ndarray) -> None:
    runner = CliRunner()
    app = build_app()
    good = write_inverse_predictions(tmp_path / "p.csv", _inverse_rows(store, id_rows))
    out = tmp_path / "r.json"
    base = ["evaluate", "--store", str(store.path), "--task", "inverse", "--split", "id",
            "--bootstrap", "50", "--no-progress", "--out", str(out)]
    png = tmp_path / "r.png"
    r = runner.invoke(app, [*base, "--predictions", str(good), "--model", "ref", "--plot", str(png)])
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert json.loads(out.read_text())["model"] == "ref" and "joint_accuracy_paper" in r.output
    bad = tmp_path / "bad.csv"
    bad.write_text("sample_id,a\nx,1\n")
    r = runner.invoke(app, [*base, "--predictions", str(bad)])
    assert r.exit_code == 2 and "bad.csv" in r.output and "missing column" in r.output
    r = runner.invoke(app, [*base, "--predictions", str(good), "--protocol", "strict"])
    assert r.exit_code == 2
    r = runner.invoke(app, [*base[:6], "bogus", *base[7:], "--predictions", str(good)])
    assert r.exit_code == 2


def test_cli_evaluate_forward_default_workers(tmp_path: Path, store: DatasetStore,
                                              perfect: dict[str, Particle]) -> None:
    """Task 1 through the CLI with the default worker count (one per CPU): perfect
    predictions score perfectly; a negative --workers is bad input (exit 2)."""
    runner = CliRunner()
    app = build_app()
    preds = write_forward_predictions(tmp_path / "p.extxyz", perfect)
    out = tmp_path / "r.json"
    base = ["evaluate", "--store", str(store.path), "--task", "forward", "--split", "id",
            "--predictions", str(preds), "--bootstrap", "20", "--no-progress", "--out", str(out)]
    r = runner.invoke(app, base)
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["n_failed"] == 0 and data["metrics"]["overall"]["f1@0.1"]["mean"] == 1.0
    r = runner.invoke(app, [*base, "--workers", "-1"])
    assert r.exit_code == 2 and "--workers" in r.output


def test_uncertified_matched_rmsd_is_listed_with_its_bound(store: DatasetStore,
                                                          perfect: dict[str, Particle],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from c2np.assignment import auction, solve

    rng = np.random.default_rng(1)
    collapsed = {sid: Particle(p.numbers, rng.normal(scale=0.3, size=(p.n_atoms, 3)))
                 for sid, p in perfect.items()}
    monkeypatch.setattr(solve, "DENSE_MAX_ENTRIES", 10 ** 7)
    exact = evaluate_forward(store, collapsed, "id", n_resamples=20)  # every set dense: exact
    assert exact.data["matched_rmsd_uncertified"] == 0 and exact.data["matched_rmsd_bounds"] == []
    # the sparse path with almost no work allowed: values are bounds, listed with their gap
    monkeypatch.setattr(solve, "DENSE_MAX_ENTRIES", 0)
    monkeypatch.setattr(solve, "BIDS_PER_POINT", 1)
    monkeypatch.setattr(auction, "MIN_BUDGET_POINTS", 0)
    res = evaluate_forward(store, collapsed, "id", n_resamples=20)
    bounds = res.data["matched_rmsd_bounds"]
    assert res.data["matched_rmsd_uncertified"] == len(bounds) > 0
    values = dict(zip(res.data["samples"]["sample_id"], res.data["samples"]["matched_rmsd"]))
    ref = dict(zip(exact.data["samples"]["sample_id"], exact.data["samples"]["matched_rmsd"]))
    for b in bounds:
        assert b["matched_rmsd_angstrom"] == values[b["sample_id"]]
        assert b["lower_bound_angstrom"] <= ref[b["sample_id"]] + 1e-9 <= b["matched_rmsd_angstrom"] + 2e-9
        assert b["gap_angstrom"] == pytest.approx(b["matched_rmsd_angstrom"] - b["lower_bound_angstrom"])
    assert res.data["matched_rmsd_max_gap_angstrom"] == max(b["gap_angstrom"] for b in bounds)


# --- hostile predictions and stores --------------------------------------------------------
def test_huge_but_finite_predictions_fail_one_sample_each(tmp_path: Path, store: DatasetStore,
                                                          perfect: dict[str, Particle]) -> None:
    ids = list(perfect)
    preds = dict(perfect)
    base = perfect[ids[0]]
    preds[ids[0]] = Particle(base.numbers, base.positions_angstrom + np.array([1e155, 0, 0]))
    preds[ids[1]] = Particle(base.numbers[:1], np.array([[1e308, -1e308, 1e308]]))
    many = np.tile(base.positions_angstrom, (20, 1))  # 20 x the reference atoms, overlapping
    preds[ids[2]] = Particle(np.tile(base.numbers, 20), many + 1e-3 * np.arange(len(many))[:, None])
    res = evaluate_forward(store, preds, "id", n_resamples=100)
    assert res.n_failed == 3
    reasons = {f["sample_id"]: f["reason"] for f in res.failed_samples}
    assert "beyond 10000 Å" in reasons[ids[0]] and "beyond 10000 Å" in reasons[ids[1]]
    assert "prediction_atoms_factor" in reasons[ids[2]]
    out = res.write(tmp_path / "r.json")  # allow_nan=False: would raise on a non-finite value
    json.loads(out.read_text())


@pytest.mark.parametrize("values, reason", [
    ((5.0, 5.0, 5.0, 170.0, 170.0, 170.0, 221), "close no cell"),
    ((1e308, 4.0, 4.0, 90.0, 90.0, 90.0, 221), "beyond 10000 Å"),
    ((4.0, 4.0, 4.0, 10.0, 10.0, 90.0, 221), "close no cell"),
])
def test_impossible_or_absurd_cells_are_failures(store: DatasetStore, values: tuple, reason: str) -> None:
    task = InverseTask(store, "id")
    preds = {q.sample_id: (4.02, 4.02, 4.02, 90.0, 90.0, 90.0, 221) for q in task.queries()}
    first = next(iter(preds))
    preds[first] = values
    res = task.evaluate(preds, n_resamples=100)
    assert res.n_failed == 1 and reason in res.failed_samples[0]["reason"]


def test_a_tampered_store_is_refused_before_scoring(tmp_path: Path) -> None:
    import h5py

    path = two_perovskite_store(tmp_path / "t.h5")
    with h5py.File(path, "r+") as f:
        f["base/positions"][2, 1] += 3e-5  # below the 1e-4 Å the old verify tolerated
    with pytest.raises(C2NPInputError, match="does not match its fingerprint"):
        ForwardTask.open(path, "id")
    preds = write_forward_predictions(tmp_path / "p.extxyz", {"KMgH3/R10/rot_1": carve(perovskite(), 10).particle})
    res = CliRunner().invoke(build_app(), ["evaluate", "--store", str(path), "--task", "forward", "--split", "id",
                                           "--predictions", str(preds),
                                           "-o", str(tmp_path / "r.json")])
    assert res.exit_code == 2 and "fingerprint" in res.output, res.output
    assert not (tmp_path / "r.json").exists()


def test_reading_ahead_while_workers_score(tmp_path: Path, store: DatasetStore,
                                           perfect: dict[str, Particle],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """With workers the file is read by a background thread once the pool exists, while
    the workers score chunks of samples: the results equal one process's, and an error
    later in the file still names its frame."""
    import c2np.evaluation.harness as harness

    monkeypatch.setattr(harness, "BATCH", 2)  # a short read-ahead queue
    monkeypatch.setattr(harness, "CHUNK", 2)  # chunks of 2 samples: many in flight
    path = write_forward_predictions(tmp_path / "p.extxyz", perfect)
    one = evaluate_forward(store, path, "id", n_resamples=20)
    two = evaluate_forward(store, path, "id", n_resamples=20, workers=2)
    assert one.data["samples"] == two.data["samples"] and one.data["metrics"] == two.data["metrics"]
    lines = path.read_text().splitlines(keepends=True)
    end = 0
    for _ in range(10):  # ten good frames, then one without sample_id
        end += int(lines[end]) + 2
    bad = tmp_path / "late_bad.extxyz"
    bad.write_text("".join(lines[:end]) + "1\nfoo=1\nH 0 0 0\n")
    with pytest.raises(C2NPInputError, match=r"late_bad\.extxyz: frame 10 \(line"):
        evaluate_forward(store, bad, "id", n_resamples=20, workers=2)


def test_one_test_run_equals_the_id_and_ood_runs(store: DatasetStore) -> None:
    """``--split test`` scores exactly the samples of the id and ood runs, with the same
    per-sample values (2 workers: the compiled kernels are inherited from this process)."""
    from c2np.baselines import random_ball

    preds = {**predict(ForwardTask(store, "id"), random_ball), **predict(ForwardTask(store, "ood"), random_ball)}
    both = evaluate_forward(store, preds, "test", n_resamples=20, workers=2).data["samples"]
    per_split = [evaluate_forward(store, preds, s, n_resamples=20).data["samples"] for s in ("id", "ood")]
    names = [n for n in both if n != "sample_id"]
    by_id = {sid: [both[n][k] for n in names] for k, sid in enumerate(both["sample_id"])}
    one = {sid: [p[n][k] for n in names] for p in per_split for k, sid in enumerate(p["sample_id"])}
    assert len(by_id) == len(one) == 32 and by_id == one


_KERNEL_PROBE = """
import json, sys
import numba
import numpy as np
from c2np.assignment import _auction_kernels, _grid_kernels, _tree_kernels
from c2np.metrics import pair_histogram
from c2np.baselines import analytic_carve, predict, random_ball
from c2np.evaluation.harness import compile_metric_kernels
from c2np.particle import Particle
from c2np.store import DatasetStore
from c2np.tasks import ForwardTask

def signatures():
    d = {n: getattr(K, n) for K in (_auction_kernels, _grid_kernels, _tree_kernels) for n in dir(K)
         if isinstance(getattr(K, n), numba.core.registry.CPUDispatcher)}
    d["_pair_sweep"] = pair_histogram._pair_sweep_kernel()
    return {n: sorted(map(str, f.signatures)) for n, f in d.items()}

store = DatasetStore.open(sys.argv[1])
task = ForwardTask(store, "test", per_group=2)
preds = [predict(task, random_ball), predict(task, analytic_carve)]
rng = np.random.default_rng(1)
preds.append({s: Particle(p.numbers, rng.uniform(-0.5, 0.5, size=(p.n_atoms, 3))) for s, p in preds[1].items()})
compile_metric_kernels()
warm = signatures()
for p in preds:
    task.evaluate(p, n_resamples=10)  # in this process: new code would be compiled here
print(json.dumps({"warm": warm, "after": signatures()}))
"""


def test_metric_kernels_are_compiled_before_the_workers_fork(tmp_path: Path) -> None:
    """compile_metric_kernels (called by the harness before it forks) reaches every
    kernel specialisation that scoring random-ball, perfect and collapsed predictions
    uses, so forked workers never compile (docs/decisions/0032-compile-kernels-before-workers.md)."""
    import os
    import subprocess
    import sys

    path = two_perovskite_store(tmp_path / "ds.h5", radii_angstrom=(6, 12))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", _KERNEL_PROBE, str(path)], capture_output=True,
                         text=True, check=True, env=env)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["after"] == got["warm"]
    for name in ("_pair_sweep", "auction", "grid_build", "radius_pairs", "kdtree_nearest"):
        assert got["warm"][name], name
