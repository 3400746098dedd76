"""benchmarks/margin_select.py: the selection rule for the generator's symmetric margins
(docs/decisions/0035-inverse-margin-from-noise.md)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "margin_select", Path(__file__).resolve().parents[1] / "benchmarks" / "margin_select.py")
assert _SPEC is not None and _SPEC.loader is not None
sel = importlib.util.module_from_spec(_SPEC)
sys.modules["margin_select"] = sel
_SPEC.loader.exec_module(sel)


def _write(root: Path, tag: str, means: dict[str, float]) -> None:
    (root / tag).mkdir(parents=True)
    for v, m in means.items():
        doc = {"metrics": {"overall": {"joint_accuracy_paper": {"mean": m, "ci95": [m - 0.05, m + 0.05]}}}}
        (root / tag / f"diffcsp-inverse__{v}.json").write_text(json.dumps(doc))


def test_the_best_mean_wins_and_ties_go_to_the_smaller_relative_then_absolute_margin(tmp_path, capsys) -> None:
    _write(tmp_path, "margin0.1", {"clean": 0.92, "noise0.05": 0.40})           # mean 0.66
    _write(tmp_path, "margin0.01_rel1.0", {"clean": 0.96, "noise0.05": 0.90})   # mean 0.93
    _write(tmp_path, "margin0.05_rel0.5", {"clean": 0.93, "noise0.05": 0.93})   # mean 0.93: tie, smaller rel
    _write(tmp_path, "margin0.0_rel0.5", {"clean": 0.90, "noise0.05": 0.9604})  # 0.9302 -> 0.930: tie, smaller m
    (tmp_path / "notes").mkdir()                                                 # not a margin folder: ignored
    _write(tmp_path, "margin0.0_noise2.0", {"clean": 0.90, "noise0.05": 0.96})    # 0.930, rel 0: wins the tie
    _write(tmp_path, "margin0.0_noise1.0", {"clean": 0.85, "noise0.05": 0.90})
    grid = sel.read_grid(tmp_path, ["clean", "noise0.05"])
    assert set(grid) == {(0.1, 0.0, 0.0), (0.01, 1.0, 0.0), (0.05, 0.5, 0.0), (0.0, 0.5, 0.0), (0.0, 0.0, 2.0),
                         (0.0, 0.0, 1.0)}
    assert sel.select(grid) == (0.0, 0.0, 2.0)
    del grid[(0.0, 0.0, 2.0)]
    assert sel.select(grid) == (0.0, 0.5, 0.0)
    assert sel.main([str(tmp_path), "--variants", "clean,noise0.05"]) == 0
    assert ("selected: symmetric_margin 0, symmetric_margin_rel 0, symmetric_margin_per_angstrom 2"
            in capsys.readouterr().out)


def test_a_missing_variant_or_an_empty_folder_is_exit_2(tmp_path, capsys) -> None:
    assert sel.main([str(tmp_path)]) == 2
    assert "no margin<m>[_rel<r>] folders" in capsys.readouterr().err
    _write(tmp_path, "margin0.1", {"clean": 0.9})
    assert sel.main([str(tmp_path), "--variants", "clean,noise0.02"]) == 2
    assert "diffcsp-inverse__noise0.02.json: missing" in capsys.readouterr().err
    assert sel.main([str(tmp_path / "absent")]) == 2
