"""What a model knows: categories, named priors, the priors read from shipped configurations,
and the leaderboard's "best learned model", which ranks category ``learned`` only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from c2np.categories import CATEGORIES, PRIORS, check_category, name_with_priors
from c2np.errors import C2NPInputError
from c2np.models.priors import category_of_priors, forward_priors, inverse_priors
from c2np.report import LeaderboardRow, write_leaderboard

ROOT = Path(__file__).resolve().parents[1]


def test_category_rules() -> None:
    assert CATEGORIES == ("learned", "learned+prior", "analytic")
    c = check_category("learned+prior", ["sphere-boundary", "lattice-sites"])
    assert c.priors == ("lattice-sites", "sphere-boundary")  # in PRIORS order
    assert c.label == "learned+prior (lattice-sites, sphere-boundary)" and not c.is_learned
    assert check_category("learned").is_learned and check_category("analytic").label == "analytic"
    for category, priors, words in (("learned+prior", [], "needs the list"), ("learned", ["carve"], "takes no"),
                                    ("analytic", ["carve"], "takes no"), ("learned+prior", ["x"], "unknown prior"),
                                    ("learned+prior", ["carve", "carve"], "twice"), ("neural", [], "not one of"),
                                    ("learned+prior", "carve", "must be a list")):
        with pytest.raises(C2NPInputError, match=words):
            check_category(category, priors, where="m.yml")


def test_names_carry_the_prior_tags() -> None:
    assert name_with_priors("mattergen", ["site-snapping", "lattice-sites", "sphere-boundary"]) == \
        "mattergen+sites+sphere+snap"
    assert name_with_priors("diffcsp", []) == "diffcsp"
    assert category_of_priors(()).category == "learned"
    assert category_of_priors(("carve",)).category == "learned+prior"


@pytest.mark.parametrize("run", sorted((ROOT / "pretrained").glob("*-forward")), ids=lambda p: p.name)
def test_every_shipped_forward_model_has_priors(run: Path) -> None:
    """The shipped task-1 families are site-assignment variants: none may be called learned."""
    cfg = json.loads((run / "config.json").read_text())
    priors = forward_priors(cfg["model"], cfg["config"])
    assert {"lattice-sites", "sphere-boundary"} <= set(priors) and set(priors) <= set(PRIORS)
    if cfg["model"] == "mattergen":
        assert "site-snapping" in priors  # its sampler keeps only atoms near a site, retyped by it


def test_faithful_forward_config_has_no_prior() -> None:
    from c2np.models.config import get_config

    faithful = get_config("small", site_features=False, confine_margin=-1.0, sample_site_tol_angstrom=0.0)
    for family in ("cdvae", "diffcsp", "flowmm", "mattergen", "adit"):
        assert forward_priors(family, faithful.to_dict()) == ()
    assert forward_priors("sitescore", faithful.to_dict()) == ("carve",)


def test_inverse_priors_follow_the_config() -> None:
    assert inverse_priors({"z_candidates": "head", "read_rule": "plateau", "rank": "vote"}) == ()
    assert inverse_priors({"z_candidates": "templates", "rank": "refine", "crop_radii_angstrom": [8.0]}) == \
        ("spacegroup-templates", "profile-ranking", "profile-refinement", "central-crop")


def _row(model: str, value: float, category: str, priors: tuple[str, ...] = ()) -> LeaderboardRow:
    return LeaderboardRow(model=model, task="forward", split="id", protocol="paper", metrics={"f1@0.1": value},
                          higher_is_better={"f1@0.1": True}, n_samples=8, n_failed=0,
                          ci95={"f1@0.1": [value - 0.01, value + 0.01]}, category=category, priors=priors)


def test_best_learned_model_ranks_learned_rows_only(tmp_path: Path) -> None:
    rows = [_row("analytic-carve", 1.0, "analytic"), _row("mattergen+sites+sphere+snap", 0.98, "learned+prior",
                                                           ("lattice-sites", "sphere-boundary", "site-snapping")),
            _row("diffcsp", 0.12, "learned"), _row("flowmm", 0.08, "learned"), _row("mine", 0.99, "unstated")]
    md = write_leaderboard(rows, tmp_path, headline={"forward": ["f1@0.1"]})["markdown"].read_text()
    assert "| mattergen+sites+sphere+snap | learned+prior (lattice-sites, sphere-boundary, site-snapping) |" in md
    assert "best learned model on id: **diffcsp**, f1@0.1 0.120 [0.11, 0.13]" in md
    md = write_leaderboard(rows[:2], tmp_path, headline={"forward": ["f1@0.1"]})["markdown"].read_text()
    assert "best learned model on id: none" in md
