"""Readers that would hold something user data can make huge are bounded before they read
(the same kind as the solver's symmetry search): whole-text files against text_bytes,
XYZ lines, YAML aliases."""

from __future__ import annotations

from pathlib import Path

import pytest

from c2np import limits
from c2np.errors import C2NPInputError, C2NPLimitError
from c2np.evaluation.results import Results
from c2np.models.runfiles import read_json
from c2np.particle_io import MAX_XYZ_LINE_CHARS, read_particle
from c2np.predictions import read_inverse_predictions
from c2np.submissions import load_yaml, read_model_yml


def test_whole_text_readers_check_the_size_first(tmp_path: Path) -> None:
    csv = tmp_path / "p.csv"
    csv.write_text("sample_id,a,b,c,alpha,beta,gamma,spacegroup\n" + "x,1,1,1,90,90,90,1\n" * 20)
    js = tmp_path / "r.json"
    js.write_text("{" + " " * 500 + "}")
    with limits.override(text_bytes=200):
        for read in (read_inverse_predictions, Results.read, lambda p: read_json(p, what="config")):
            with pytest.raises(C2NPLimitError, match="exceeds the limit text_bytes"):
                read(csv if read is read_inverse_predictions else js)


def _yml(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "model.yml"
    p.write_text(text)
    return p


def test_read_model_yml_under_the_limit_raises_limit_error_cleanly(tmp_path: Path) -> None:
    with limits.override(text_bytes=10), pytest.raises(C2NPLimitError):
        read_model_yml(_yml(tmp_path, "model_id: x\n" * 10))


def test_yaml_aliases_are_refused(tmp_path: Path) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" \
           "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    import yaml

    with pytest.raises(yaml.YAMLError, match="aliases"):
        load_yaml(bomb)
    assert load_yaml("a: [1, 2]\n") == {"a": [1, 2]}
    doc, problems = read_model_yml(_yml(tmp_path, bomb))
    assert doc is None and any("line 2" in pr.place or "line 2" in pr.message for pr in problems)


def test_an_endless_xyz_line_is_refused_not_read_whole(tmp_path: Path) -> None:
    p = tmp_path / "long.xyz"
    p.write_text("1" * (MAX_XYZ_LINE_CHARS + 10))
    with pytest.raises(C2NPInputError, match="line 1: longer than"):
        read_particle(p)
    q = tmp_path / "longatom.xyz"
    q.write_text("2\n\nH 0 0 0\nH 0 0 " + "0" * (MAX_XYZ_LINE_CHARS + 10) + "\n")
    with pytest.raises(C2NPInputError, match="line 4: longer than"):
        read_particle(q)
