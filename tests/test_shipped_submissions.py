"""The submissions committed under `submissions/` (the task-2 crystal generators on the
leaderboard) are valid: schema, declared rows, files the harness's reader accepts, the
declared number of answers per (material, R) of each split. Scoring them
needs the strict store (`c2np build --protocol strict`, fingerprint in model.yml); `c2np benchmark` on that
store ranks them (docs/tutorials/submit.md)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from c2np.categories import name_with_priors
from c2np.models.inverse.pool import read_pool_members
from c2np.models.priors import inverse_priors, pool_priors
from c2np.predictions import read_inverse_predictions
from c2np.splits import get_protocol
from c2np.submissions import read_model_yml, rotations_per_group

ROOT = Path(__file__).resolve().parents[1] / "submissions"
FOLDERS = sorted(p for p in ROOT.iterdir() if (p / "model.yml").is_file()) if ROOT.is_dir() else []
SAMPLE = re.compile(r"^(?P<m>[^/]+)/R(?P<r>\d+)/rot_(?P<k>\d+)$")


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_committed_submission_is_valid_and_covers_its_rows(folder: Path) -> None:
    doc, problems = read_model_yml(folder / "model.yml")
    assert problems == [] and doc is not None
    assert doc["model"]["id"] == folder.name and doc["training"]["protocol"] == "strict"
    per_group = rotations_per_group(doc)
    proto = get_protocol("strict")
    radii = {"id": set(proto.id_radii_angstrom), "ood": set(proto.ood_radii_angstrom)}
    materials: dict[str, set[str]] = {}
    declared = doc.get("splits", ["id", "ood", "heldout"])
    assert "heldout" in declared
    assert sorted(p.stem for p in (folder / "inverse").glob("*.csv")) == sorted(declared)
    for split in declared:
        preds = read_inverse_predictions(folder / "inverse" / f"{split}.csv")
        groups = Counter()
        for sid in preds:
            m = SAMPLE.match(sid)
            assert m is not None, sid
            r = int(m["r"])
            assert int(m["k"]) >= 1 and 6 <= r <= 30
            if split in radii:
                assert r in radii[split], (split, sid)
            groups[(m["m"], r)] += 1
        assert set(groups.values()) == {per_group}
        materials[split] = {g[0] for g in groups}
        if split == "heldout":
            assert {g[1] for g in groups} == set(range(6, 31))
    assert len(materials["heldout"]) == 17  # the catalog's held-out materials (protocol strict)
    if "id" in declared:  # id and ood cover every material, the held-out ones among them
        assert materials["id"] == materials["ood"] and materials["heldout"] < materials["id"]


def test_every_task2_generator_has_a_committed_submission() -> None:
    families = {p.name.split("+")[0] for p in FOLDERS}
    assert {"diffcsp", "flowmm", "mattergen", "cdvae", "adit", "diffcsp-flowmm"} <= families


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_committed_submission_names_its_priors(folder: Path) -> None:
    """A shipped generator's id carries the tags of the priors its configuration uses, and its
    model.yml states them: category learned+prior, never learned."""
    doc, _ = read_model_yml(folder / "model.yml")
    assert doc is not None
    run = ROOT.parent / re.search(r"pretrained/[\w.-]+", doc["model"]["repository"]).group(0)
    if (run / "pool.json").is_file():
        members = read_pool_members(json.loads((run / "pool.json").read_text()))
        found = set(pool_priors({**json.loads((run / m.path / "config.json").read_text())["config"], **m.config}
                                for m in members))
        family = "-".join(m.name.removesuffix("-inverse") for m in members)
    else:
        found = set(inverse_priors(json.loads((run / "config.json").read_text())["config"]))
        family = run.name.removesuffix("-inverse")
    assert found and doc["model"]["category"] == "learned+prior"
    assert set(doc["model"]["priors"]) == found
    assert doc["model"]["id"] == name_with_priors(family, found)
