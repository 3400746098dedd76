"""The sealed test: held-out materials split into development (``heldout-dev``) and sealed test
(``heldout-test``) materials; the materials development has looked at are development
materials; selection scripts refuse the sealed rows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from c2np.catalog.shipped import load_catalog
from c2np.cli import build_app
from c2np.errors import C2NPInputError, C2NPNoAnswerError
from c2np.sealed import development_materials, heldout_parts, require_development_split
from c2np.store import DatasetStore, build_store
from c2np.tasks import select_rows

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def catalog_strict(tmp_path_factory: pytest.TempPathFactory) -> DatasetStore:
    """Protocol strict on the shipped catalog (one radius: the held-out choice depends on the cells only)."""
    path = build_store(load_catalog(), tmp_path_factory.mktemp("sealed") / "strict.h5", "strict",
                       radii_angstrom=[6], progress=False)
    return DatasetStore.open(path)


def test_every_held_out_catalog_material_is_a_development_material(catalog_strict: DatasetStore) -> None:
    held = catalog_strict.recipes.heldout_materials
    assert len(held) == 17 and set(held) == development_materials()
    parts = heldout_parts(held)
    assert parts.dev == tuple(sorted(held)) and parts.test == ()
    rec = catalog_strict.recipes
    assert np.array_equal(select_rows(rec, "heldout-dev"), select_rows(rec, "heldout"))
    with pytest.raises(C2NPNoAnswerError, match="no sealed test rows exist"):
        select_rows(rec, "heldout-test")


def test_fresh_held_out_materials_split_half_and_half_by_a_seeded_rule() -> None:
    names = [f"X{i}" for i in range(9)]
    parts = heldout_parts(names + ["KBaH3"])
    assert "KBaH3" in parts.dev and len(parts.test) == 4 and len(parts.dev) == 6  # 1 seen + 5 of 9 fresh
    assert heldout_parts(["X0"]).dev == ("X0",)  # a lone fresh material is development
    assert set(parts.dev) | set(parts.test) == set(names) | {"KBaH3"} and not set(parts.dev) & set(parts.test)
    assert heldout_parts(list(reversed(names)) + ["KBaH3"]) == parts  # order-free, deterministic
    assert heldout_parts(names + ["KBaH3"], seed=12) != parts  # the seed matters
    assert heldout_parts(names, exposed=frozenset(names)).test == ()


def test_dev_and_test_rows_partition_the_held_out_rows(tmp_path: Path) -> None:
    from helpers import perovskite

    cells = [perovskite(a=4.0 + 0.05 * i, ids=f"Q{i}", A=[19, 11, 37, 55, 3, 19, 11, 37, 55, 3][i]) for i in range(10)]
    rec = DatasetStore.open(build_store(cells, tmp_path / "s.h5", "strict", radii_angstrom=[6],
                                        progress=False)).recipes
    dev, test, both = (select_rows(rec, s, "full") for s in ("heldout-dev", "heldout-test", "heldout"))
    assert len(dev) and len(test) and np.array_equal(np.sort(np.r_[dev, test]), both)
    sealed = {rec.materials[i] for i in rec.material_index[test]}
    assert sealed == set(heldout_parts(rec.heldout_materials).test)


def test_selection_refuses_the_sealed_test() -> None:
    assert require_development_split("heldout-dev") == "heldout-dev"
    for split in ("heldout-test", "heldout"):
        with pytest.raises(C2NPInputError, match="sealed test"):
            require_development_split(split)


def test_heldout_reproduction_script_refuses_the_sealed_split(catalog_strict: DatasetStore) -> None:
    script = ROOT / "reproduce" / "inverse-results" / "heldout.py"
    r = subprocess.run([sys.executable, str(script), str(catalog_strict.path), "--split", "heldout-test"],
                       capture_output=True, text=True, timeout=300, cwd=script.parent,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert r.returncode == 2 and "sealed test" in r.stderr and "Traceback" not in r.stderr


def test_cli_evaluate_on_an_empty_sealed_split_says_so(catalog_strict: DatasetStore, tmp_path: Path) -> None:
    preds = tmp_path / "p.csv"
    preds.write_text("sample_id,a,b,c,alpha,beta,gamma,spacegroup\n")
    r = CliRunner().invoke(build_app(), ["evaluate", "--store", str(catalog_strict.path), "--task", "inverse",
                                         "--predictions", str(preds), "--split", "heldout-test",
                                         "--out", str(tmp_path / "r.json")])
    assert r.exit_code == 1 and "no sealed test rows" in r.output and "Traceback" not in r.output
