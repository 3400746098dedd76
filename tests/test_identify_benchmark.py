"""c2np.recognition, the scoring behind benchmarks/identify.py: a refusal or crash is a miss,
calibration, own-lattice fit and the generated page (no corpus is built here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from c2np import recognition as bench


def _sample(group: str = "particle", expected: int | None = 225, variant: str = "relaxed",
            radius: float = 12.0) -> dict[str, Any]:
    return {"id": f"{group}-{variant}-{radius}", "group": group, "material": "Cu", "variant": variant,
            "radius_angstrom": radius, "file": "x.extxyz", "n_atoms": 100, "expected_spacegroup": expected,
            "own_abc_angstrom": [3.6, 3.6, 3.6] if expected else None,
            "ptm_structure": "FCC" if group == "particle" else None, "ptm_ordering": None}


def _outcome(kind: str = "answer", sg: int | None = 225, conf: float | None = 1.0,
             reason: str = "") -> dict[str, Any]:
    answered = kind == "answer"
    return {"answered": answered, "spacegroup": sg if answered else None, "confidence": conf if answered else None,
            "abc_angstrom": [3.61, 3.61, 3.61] if answered else None, "seconds": 0.1, "kind": kind,
            "reason": reason, "extra": {}, "ptm": None}


def _row(sample: dict[str, Any], outcome: dict[str, Any]) -> dict[str, Any]:
    return {"sample": sample, "outcome": outcome, "right": bench.identify_right(sample, outcome),
            "ptm_right": bench.ptm_right(sample, outcome["ptm"]), "lattice_error": bench.lattice_error(sample, outcome)}


def test_refusals_and_crashes_are_misses_clusters_want_no_answer() -> None:
    particle, cluster = _sample(), _sample("cluster", None, "icosahedron")
    assert bench.identify_right(particle, _outcome())
    assert not bench.identify_right(particle, _outcome(sg=221))
    assert not bench.identify_right(particle, _outcome("no answer", reason="no lattice found"))
    assert not bench.identify_right(particle, _outcome("crash", reason="ValueError: x"))
    assert bench.identify_right(cluster, _outcome("no answer"))
    assert not bench.identify_right(cluster, _outcome(sg=225))
    assert not bench.identify_right(cluster, _outcome("crash"))
    rows = [_row(particle, _outcome()), _row(particle, _outcome("crash", reason="ValueError: boom")),
            _row(particle, _outcome("no answer", reason="a.extxyz: solver input: no lattice found (no three 12)"))]
    s = bench.summarize(rows)
    assert s["totals"]["particle"] == {"n": 3, "right": 1, "crashes": 1}
    assert s["recognition"]["relaxed"]["12"]["n"] == 3 and s["recognition"]["relaxed"]["12"]["identify"] == 1
    assert s["refusals"] == {"crash: ValueError": 1, "no answer: no lattice found": 1}


def test_calibration_table_and_ece() -> None:
    p = _sample()
    rows = ([_row(p, _outcome(conf=0.95))] * 9 + [_row(p, _outcome(sg=1, conf=0.95))]  # 90 % right at 0.95
            + [_row(p, _outcome(conf=0.35))] + [_row(p, _outcome(sg=1, conf=0.35))] * 3  # 25 % right at 0.35
            + [_row(p, _outcome("no answer"))] * 5)  # refusals carry no confidence
    cal = bench.calibration(rows)
    assert cal["n_answered"] == 14
    top = cal["bins"][9]
    assert top["n"] == 10 and top["accuracy"] == pytest.approx(0.9) and top["confidence"] == pytest.approx(0.95)
    assert cal["bins"][3]["n"] == 4 and cal["bins"][3]["accuracy"] == pytest.approx(0.25)
    assert cal["ece"] == pytest.approx((10 * 0.05 + 4 * 0.10) / 14)
    wrong = bench.summarize(rows)["wrong_high_confidence"]
    assert len(wrong) == 1 and wrong[0]["found"] == 1


def test_own_lattice_of_a_strained_particle() -> None:
    rng = np.random.default_rng(0)
    ideal = rng.uniform(-10, 10, (300, 3))
    strain = np.diag([1.01, 0.99, 1.02])
    rot = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    lattice = np.eye(3) * 3.6
    pos = ideal @ strain @ rot + 5.0 + rng.normal(0, 0.01, ideal.shape)
    rows = bench.own_lattice(ideal, pos, lattice)
    assert bench.standard_abc("Cu", rows) == pytest.approx(sorted([3.6 * 1.01, 3.6 * 0.99, 3.6 * 1.02]), rel=1e-3)
    abc = bench.standard_abc("CuAu", np.diag([3.96, 3.96, 3.68]))  # P4/mmm: a / sqrt 2
    assert abc == pytest.approx(sorted([3.96 / np.sqrt(2), 3.96 / np.sqrt(2), 3.68]))


def test_ptm_rules() -> None:
    fcc = {"structure": "FCC", "ordering": "L12_A", "seconds": 0.0}
    alloy = {**_sample(expected=221), "ptm_ordering": "L12"}
    assert bench.ptm_right(alloy, fcc)
    assert not bench.ptm_right({**alloy, "ptm_ordering": "L10"}, fcc)
    assert not bench.ptm_right(_sample(), {**fcc, "structure": "HCP"})
    assert bench.ptm_right(_sample("cluster", None, "icosahedron"), {**fcc, "structure": "ICO"})
    assert not bench.ptm_right(_sample("cluster", None, "decahedron"), fcc)
    assert bench.ptm_right(_sample("crystal"), fcc) is None
    assert bench.ptm_right(_sample(), None) is None


def test_page_and_plot_are_generated_from_the_results(tmp_path: Path) -> None:
    rows = [_row(_sample(), _outcome()), _row(_sample("cluster", None, "amorphous"), _outcome("no answer"))]
    results = {"schema": bench.SCHEMA, "c2np_version": "0", "quick": True, "ptm": None, "results_file": "r.json",
               "summary": bench.summarize(rows), "rows": rows}
    page = tmp_path / "identify.md"
    bench.write_page(results, page)
    text = page.read_text()
    assert "generated by benchmarks/identify.py" in text
    assert "| relaxed | 1/1 (100%)" in text and "| amorphous | 1/1 (100%)" in text
    assert (tmp_path / "identify_calibration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| non-crystalline clusters: space groups given | 0 | 0 | yes |" in text


def test_targets_report_misses() -> None:
    rows = [_row(_sample(variant="md300"), _outcome("no answer")), _row(_sample(variant="md300"), _outcome()),
            _row(_sample("cluster", None, "decahedron"), _outcome(sg=225, conf=0.95))]
    rows[0]["ptm_right"] = rows[1]["ptm_right"] = True
    got = {t["target"]: t for t in bench.summarize(rows)["targets"]}
    md = got["particles R >= 12 Å, md300: right space group"]
    assert md["value"] == 0.5 and not md["met"]
    assert not got["particles R >= 12 Å, md300: at least PTM's rate (1.00)"]["met"]
    assert got["non-crystalline clusters: space groups given"]["value"] == 1
    assert got["wrong answers at confidence >= 0.9"]["value"] == 1
