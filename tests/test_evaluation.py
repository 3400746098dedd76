"""The evaluation harness: eval subset, prediction files (good and malformed), failures,
aggregation, results JSON and the ``c2np evaluate`` command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from c2np.baselines import analytic_carve, forward_queries
from c2np.carving import carve
from c2np.particle import Particle
from c2np.cli import build_app
from c2np.errors import C2NPInputError
from c2np.evaluation import (EVAL_ROTATIONS_PER_GROUP, Results, bootstrap_mean_ci,
                             evaluate_forward, evaluate_inverse, file_sha256, inverse_target,
                             read_inverse_predictions, select_rows, write_forward_predictions,
                             write_forward_predictions_h5, write_inverse_predictions)
from c2np.splits import build_recipes
from c2np.store import DatasetStore, build_store

from conftest import perovskite

RADII = [6, 10]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DatasetStore:
    cells = [perovskite(), perovskite(a=3.9, ids="NaMgH3", A=11)]
    path = build_store(cells, tmp_path_factory.mktemp("ds") / "ds.h5", radii_angstrom=RADII,
                       progress=False)
    return DatasetStore.open(path)


@pytest.fixture(scope="module")
def id_rows(store: DatasetStore) -> np.ndarray:
    return select_rows(store.recipes, "id", "eval")


@pytest.fixture(scope="module")
def perfect(store: DatasetStore, id_rows: np.ndarray) -> dict[str, Particle]:
    return analytic_carve(store, forward_queries(store, id_rows))


def test_eval_subset_is_fixed_seeded_and_excludes_identity(store: DatasetStore) -> None:
    t = store.recipes
    rows = select_rows(t, "ood", "eval")
    assert np.array_equal(rows, select_rows(t, "ood", "eval"))
    assert np.all(t.rotation_index[rows] > 0)
    for m in range(2):
        sel = rows[t.material_index[rows] == m]
        assert len(sel) == EVAL_ROTATIONS_PER_GROUP  # one OOD radius (6) in this store
    # materials sharing an orientation set get the same rotations
    k0 = sorted(t.rotation_index[rows[t.material_index[rows] == 0]])
    k1 = sorted(t.rotation_index[rows[t.material_index[rows] == 1]])
    assert k0 == k1
    assert len(select_rows(t, "ood", "full")) == int(t.mask("ood").sum())
    assert set(select_rows(t, "test", "full")) == set(np.flatnonzero(t.mask("id") | t.mask("ood")))
    with pytest.raises(C2NPInputError, match="unknown split"):
        select_rows(t, "bogus")
    with pytest.raises(C2NPInputError, match="held-out"):
        select_rows(t, "heldout")


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


@pytest.mark.parametrize("body, message", [
    ("x\ncomment\n", r"frame 0 \(line 1\): expected an atom count"),
    ("2\nsample_id=KMgH3/R10/rot_1\nH 0 0 0\n", r"frame 0 \(line 3\): expected 2 atom lines"),
    ("1\nfoo=1\nH 0 0 0\n", r"frame 0 \(line 2\): no sample_id"),
    ("1\nsample_id=KMgH3/R10/rot_1\nXx 0 0 0\n", r"frame 0 \(line 3\): unknown element 'Xx'"),
    ("1\nsample_id=KMgH3/R10/rot_1\nH 0 zero 0\n", r"frame 0 \(line 3\): position is not a number"),
    ("1\nsample_id=KMgH3/R10/rot_1\nH 0 0\n", r"frame 0 \(line 3\): expected 4 columns"),
    ("", r"no frames"),
])
def test_malformed_extxyz_names_file_and_frame(tmp_path: Path, store: DatasetStore, body: str,
                                               message: str) -> None:
    path = tmp_path / "bad.extxyz"
    path.write_text(body)
    with pytest.raises(C2NPInputError, match=r"bad\.extxyz: " + message if message != "no frames"
                       else "bad.extxyz: no frames"):
        evaluate_forward(store, path, "id")


def test_extxyz_extra_columns_blank_lines_and_nan(tmp_path: Path, store: DatasetStore,
                                                  perfect: dict[str, Particle]) -> None:
    from c2np.evaluation import iter_forward_predictions

    sid = next(iter(perfect))
    part = perfect[sid]
    lines = [str(part.n_atoms), f'Properties=species:S:1:forces:R:3:pos:R:3 sample_id={sid} pbc="F F F"']
    syms = {19: "K", 12: "Mg", 1: "H"}
    lines += [f"{syms[int(z)]} 9 9 9 {x:.10f} {y:.10f} {w:.10f}"
              for z, (x, y, w) in zip(part.numbers, part.positions_angstrom)]
    lines[3] = lines[3].rsplit(" ", 1)[0] + " nan"
    path = tmp_path / "cols.extxyz"
    path.write_text("\n".join(lines) + "\n\n")
    ((place, got_id, z, x),) = list(iter_forward_predictions(path))
    assert got_id == sid and np.array_equal(z, part.numbers)
    assert np.isnan(x[1, 2]) and np.allclose(x[2:], part.positions_angstrom[2:], atol=1e-9)
    res = evaluate_forward(store, path, "id", n_resamples=20)
    assert [f["sample_id"] for f in res.failed_samples if "non-finite" in f["reason"]] == [sid]


def test_malformed_h5(tmp_path: Path, store: DatasetStore, perfect: dict[str, Particle]) -> None:
    import h5py

    path = write_forward_predictions_h5(tmp_path / "p.h5", perfect)
    with h5py.File(path, "r+") as f:
        f["numbers"][5] = 0
    with pytest.raises(C2NPInputError, match=r"p\.h5: sample 0 .*unknown element"):
        evaluate_forward(store, path, "id")
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"not hdf5")
    with pytest.raises(C2NPInputError, match="junk.h5: not a readable HDF5"):
        evaluate_forward(store, junk, "id")


def _inverse_rows(store: DatasetStore, rows: np.ndarray) -> list[dict]:
    t = store.recipes
    ids = t.sample_ids()
    out = []
    for r in rows:
        tg = inverse_target(store.cells[t.materials[t.material_index[r]]])
        out.append({"sample_id": ids[r], "a": tg.a_angstrom, "b": tg.b_angstrom, "c": tg.c_angstrom,
                    "alpha": tg.alpha_deg, "beta": tg.beta_deg, "gamma": tg.gamma_deg,
                    "spacegroup": tg.spacegroup})
    return out


def test_inverse_perfect_and_failures(tmp_path: Path, store: DatasetStore, id_rows: np.ndarray) -> None:
    rows = _inverse_rows(store, id_rows)
    assert rows[0]["spacegroup"] == 221
    path = write_inverse_predictions(tmp_path / "p.csv", rows)
    res = evaluate_inverse(store, path, "id", n_resamples=100)
    assert res.n_failed == 0 and res.overall["joint_accuracy_strict"]["mean"] == 1.0
    assert res.overall["lattice_rmse_paper"]["mean"] < 1e-9
    rows[0]["a"] = float("nan")
    rows[1]["spacegroup"] = 0
    rows[2]["alpha"] = 180.0
    del rows[3]
    res = evaluate_inverse(store, write_inverse_predictions(tmp_path / "q.csv", rows), "id",
                           n_resamples=100)
    assert res.n_failed == 4
    assert res.overall["spacegroup_accuracy"]["mean"] == pytest.approx(12 / 16)
    assert res.overall["spacegroup_accuracy"]["mean_successes"] == 1.0


@pytest.mark.parametrize("text, message", [
    ("", "empty file"),
    ("sample_id,a,b,c,alpha,beta,gamma\n", r"line 1: missing column\(s\) \['spacegroup'\]"),
    ("sample_id,a,b,c,alpha,beta,gamma,spacegroup\nKMgH3/R10/rot_1,4,4,4,90,90,90\n",
     r"line 2: expected 8 fields"),
    ("sample_id,a,b,c,alpha,beta,gamma,spacegroup\nKMgH3/R10/rot_1,4,four,4,90,90,90,221\n",
     r"line 2: column 'b' is not a number"),
    ("sample_id,a,b,c,alpha,beta,gamma,spacegroup\nKMgH3/R10/rot_1,4,4,4,90,90,90,221\n"
     "KMgH3/R10/rot_1,4,4,4,90,90,90,221\n", r"line 3: duplicate sample_id"),
    ("sample_id,a,b,c,alpha,beta,gamma,spacegroup\nZZ/R10/rot_1,4,4,4,90,90,90,221\n",
     r"line 2: unknown sample id"),
])
def test_malformed_csv_names_file_and_line(tmp_path: Path, store: DatasetStore, text: str,
                                           message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(C2NPInputError, match=r"bad\.csv: " + message):
        evaluate_inverse(store, path, "id")


def test_csv_empty_value_is_a_failure_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text("sample_id,a,b,c,alpha,beta,gamma,spacegroup\nX/R6/rot_1,4,,4,90,90,90,nan\n")
    row = read_inverse_predictions(path)["X/R6/rot_1"]
    assert np.isnan(row.params[1]) and np.isnan(row.spacegroup)


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    v = np.random.default_rng(0).random((200, 2))
    a = bootstrap_mean_ci(v, seed=3)
    assert np.array_equal(a, bootstrap_mean_ci(v, seed=3))
    assert np.all(a[:, 0] < v.mean(0)) and np.all(v.mean(0) < a[:, 1])
    assert np.all(bootstrap_mean_ci(np.ones((50, 1)))[0] == 1.0)


def test_results_json_roundtrip(tmp_path: Path, store: DatasetStore, perfect: dict[str, Particle]) -> None:
    res = evaluate_forward(store, perfect, "id", model="carve", n_resamples=50)
    out = res.write(tmp_path / "r.json")
    back = Results.read(out)
    d = back.data
    assert d["schema"] == "c2np.results/1" and d["task"] == "forward" and d["model"] == "carve"
    assert d["dataset"]["fingerprint"] == store.fingerprint and d["protocol"] == "paper"
    assert {"numpy", "scipy", "c2np"} <= set(d["versions"])
    assert d["tolerances"]["f1_tolerances_angstrom"] == [0.1, 0.5]
    assert d["subset_definition"]["rotations_per_material_radius"] == 8
    assert len(d["samples"]["sample_id"]) == d["n_samples"] == 16


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
