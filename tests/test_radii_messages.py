"""`c2np build` and `c2np train` name the protocol's training, validation, ID and OOD radii,
and say plainly when a store has no training rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from c2np.cells import write_cif
from c2np.cli import build_app
from c2np.splits import PAPER, STRICT, describe_radii, format_radii, no_training_rows_message, radius_roles
from helpers import perovskite


def test_format_radii_compresses_runs() -> None:
    assert format_radii([6, 7, 10, 11, 12, 29]) == "6-7, 10-12, 29"
    assert format_radii([]) == "none"


def test_radius_roles_of_both_protocols() -> None:
    paper = radius_roles(PAPER)
    assert paper["id"] == (10, 11, 17, 21, 24, 26) and paper["ood"] == (6, 7, 29, 30)
    assert paper["val"] == () and 8 in paper["train"] and 10 not in paper["train"]
    strict = radius_roles(STRICT)
    assert strict["val"] == (13, 23) and 13 not in strict["train"]
    assert radius_roles(PAPER, [6, 7, 10]) == {"train": (), "val": (), "id": (10,), "ood": (6, 7)}


def test_describe_radii_names_every_role() -> None:
    line = describe_radii(STRICT, n_heldout_materials=17)
    assert "training radii 8-9, 12, 14-16" in line and "validation radii 13, 23 Å" in line
    assert "ID 10-11, 17, 21, 24, 26 Å" in line and "OOD 6-7, 29-30 Å" in line
    assert "17 held-out materials" in line
    paper = describe_radii(PAPER, [6, 7, 10])
    assert "training radii none" in paper and "20 % of the training rotations" in paper
    assert "held-out" not in describe_radii(PAPER, n_heldout_materials=0)


def test_no_training_rows_message_names_the_radii_it_needs() -> None:
    msg = no_training_rows_message(PAPER, [6, 7, 10], n_materials=2, n_heldout_materials=0)
    assert "6-7, 10 Å" in msg and "8-9, 12-16" in msg and "held-out" not in msg


@pytest.fixture()
def cifs(tmp_path: Path) -> Path:
    folder = tmp_path / "cifs"
    write_cif(perovskite(), folder / "KMgH3.cif")
    return folder


def test_build_without_training_radii_warns_and_succeeds(cifs: Path, tmp_path: Path) -> None:
    app, runner = build_app(), CliRunner()
    out = tmp_path / "s.h5"
    r = runner.invoke(app, ["build", "--cifs", str(cifs), "--radii", "6,7,10", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "training radii none" in r.stdout and "ID 10 Å, OOD 6-7 Å" in r.stdout
    assert "all radii of the protocol paper: training radii 8-9, 12-16" in r.stdout
    warning = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warning) == 1 and "no training rows" in warning[0] and "8-9, 12-16" in warning[0]
    r = runner.invoke(app, ["build", "--cifs", str(cifs), "--radii", "6,7,10", "-o", str(tmp_path / "j.h5"),
                            "--json"])
    assert r.exit_code == 0 and "no training rows" in json.loads(r.stdout)["warning"]
    # c2np train on it: exit 2, one line naming the radii the training split needs
    r = runner.invoke(app, ["train", "--model", "sitescore", "--task", "forward", "--store", str(out),
                            "--config", "tiny", "--epochs", "1", "--out", str(tmp_path / "run")])
    assert r.exit_code == 2, r.output
    assert "held-out materials" not in r.output
    assert "radii 6-7, 10 Å include none of protocol paper's training radii (8-9, 12-16" in " ".join(r.output.split())


def test_build_with_training_radii_does_not_warn(cifs: Path, tmp_path: Path) -> None:
    r = CliRunner().invoke(build_app(), ["build", "--cifs", str(cifs), "--radii", "6,8", "-o", str(tmp_path / "s.h5")])
    assert r.exit_code == 0, r.output
    assert "training radii 8 Å" in r.stdout and "warning" not in r.stderr
