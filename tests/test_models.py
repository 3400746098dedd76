"""Tests of the learned models (c2np.models): every family trains with a finite, decreasing
loss, samples valid outputs, never sees task-1 targets, and checkpoints / resumes exactly."""

from __future__ import annotations

import inspect
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from c2np.cells import write_cif  # noqa: E402
from c2np.errors import C2NPInputError  # noqa: E402
from c2np.models import MODEL_NAMES  # noqa: E402
from c2np.models.config import get_config  # noqa: E402
from c2np.models.data import Condition, InMemoryDataset, condition_for_row, demo_cells, lattice_target, select_rows  # noqa: E402
from c2np.particle import Particle  # noqa: E402

TINY = get_config("tiny")


pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture(scope="module")
def ds() -> InMemoryDataset:
    """Two materials (cubic KMgH3, tetragonal RbCaH3), radii 6 (OOD) and 8 (train/val)."""
    cells = demo_cells()
    return InMemoryDataset([cells[0], cells[2]], "paper", radii_angstrom=[6, 8])


@pytest.fixture(scope="module")
def train_rows(ds) -> np.ndarray:
    rec = ds.recipes
    rows = select_rows(ds, "train")
    # two rotations of each material
    return np.concatenate([rows[rec.material_index[rows] == m][:2] for m in range(2)])


def _train_steps(model, step_fn, n_steps: int = 40, seed: int = 0) -> list[float]:
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=TINY.lr)
    losses = []
    for k in range(n_steps):
        loss, _ = step_fn(k)
        assert torch.isfinite(loss)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    return losses


