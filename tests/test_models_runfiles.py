"""Tests of damaged run folders (c2np.models.runfiles): each damage is one clear error that
names the file, never a traceback from torch, safetensors or json."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from c2np.errors import C2NPInputError  # noqa: E402
from c2np.models.config import get_config  # noqa: E402
from c2np.models.data import InMemoryDataset, demo_cells  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, InMemoryDataset]:
    from c2np.models.training import train

    torch.set_num_threads(1)
    cells = demo_cells()
    ds = InMemoryDataset([cells[0]], "paper", radii_angstrom=[6, 8])
    tiny = get_config("tiny")
    cfg = tiny.__class__(**{**tiny.to_dict(), "steps_per_epoch": 2, "n_val": 2, "epochs": 1})
    folder = tmp_path_factory.mktemp("run") / "r"
    train(ds, "sitescore", "inverse", cfg, folder, seed=0, progress=False)
    return folder, ds


class _Evil:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (print, ("pickle code ran",))


def _damage(folder: Path, name: str) -> str:
    weights = sorted(folder.glob("*/*.safetensors"))  # best/ (what predict loads) and checkpoint/
    assert weights, "the run wrote no weights"
    if name == "truncated safetensors":
        for w in weights:
            data = w.read_bytes()
            w.write_bytes(data[: len(data) // 2])
        return r"\.safetensors: damaged or foreign weights"
    if name == "foreign safetensors":
        for w in weights:
            w.write_bytes(b"not a safetensors file at all")
        return r"\.safetensors: damaged or foreign weights"
    if name == "config mismatch":
        meta = json.loads((folder / "config.json").read_text())
        meta["config"]["hidden"] = meta["config"].get("hidden", 8) * 2 + 1
        (folder / "config.json").write_text(json.dumps(meta))
        return r"\.safetensors: the weights do not fit the model built from config.json"
    if name == "bad config.json":
        (folder / "config.json").write_text("{not json")
        return "config.json: the run metadata is not valid JSON"
    raise AssertionError(name)


@pytest.mark.parametrize("damage", ["truncated safetensors", "foreign safetensors", "config mismatch",
                                    "bad config.json"])
def test_damaged_weights_and_config_name_the_file(run, tmp_path: Path, damage: str) -> None:
    from c2np.models.training import load_run

    folder = tmp_path / "copy"
    shutil.copytree(run[0], folder)
    expected = _damage(folder, damage)
    if damage == "config mismatch" and "hidden" not in json.loads((run[0] / "config.json").read_text())["config"]:
        pytest.skip("config has no 'hidden' field")
    for checkpoint in ("best", "last"):
        with pytest.raises(C2NPInputError, match=expected):
            load_run(folder, checkpoint=checkpoint)


@pytest.mark.parametrize("damage, expected", [
    ("state", "state.json: the training state is not valid JSON"),
    ("state-keys", "state.json: the training state lacks"),
    ("log", "log.csv: line 2: train_loss: .lots. is not a number"),
    ("pickle", "optim.pt: not a loadable optimizer state"),
])
def test_damaged_resume_files_name_the_file(run, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            damage: str, expected: str) -> None:
    from c2np.models.training import train

    folder = tmp_path / "copy"
    shutil.copytree(run[0], folder)
    ck = folder / "checkpoint"
    if damage == "state":
        (ck / "state.json").write_text('{"epoch": 1,')
    elif damage == "state-keys":
        (ck / "state.json").write_text('{"epoch": 1}')
    elif damage == "log":
        (folder / "log.csv").write_text("epoch,step,train_loss\n1,3,lots\n")
    elif damage == "pickle":
        (ck / "optim.pt").write_bytes(pickle.dumps(_Evil()))
    meta = json.loads((folder / "config.json").read_text())
    from c2np.models.config import ModelConfig

    cfg = ModelConfig.from_dict(meta["config"])
    with pytest.raises(C2NPInputError, match=expected):
        train(run[1], "sitescore", "inverse", cfg, folder, progress=False, resume=True, epochs=2)
    assert "pickle code ran" not in capsys.readouterr().out


def test_cli_predict_on_damaged_run_exits_2(run, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from c2np.cli import build_app

    folder = tmp_path / "copy"
    shutil.copytree(run[0], folder)
    (folder / "best" / "model.safetensors").write_bytes(b"\0" * 64)  # the checkpoint predict loads by default
    cifs = tmp_path / "cifs"
    cifs.mkdir()
    from c2np.cells import write_cif

    write_cif(demo_cells()[0], cifs / f"{demo_cells()[0].material_id}.cif")
    res = CliRunner().invoke(build_app(), ["predict", "--run", str(folder), "--cells", str(cifs), "--radii", "6,8",
                                           "--split", "ood", "-o", str(tmp_path / "p.csv")])
    assert res.exit_code == 2, res.output
    assert "model.safetensors" in res.output and "Traceback" not in res.output
