"""Tests of the relaxation of one composition and its checks (c2np.catalog.relaxation)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from c2np.catalog import relaxation as rx
from c2np.catalog.hydrides import composition
from c2np.catalog.prototypes import PROTOTYPES, build_prototype
from c2np.catalog.records import PrototypeResult
from c2np.cells import standardize
from c2np.errors import C2NPInputError

needs_chgnet = pytest.mark.skipif(importlib.util.find_spec("chgnet") is None, reason="needs chgnet")


# --- checks (no potential) ------------------------------------------------------------------
def test_shortest_distance_sees_periodic_images() -> None:
    lat = np.diag([3.0, 5.0, 5.0])
    assert rx.shortest_distance_angstrom(lat, np.array([[0.0, 0.0, 0.0]])) == pytest.approx(3.0)
    frac = np.array([[0.02, 0.5, 0.5], [0.98, 0.5, 0.5]])  # 0.12 Å apart across the boundary
    assert rx.shortest_distance_angstrom(lat, frac) == pytest.approx(0.12)


def test_framework_check_flags_lost_octahedra() -> None:
    from ase import Atoms

    for prototype in PROTOTYPES:
        assert rx.framework_defect(build_prototype(composition("NaMgH3"), prototype), "Mg") == ""
    # c doubled: Mg keeps only 4 H close (square-planar), the apical H is 2 x further
    squashed = Atoms("MgKH3", scaled_positions=[[0, 0, 0], [0.5, 0.5, 0.5], [0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5]],
                     cell=[4.0, 4.0, 8.0], pbc=True)
    assert "4 H neighbours" in rx.framework_defect(squashed, "Mg")


def _result(prototype: str, status: str, energy: float | None) -> PrototypeResult:
    return PrototypeResult(prototype, status, "", 5, energy, 1, True, 0.0, 0.0, None, 1.0, 2.0, 4.0, 0.0)


def test_choice_is_lowest_energy_with_ties_to_higher_symmetry() -> None:
    tie = rx.ENERGY_TIE_EV_PER_ATOM / 2
    assert rx.choose_prototype([_result("Pnma", "ok", -1.0), _result("Pm-3m", "ok", -1.0 + tie)]).prototype == "Pm-3m"
    assert rx.choose_prototype([_result("Pnma", "ok", -1.1), _result("Pm-3m", "ok", -1.0)]).prototype == "Pnma"
    # a rejected prototype never wins, however low its energy
    assert rx.choose_prototype([_result("Pnma", "rejected", -9.0), _result("R-3c", "ok", -1.0)]).prototype == "R-3c"
    assert rx.choose_prototype([_result("Pnma", "error", None)]) is None


def test_sevenn_missing_gives_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name: str, *args: object, **kwargs: object) -> object:
        if name == "sevenn" or name.startswith("sevenn."):
            raise ImportError("no sevenn")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.delitem(rx._POTENTIAL_CACHE, "sevenn", raising=False)
    with pytest.raises(C2NPInputError, match="sevenn"):
        rx.load_potential("sevenn")


def test_importing_the_catalog_loads_no_potential() -> None:
    import subprocess
    import sys

    code = ("import sys, c2np.catalog; heavy = [m for m in ('chgnet', 'sevenn', 'pymatgen', 'torch', "
            "'ase', 'spglib') if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# --- relaxation with CHGNet -----------------------------------------------------------------
@needs_chgnet
def test_loading_chgnet_keeps_stdout_clean(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """chgnet prints banners when it loads; they go to stderr, so `--json` stays JSON."""
    monkeypatch.delitem(rx._POTENTIAL_CACHE, "chgnet", raising=False)
    rx.load_potential("chgnet")
    assert capsys.readouterr().out == ""


@needs_chgnet
def test_tilted_prototype_keeps_its_space_group() -> None:
    entry, cell = rx.relax_material("NaMgH3", prototypes=("R-3c",))
    (res,) = entry.prototypes
    assert res.status == "ok", res.reason
    assert res.spacegroup_symprec_1e_3 == 167
    assert entry.spacegroup_symprec_1e_3 == 167 and cell is not None
    assert standardize(cell, symprec_angstrom=1e-3).spacegroup == 167


@needs_chgnet
def test_non_converged_relaxation_is_rejected_with_reason() -> None:
    entry, cell = rx.relax_material("KMgH3", prototypes=("Pnma",), max_steps=1)
    assert cell is None and entry.status == "failed"
    assert entry.prototypes[0].status == "rejected"
    assert "not converged" in entry.reason
