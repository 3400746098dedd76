"""Model cards and the registry of shipped models (c2np.models.cards): every folder of
``pretrained/`` has a valid card whose SHA-256 sums, priors, category and name match the
folder, and a card that no longer matches its folder is reported file by file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from c2np.errors import C2NPInputError
from c2np.models.cards import CARD_FILE, load_registry, read_card, verify_card
from c2np.submissions import read_model_yml

ROOT = Path(__file__).resolve().parents[1]
PRETRAINED = ROOT / "pretrained"


def test_every_shipped_model_has_a_card_that_matches_its_folder() -> None:
    registry = load_registry(PRETRAINED)
    folders = sorted(p.name for p in PRETRAINED.iterdir() if p.is_dir())
    assert sorted(registry) == folders and len(folders) == 11
    for card in registry.values():
        assert verify_card(card) == [], card.id           # recomputes every file's SHA-256
        assert card.task == ("forward" if card.id.endswith("-forward") else "inverse")
        assert card.category.category == "learned+prior" and card.priors
        for rel in card.results:
            assert (ROOT / rel).exists(), (card.id, rel)
    pool = registry["diffcsp-flowmm-pool-inverse"]
    assert pool.members == ("../diffcsp-inverse", "../flowmm-inverse") and "ensemble" in pool.priors
    assert not any(rel.endswith(".safetensors") for rel in pool.files)          # it names, never copies


def test_inverse_cards_agree_with_their_leaderboard_submissions() -> None:
    for card in load_registry(PRETRAINED).values():
        if card.task != "inverse":
            continue
        doc, problems = read_model_yml(ROOT / "submissions" / card.name / "model.yml")
        assert problems == [] and doc is not None
        assert doc["model"]["category"] == card.category.category
        assert tuple(doc["model"]["priors"]) == card.priors
        assert doc["training"]["store_fingerprint"] == card.training.store_fingerprint


def _copy(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(PRETRAINED / name, tmp_path / name))


def _edit(folder: Path, **changes: object) -> None:
    doc = yaml.safe_load((folder / CARD_FILE).read_text())
    doc.update(changes)
    (folder / CARD_FILE).write_text(yaml.safe_dump(doc, sort_keys=False))


def test_a_card_that_no_longer_matches_its_folder_is_reported(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "flowmm-inverse")
    assert verify_card(read_card(folder)) == []
    with (folder / "README.md").open("a") as fh:
        fh.write("changed\n")
    (folder / "notes.txt").write_text("not listed\n")
    (folder / "templates.json").unlink()
    problems = verify_card(read_card(folder))
    assert any("README.md: SHA-256 differs" in p for p in problems)
    assert any("notes.txt: not listed" in p for p in problems)
    assert any("templates.json: listed" in p and "missing" in p for p in problems)

    folder = _copy(tmp_path / "b", "diffcsp-forward")
    _edit(folder, priors=["lattice-sites"], name="diffcsp+sites")
    problems = verify_card(read_card(folder))
    assert any("the configuration implies ['lattice-sites', 'sphere-boundary']" in p for p in problems)
    assert any("name 'diffcsp+sites'" in p for p in problems)


def test_malformed_cards_are_one_clear_error(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "diffcsp-forward")
    cases = [({"id": "other"}, "must be the folder's name"),
             ({"category": "learned"}, "takes no priors"),
             ({"files": {"../x": "0" * 64}}, "must be a path inside the folder"),
             ({"files": {"config.json": "not-a-digest"}}, "files"),
             ({"extra": 1}, "extra"),
             ({"task": "both"}, "task")]
    original = (folder / CARD_FILE).read_text()
    for change, message in cases:
        (folder / CARD_FILE).write_text(original)
        _edit(folder, **change)
        with pytest.raises(C2NPInputError, match=message):
            read_card(folder)
    (folder / CARD_FILE).unlink()
    with pytest.raises(C2NPInputError, match="no model card"):
        read_card(folder)
    with pytest.raises(C2NPInputError, match="no model card"):
        load_registry(tmp_path)
