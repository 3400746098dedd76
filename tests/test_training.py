"""Tests of c2np.models.training: no leak of held-out materials or radii under `strict`, clear
errors instead of silent fallbacks, fidelity through the evaluation harness, best and last
checkpoints, the store check of `predict`, device placement, and the task-2 families being
distinct models."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from c2np.cells import write_cif  # noqa: E402
from c2np.errors import C2NPInputError  # noqa: E402
from c2np.models.config import PRESETS, get_config, parse_overrides  # noqa: E402
from c2np.models.data import InMemoryDataset, demo_cells, lattice_target, training_rows  # noqa: E402
from c2np.particle import Particle  # noqa: E402

TINY = get_config("tiny")


def _cfg(**kw):
    return get_config("tiny", **{"epochs": 1, "steps_per_epoch": 2, "n_val": 2, "n_fidelity": 2, **kw})


pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture(scope="module")
def ds() -> InMemoryDataset:
    cells = demo_cells()
    return InMemoryDataset([cells[0], cells[2]], "paper", radii_angstrom=[6, 8])


@pytest.fixture(scope="module")
def strict_cells(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cells")
    for c in demo_cells():
        write_cif(c, folder / f"{c.material_id}.cif")
    return folder


def _cli(args: list[str]):
    from typer.testing import CliRunner

    from c2np.cli import build_app

    return CliRunner().invoke(build_app(), args)


# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("task", ["inverse", "forward"])
def test_strict_train_excludes_heldout_materials_and_val_radii(task, strict_cells, tmp_path):
    """`c2np train --json` under strict reports materials disjoint from the held-out ones and
    training radii disjoint from the validation radii; task-2 normalisation uses the training
    materials only."""
    from c2np.models.training import load_run

    radii = "6,8,13"
    res = _cli(["train", "--model", "sitescore", "--task", task, "--cells", str(strict_cells), "--protocol",
                "strict", "--radii", radii, "--config", "tiny", "--epochs", "1", "--set", "steps_per_epoch=2",
                "--set", "n_fidelity=2", "--set", "max_train_radius_angstrom=13", "--out", str(tmp_path / "run"),
                "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    ds = InMemoryDataset(demo_cells(), "strict", radii_angstrom=[6, 8, 13])
    held = set(ds.recipes.heldout_materials)
    assert held and set(out["heldout_materials"]) == held
    assert out["train_materials"] and out["val_materials"]
    assert not held & set(out["train_materials"]) and not held & set(out["val_materials"])
    assert set(out["train_materials"]) | held == set(ds.recipes.materials)
    assert out["train_radii"] == [8] and out["val_radii"] == [13]
    assert out["best"]["epoch"] == 1
    meta = json.loads((tmp_path / "run" / "config.json").read_text())
    assert meta["data"]["train_materials"] == out["train_materials"] and meta["protocol"] == "strict"
    if task == "inverse":
        model, _ = load_run(tmp_path / "run")
        targets = np.stack([lattice_target(ds.cells[m])[0] for m in out["train_materials"]])
        assert np.allclose(model.lat_mean.numpy(), targets.mean(0), atol=1e-4)
        everyone = np.stack([lattice_target(c)[0] for c in ds.cells.values()])
        assert not np.allclose(model.lat_mean.numpy(), everyone.mean(0), atol=1e-4)


def test_training_rows_never_hold_heldout_rows():
    ds = InMemoryDataset(demo_cells(), "strict", radii_angstrom=[6, 8, 13])
    rows = training_rows(ds, max_radius_angstrom=13)
    rec = ds.recipes
    held_idx = [rec.materials.index(m) for m in rec.heldout_materials]
    for r in (rows.train, rows.val):
        assert len(r) and not np.isin(rec.material_index[r], held_idx).any()
    assert set(rec.radius_angstrom[rows.train]) == {8} and set(rec.radius_angstrom[rows.val]) == {13}


def test_silent_fallbacks_are_errors(strict_cells, tmp_path):
    common = ["--model", "sitescore", "--task", "inverse", "--config", "tiny", "--epochs", "1"]
    # strict without its validation radii: no validation rows at all
    res = _cli(["train", *common, "--cells", str(strict_cells), "--protocol", "strict", "--radii", "6,8",
                "--out", str(tmp_path / "a")])
    assert res.exit_code == 2 and "no validation rows" in res.output
    # validation radii above the radius limit: named, never replaced by the smallest radius
    res = _cli(["train", *common, "--cells", str(strict_cells), "--protocol", "strict", "--radii", "6,8,13",
                "--out", str(tmp_path / "b")])
    assert res.exit_code == 2 and "R <= 8" in res.output and "13" in res.output
    # no training rows under the radius limit
    res = _cli(["train", *common, "--cells", str(strict_cells), "--radii", "6,12", "--out", str(tmp_path / "c")])
    assert res.exit_code == 2 and "'train' has no rows with R <= 8" in res.output
    res = _cli(["train", *common, "--cells", str(strict_cells), "--set", "nope=1", "--out", str(tmp_path / "d")])
    assert res.exit_code == 2 and "config field" in res.output
    assert not (tmp_path / "a" / "checkpoint").exists()


def test_parse_overrides_types():
    assert parse_overrides(["epochs=3", "lr=0.1", "max_train_radius_angstrom=None", "lr_schedule=cosine"]) == {
        "epochs": 3, "lr": 0.1, "max_train_radius_angstrom": None, "lr_schedule": "cosine"}
    with pytest.raises(C2NPInputError):
        parse_overrides(["epochs=three"])


def test_presets_score_at_least_eight_fidelity_samples_and_use_ema():
    for cfg in PRESETS.values():
        assert cfg.n_fidelity >= 8 and cfg.ema_decay > 0


# --------------------------------------------------------------------------------------
class _EmptyGenerator:
    """A stand-in generator that predicts empty particles: the harness must fail every sample."""

    task = "forward"
    training = False
    cfg = TINY

    def eval(self):
        return self

    def parameters(self):
        return iter([torch.zeros(1)])

    def train(self, mode: bool = True):
        return self

    def sample(self, conds, g, steps=None):
        return [Particle(np.zeros(0, dtype=int), np.zeros((0, 3))) for _ in conds]


def test_fidelity_counts_failures_through_the_harness(ds):
    from c2np.models.training import fidelity

    rows = np.flatnonzero(ds.recipes.mask("val"))[:3]
    fid = fidelity(_EmptyGenerator(), ds, rows, seed=0, n_resamples=10)
    assert fid["n_fidelity"] == 3 and fid["fidelity_failed"] == 3
    assert fid["val_f1@0.5"] == 0.0 and fid["val_count_error"] == 1.0
    assert fid["val_chamfer"] == pytest.approx(2 * 8.0)  # the harness's penalty 2R, not inf
    with pytest.raises(C2NPInputError):
        fidelity(_EmptyGenerator(), ds, np.flatnonzero(ds.recipes.mask("ood"))[:1].tolist()
                 + np.flatnonzero(ds.recipes.mask("val"))[:1].tolist(), seed=0)


def test_best_checkpoint_beside_last_and_predict_uses_best(ds, tmp_path):
    from safetensors.torch import load_file

    from c2np.models.training import load_run, predict, train

    res = train(ds, "flowmm", "inverse", _cfg(epochs=4, steps_per_epoch=3), tmp_path / "run", progress=False)
    keys = [(r["val_joint_accuracy_paper"], -r["val_lattice_rmse_paper"]) for r in res.log]
    best_epoch = 1 + max(range(len(keys)), key=lambda i: (keys[i], -i))
    assert res.best["epoch"] == best_epoch
    assert json.loads((tmp_path / "run" / "best" / "state.json").read_text())["epoch"] == best_epoch
    for r in res.log:  # every fidelity point carries its interval
        assert r["val_lattice_rmse_paper_lo"] <= r["val_lattice_rmse_paper"] <= r["val_lattice_rmse_paper_hi"]
    best, meta = load_run(tmp_path / "run")
    saved = load_file(str(tmp_path / "run" / "best" / "model.safetensors"))
    assert meta["checkpoint"]["name"] == "best" and meta["checkpoint"]["epoch"] == best_epoch
    assert all(torch.equal(best.state_dict()[k], saved[k]) for k in saved)
    _, meta_last = load_run(tmp_path / "run", checkpoint="last")
    assert meta_last["checkpoint"]["epoch"] == 4
    summary = predict(tmp_path / "run", ds, "ood", tmp_path / "p.csv", progress=False)
    assert summary["checkpoint"]["name"] == "best"
    with pytest.raises(C2NPInputError):
        load_run(tmp_path / "run", checkpoint="middle")


def test_predict_refuses_another_store_unless_allowed(ds, tmp_path, strict_cells):
    from c2np.models.training import predict, train

    train(ds, "sitescore", "inverse", _cfg(), tmp_path / "run", progress=False)
    other = InMemoryDataset(demo_cells()[:2], "paper", radii_angstrom=[6, 8])  # other materials
    with pytest.raises(C2NPInputError, match="allow-other-store"):
        predict(tmp_path / "run", other, "ood", tmp_path / "p.csv", progress=False)
    summary = predict(tmp_path / "run", other, "ood", tmp_path / "p.csv", progress=False, allow_other_store=True)
    check = summary["store_check"]
    assert not check["matches"] and check["allow_other_store"] and check["store_fingerprint"] == other.fingerprint
    sidecar = json.loads((tmp_path / "p.csv.json").read_text())
    assert sidecar["store_check"] == check
    # the CLI: exit 2 with one line, then the flag
    common = ["predict", "--run", str(tmp_path / "run"), "--cells", str(strict_cells), "--radii", "6,8",
              "--split", "ood", "--out", str(tmp_path / "q.csv")]
    res = _cli(common)
    assert res.exit_code == 2 and "--allow-other-store" in res.output and "Traceback" not in res.output
    res = _cli([*common, "--allow-other-store", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["store_check"]["allow_other_store"] is True


def test_in_memory_fingerprint_matches_the_store(tmp_path):
    from c2np.store import DatasetStore, build_store

    cells = demo_cells()[:2]
    store = DatasetStore.open(build_store(cells, tmp_path / "s.h5", radii_angstrom=[6, 8], progress=False))
    assert InMemoryDataset(cells, "paper", radii_angstrom=[6, 8]).fingerprint == store.fingerprint
    assert InMemoryDataset(cells, "paper", radii_angstrom=[6, 9]).fingerprint != store.fingerprint


# --------------------------------------------------------------------------------------
def test_device_placement_on_cpu(ds, tmp_path, strict_cells):
    from c2np.models.training import load_run, place, resolve_device, train

    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(C2NPInputError):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(C2NPInputError, match="no CUDA device"):
            resolve_device("cuda")
        res = _cli(["train", "--model", "sitescore", "--task", "inverse", "--cells", str(strict_cells),
                    "--radii", "6,8", "--device", "cuda", "--out", str(tmp_path / "x")])
        assert res.exit_code == 2 and "no CUDA device" in res.output
    train(ds, "cdvae", "inverse", _cfg(), tmp_path / "run", progress=False, device="cpu")
    model, meta = load_run(tmp_path / "run", device="cpu")
    assert meta["device"] == "cpu"
    assert all(t.device.type == "cpu" for t in [*model.parameters(), *model.buffers()])
    from c2np.models.forward import FORWARD_FAMILIES

    # the generators create every tensor on their weights' / generator's device (issue 12)
    moved = place(FORWARD_FAMILIES["diffcsp"](TINY), torch.device("meta"))
    assert all(t.device.type == "meta" for t in [*moved.parameters(), *moved.buffers()])


def test_every_task2_family_is_its_own_model(ds, tmp_path):
    """DiffCSP and FlowMM share the CSPNet-like encoder; FlowMM's lattice comes from a flow head,
    so the two trained models predict differently (no row counted twice)."""
    from c2np.models.predictors import ENCODER_KIND, LATTICE_HEAD
    from c2np.models.training import load_run, train

    designs = {(ENCODER_KIND[m], LATTICE_HEAD[m]) for m in ENCODER_KIND}
    assert len(designs) == len(ENCODER_KIND)
    preds = {}
    rows = np.flatnonzero(ds.recipes.mask("ood"))[:4]
    for name in ("diffcsp", "flowmm"):
        train(ds, name, "inverse", _cfg(steps_per_epoch=3), tmp_path / name, progress=False, seed=0)
        model, _ = load_run(tmp_path / name)
        preds[name] = model.predict([ds.particle(int(r)) for r in rows])[0]
    assert not np.allclose(preds["diffcsp"], preds["flowmm"])


def test_diagnostic_reports_samples_per_point(ds, tmp_path):
    from c2np.models.diagnostic import loss_fidelity_table, write_diagnostic
    from c2np.models.training import train

    train(ds, "sitescore", "forward", _cfg(epochs=2, n_fidelity=3), tmp_path / "run", progress=False)
    table = loss_fidelity_table([tmp_path / "run"])
    assert table[0]["n_fidelity"] == 3 and table[0]["model"] == "sitescore+carve"
    assert table[0]["best_epoch"] in (1, 2)
    refs = {r["model"]: r for r in table[1:]}  # the baselines on the same validation rows
    assert set(refs) == {"analytic carve (ceiling) (reference, same rows)", "memorisation (reference, same rows)",
                         "random ball (floor) (reference, same rows)"}
    assert refs["analytic carve (ceiling) (reference, same rows)"]["fidelity"] == 1.0
    assert refs["random ball (floor) (reference, same rows)"]["fidelity"] < 0.2
    assert all(r["n_fidelity"] == 3 for r in refs.values())
    files = write_diagnostic([tmp_path / "run"], tmp_path / "diag")
    md = files[1].read_text()
    assert "3 validation samples per point" in md and "95 %" in md and "memorisation (reference" in md
    assert files[0].stat().st_size > 0


def test_predict_shards_merge_into_one_run(ds, tmp_path):
    """predict --shard I/N (task 2) writes whole batches of the one run; the merged parts are
    that run's file byte for byte; a missing, repeated or foreign part is refused."""
    from c2np.models.training import merge_predictions, predict, train

    run = tmp_path / "run"
    train(ds, "flowmm", "inverse", _cfg(epochs=1, steps_per_epoch=2, batch_size=3), run, progress=False)
    one = predict(run, ds, "ood", tmp_path / "one.csv", progress=False)
    assert one["n_samples"] > 6  # several batches of 3
    parts = [tmp_path / f"part{i}.csv" for i in range(3)]
    for i, p in enumerate(parts):
        rec = predict(run, ds, "ood", p, progress=False, shard=(i, 3))
        assert rec["shard"] == {"index": i, "count": 3} and rec["n_rows"] == one["n_samples"]
    merged = merge_predictions(list(reversed(parts)), tmp_path / "merged.csv")
    assert (tmp_path / "merged.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()
    assert merged["n_samples"] == one["n_samples"]
    with pytest.raises(C2NPInputError, match="missing shard"):
        merge_predictions(parts[:2], tmp_path / "m2.csv")
    with pytest.raises(C2NPInputError, match="given twice"):
        merge_predictions([parts[0], parts[0], parts[1], parts[2]], tmp_path / "m3.csv")
    predict(run, ds, "ood", tmp_path / "other.csv", progress=False, shard=(1, 3), checkpoint="last", seed=1)
    with pytest.raises(C2NPInputError, match="another run"):
        merge_predictions([parts[0], tmp_path / "other.csv", parts[2]], tmp_path / "m4.csv")
    res = _cli(["merge-predictions", *map(str, parts), "-o", str(tmp_path / "cli.csv"), "--json"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "cli.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()


def test_predict_shards_merge_into_one_run_task1(ds, tmp_path):
    """Task 1: every batch draws its own seeded noise, so shards of whole batches are the one
    run's samples and the merged extxyz is that run's file byte for byte; another seed differs."""
    from c2np.models.training import merge_predictions, predict, train

    run = tmp_path / "run"
    train(ds, "flowmm", "forward", _cfg(epochs=1, steps_per_epoch=1, batch_size=2), run, progress=False)
    one = predict(run, ds, "ood", tmp_path / "one.extxyz", progress=False, per_group=2, steps=3)
    assert one["n_samples"] >= 4  # several batches of 2
    parts = [tmp_path / f"part{i}.extxyz" for i in range(2)]
    for i, p in enumerate(parts):
        rec = predict(run, ds, "ood", p, progress=False, per_group=2, steps=3, shard=(i, 2))
        assert rec["n_rows"] == one["n_samples"] and 0 < rec["n_samples"] < one["n_samples"]
    merge_predictions(parts, tmp_path / "merged.extxyz")
    assert (tmp_path / "merged.extxyz").read_bytes() == (tmp_path / "one.extxyz").read_bytes()
    with pytest.raises(C2NPInputError, match="must end in"):
        merge_predictions(parts, tmp_path / "merged.csv")
    predict(run, ds, "ood", tmp_path / "seed1.extxyz", progress=False, per_group=2, steps=3, seed=1)
    assert (tmp_path / "seed1.extxyz").read_bytes() != (tmp_path / "one.extxyz").read_bytes()