# --------------------------------------------------------------------------------------
def test_import_c2np_does_not_import_torch():
    code = ("import sys, c2np, c2np.models, c2np.models.config, c2np.models.data, c2np.models.training, "
            "c2np.models.diagnostic\n"
            "from c2np.cli import build_app\nbuild_app()\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(Path(__file__).parents[1] / "src"), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_generator_trains_and_samples_valid_particle(name, ds, train_rows):
    from c2np.models.forward import FORWARD_FAMILIES

    torch.manual_seed(0)
    model = FORWARD_FAMILIES[name](TINY)
    g = torch.Generator().manual_seed(0)
    rng = np.random.default_rng(0)

    def step(_: int):
        rows = rng.choice(train_rows, 2)
        return model.loss([condition_for_row(ds, int(r)) for r in rows], [ds.particle(int(r)) for r in rows], g)

    losses = _train_steps(model, step)
    assert np.all(np.isfinite(losses))
    assert np.mean(losses[-10:]) < np.mean(losses[:10]), losses
    model.eval()
    row = int(train_rows[0])
    cond = condition_for_row(ds, row)
    out = model.sample([cond], torch.Generator().manual_seed(1), steps=4)
    assert len(out) == 1 and isinstance(out[0], Particle)
    p = out[0]
    assert p.n_atoms > 0
    assert np.all(np.isfinite(p.positions_angstrom))
    assert set(np.unique(p.numbers)) <= set(cond.cell.numbers.tolist())
    from c2np.models.training import fidelity

    fid = fidelity(model, ds, np.array([row]), seed=1, steps=4, n_resamples=10)
    assert 0.0 <= fid["val_f1@0.5"] <= 1.0 and np.isfinite(fid["val_chamfer"]) and fid["fidelity_failed"] == 0
    if name == "sitescore":  # the carve-based model learns the inside/outside threshold quickly
        assert fid["val_f1@0.5"] > 0.75


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_inverse_predictor_trains_and_predicts(name, ds, train_rows):
    from c2np.models.predictors import InversePredictor

    torch.manual_seed(0)
    model = InversePredictor(name, TINY)
    targets = {m: lattice_target(c) for m, c in ds.cells.items()}
    model.set_normalisation(np.stack([t[0] for t in targets.values()]))
    rng = np.random.default_rng(0)
    rec = ds.recipes

    def step(_: int):
        rows = rng.choice(train_rows, 2)
        mats = [rec.materials[rec.material_index[r]] for r in rows]
        return model.loss([ds.particle(int(r)) for r in rows], np.stack([targets[m][0] for m in mats]),
                          np.array([targets[m][1] for m in mats]))

    losses = _train_steps(model, step, n_steps=30)
    assert np.mean(losses[-10:]) < np.mean(losses[:10]), losses
    lat, sg = model.predict([ds.particle(int(r)) for r in train_rows])
    assert lat.shape == (len(train_rows), 6) and np.all(np.isfinite(lat))
    assert np.all(lat[:, :3] > 0) and np.all((lat[:, 3:] > 0) & (lat[:, 3:] < 180))
    assert np.all((sg >= 1) & (sg <= 230))


# --------------------------------------------------------------------------------------
class _NoTargetStore:
    """A store whose particles cannot be read: task-1 inputs must not need them."""

    def __init__(self, inner: InMemoryDataset) -> None:
        self.recipes, self.cells, self.fingerprint = inner.recipes, inner.cells, inner.fingerprint

    def particle(self, row: int) -> Particle:
        raise AssertionError("a task-1 model asked for the target particle")


def test_task1_inputs_never_contain_targets(ds, train_rows):
    from c2np.models.backbone import collate_conditions
    from c2np.models.forward import FORWARD_FAMILIES

    assert {f.name for f in fields(Condition)} == {"cell", "radius_angstrom", "quaternion", "centre_frac"}
    for cls in FORWARD_FAMILIES.values():
        params = list(inspect.signature(cls.sample).parameters)
        assert params[:4] == ["self", "conds", "g", "steps"] and not any("particle" in p or "target" in p
                                                                           for p in params)
    # conditions come from recipes + cells only, and do not change when the target does
    blind = _NoTargetStore(ds)
    row = int(train_rows[0])
    before = collate_conditions([condition_for_row(blind, row)]).tensors()
    key = (ds.recipes.materials[ds.recipes.material_index[row]], int(ds.recipes.radius_angstrom[row]))
    base = ds.base_particle(*key)
    ds._base[key] = Particle(base.numbers[:5], base.positions_angstrom[:5] + 1.0)  # perturb target
    try:
        after = collate_conditions([condition_for_row(ds, row)]).tensors()
    finally:
        ds._base[key] = base
    for k in before:
        assert torch.equal(before[k], after[k]), k
    # no conditioning tensor carries the target atom count
    n_target = ds.particle(row).n_atoms
    assert all(v.numel() != n_target * 3 for v in before.values())
    # every generator samples with a store that refuses to reveal targets
    for cls in FORWARD_FAMILIES.values():
        out = cls(TINY).eval().sample([condition_for_row(blind, row)], torch.Generator().manual_seed(0), steps=2)
        assert out[0].n_atoms > 0


def test_predict_task1_never_reads_particles(ds, tmp_path):
    from c2np.models.training import predict, train
    from c2np.particle_io import read_frames

    run = tmp_path / "run"
    train(ds, "flowmm", "forward", TINY.__class__(**{**TINY.to_dict(), "epochs": 1, "steps_per_epoch": 2,
                                                     "n_fidelity": 2}), run, progress=False)
    out = predict(run, _NoTargetStore(ds), "ood", tmp_path / "pred.extxyz", progress=False, steps=2)
    frames = read_frames(tmp_path / "pred.extxyz")
    assert len(frames) == out["n_samples"] > 0
    ids = [info["sample_id"] for _, info in frames]
    assert len(set(ids)) == len(ids) and all(i.split("/")[1] == "R6" for i in ids)


# --------------------------------------------------------------------------------------
def _short(**kw):
    return TINY.__class__(**{**TINY.to_dict(), "steps_per_epoch": 3, "n_val": 2, "n_fidelity": 2, **kw})


def test_checkpoint_round_trip_and_exact_resume(ds, tmp_path):
    from safetensors.torch import load_file

    from c2np.models.training import load_run, train

    cfg = _short(epochs=2)
    full = train(ds, "sitescore", "inverse", cfg, tmp_path / "full", seed=3, progress=False)
    assert (full.epoch, full.step) == (2, 6)
    part = train(ds, "sitescore", "inverse", cfg, tmp_path / "part", seed=3, progress=False, epochs=1)
    assert (part.epoch, part.step) == (1, 3)
    with pytest.raises(C2NPInputError):
        train(ds, "sitescore", "inverse", cfg, tmp_path / "part", seed=3, progress=False)
    resumed = train(ds, "sitescore", "inverse", cfg, tmp_path / "part", progress=False, resume=True)
    assert (resumed.epoch, resumed.step) == (2, 6)
    assert [r["epoch"] for r in resumed.log] == [1.0, 2.0]
    for name in ("model.safetensors", "ema.safetensors"):  # live weights and their EMA resume exactly
        a = load_file(str(tmp_path / "full" / "checkpoint" / name))
        b = load_file(str(tmp_path / "part" / "checkpoint" / name))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    live = load_file(str(tmp_path / "part" / "checkpoint" / "model.safetensors"))
    assert any(not torch.equal(live[k], b[k]) for k in b)  # the EMA is not the live weights
    model, meta = load_run(tmp_path / "part", checkpoint="last")
    assert meta["model"] == "sitescore" and all(torch.equal(model.state_dict()[k], b[k]) for k in b)
    assert meta["checkpoint"] == {"name": "last", "epoch": 2, "step": 6, "weights": "ema.safetensors"}
    saved = torch.load(tmp_path / "part" / "checkpoint" / "optim.pt", weights_only=True)
    assert saved["optimizer"]["state"] and saved["scheduler"]["last_epoch"] == 6
    log = (tmp_path / "part" / "log.csv").read_text().splitlines()
    full_log = (tmp_path / "full" / "log.csv").read_text().splitlines()
    assert log[0].startswith("epoch,step,train_loss,val_loss") and len(log) == 3

    def strip(lines: list[str]) -> list[str]:  # drop throughput and time
        return [",".join(x.split(",")[:-2]) for x in lines]

    assert strip(log) == strip(full_log)


def test_cli_train_predict_and_diagnostic(ds, tmp_path):
    from typer.testing import CliRunner

    from c2np.cli import build_app
    from c2np.particle_io import read_frames

    cells = tmp_path / "cells"
    cells.mkdir()
    for c in ds.cells.values():
        write_cif(c, cells / f"{c.material_id}.cif")
    app, runner = build_app(), CliRunner()
    common = ["--cells", str(cells), "--radii", "6,8", "--config", "tiny", "--epochs", "1"]
    for task in ("forward", "inverse"):
        res = runner.invoke(app, ["train", "--model", "sitescore", "--task", task, *common,
                                  "--out", str(tmp_path / task)])
        assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["predict", "--run", str(tmp_path / "forward"), "--cells", str(cells), "--radii",
                              "6,8", "--split", "ood", "--out", str(tmp_path / "p.extxyz")])
    assert res.exit_code == 0, res.output
    from c2np.tasks import select_rows as eval_rows

    assert len(read_frames(tmp_path / "p.extxyz")) == len(eval_rows(ds.recipes, "ood", "eval"))
    res = runner.invoke(app, ["predict", "--run", str(tmp_path / "inverse"), "--cells", str(cells), "--radii",
                              "6,8", "--split", "ood", "--subset", "full", "--out", str(tmp_path / "p.csv")])
    assert res.exit_code == 0, res.output
    lines = (tmp_path / "p.csv").read_text().splitlines()
    assert lines[0] == "sample_id,a,b,c,alpha,beta,gamma,spacegroup"
    assert len(lines) - 1 == int(np.sum(ds.recipes.mask("ood")))
    res = runner.invoke(app, ["model-diagnostic", str(tmp_path / "forward"), str(tmp_path / "inverse"),
                              "--out", str(tmp_path / "diag")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "diag" / "model_diagnostic.png").stat().st_size > 0
    assert "sitescore" in (tmp_path / "diag" / "model_diagnostic.md").read_text()
    res = runner.invoke(app, ["train", "--model", "nope", "--task", "forward", *common, "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "unknown model" in res.output


def test_real_store_and_harness_score_predictions(tmp_path):
    """Train on the HDF5 store, predict the harness's eval subset, score with c2np.evaluation."""
    from c2np.tasks import ForwardTask, InverseTask
    from c2np.tasks import select_rows as eval_rows

    def evaluate_forward(store, path, split, subset, **kw):
        return ForwardTask(store, split, subset).evaluate(path, **kw)

    def evaluate_inverse(store, path, split, subset, **kw):
        return InverseTask(store, split, subset).evaluate(path, **kw)
    from c2np.models.training import predict, train
    from c2np.store import DatasetStore, build_store

    path = build_store(demo_cells()[:2], tmp_path / "s.h5", radii_angstrom=[6, 8], progress=False)
    store = DatasetStore.open(path)
    n_eval = len(eval_rows(store.recipes, "ood", "eval"))
    for task, ext in (("forward", "extxyz"), ("inverse", "csv")):
        train(store, "sitescore", task, _short(epochs=1), tmp_path / task, progress=False)
        out = predict(tmp_path / task, store, "ood", tmp_path / f"p.{ext}", progress=False)
        assert out["n_samples"] == n_eval
        evaluate = evaluate_forward if task == "forward" else evaluate_inverse
        res = evaluate(store, tmp_path / f"p.{ext}", "ood", "eval", model="sitescore", n_resamples=20)
        assert res.n_failed == 0
    train(store, "diffcsp", "forward", _short(epochs=1), tmp_path / "gen", progress=False)
    predict(tmp_path / "gen", store, "ood", tmp_path / "g.extxyz", progress=False, steps=2, per_group=1)
    res = evaluate_forward(store, tmp_path / "g.extxyz", "ood", "eval", model="diffcsp", n_resamples=20)
    # one rotation per (material, R) predicted: every other evaluated sample counts as a failure
    assert n_eval - 2 <= res.n_failed <= n_eval


# --------------------------------------------------------------------------------------
def test_knn_graph_matches_brute_force():
    from c2np.models.backbone import knn_graph

    rng = np.random.default_rng(0)
    pos = torch.as_tensor(rng.normal(size=(30, 3)) * 3, dtype=torch.float32)
    batch = torch.as_tensor([0] * 12 + [1] * 18)
    edges = knn_graph(pos, batch, 4, 4.0).numpy()
    p = pos.numpy()
    expect = set()
    for s, e in ((0, 12), (12, 30)):
        d = np.linalg.norm(p[s:e, None] - p[None, s:e], axis=-1)
        for i in range(e - s):
            order = [j for j in np.argsort(d[i]) if j != i][:4]
            expect |= {(j + s, i + s) for j in order if d[i, j] <= 4.0}
    assert set(map(tuple, edges.T)) == expect


def test_egnn_is_equivariant_jointly_with_the_lattice(ds, train_rows):
    from scipy.spatial.transform import Rotation

    from c2np.models.backbone import EGNN

    torch.manual_seed(0)
    net = EGNN(5, 16, 2, knn=6)
    for p in net.vec.parameters():
        torch.nn.init.normal_(p, std=0.1)
    pos = torch.randn(20, 3) * 3
    h0 = torch.randn(20, 5)
    batch = torch.zeros(20, dtype=torch.long)
    cond = torch.randn(20, 16)
    lat = torch.tensor(np.array(ds.cells["KMgH3"].lattice_angstrom), dtype=torch.float32).unsqueeze(0)
    M = torch.as_tensor(Rotation.from_euler("xyz", [20, 40, 70], degrees=True).as_matrix(), dtype=torch.float32)
    radius = torch.tensor([8.0])
    h1, v1 = net(h0, pos, batch, cond, lat, radius)
    h2, v2 = net(h0, pos @ M.T, batch, cond, lat @ M.T, radius)
    assert torch.allclose(h1, h2, atol=1e-4)
    assert torch.allclose(v1 @ M.T, v2, atol=1e-4)
    assert v1.abs().max() > 1e-3


def test_count_head_density_prior(ds, train_rows):
    from c2np.models.backbone import Conditioner, CountHead, collate_conditions

    row = int(train_rows[0])
    c = collate_conditions([condition_for_row(ds, row)])
    n = CountHead(16).sample(c, Conditioner(16)(c))
    true = ds.particle(row).n_atoms
    assert abs(int(n[0]) - true) / true < 0.1
