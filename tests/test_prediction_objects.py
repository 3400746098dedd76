"""Predictions as objects: ase.Atoms and pymatgen Molecule / Structure given to
``ForwardTask.evaluate`` / ``InverseTask.evaluate`` score as the equivalent Particle or
lattice + space group; anything else is one clear error naming the sample id."""

from __future__ import annotations

import numpy as np
import pytest

from c2np.baselines import analytic_carve, predict
from c2np.errors import C2NPInputError
from c2np.particle import Particle
from c2np.store import DatasetStore
from c2np.tasks import ForwardTask, InverseTask, select_rows
from helpers import two_perovskite_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DatasetStore:
    return DatasetStore.open(two_perovskite_store(tmp_path_factory.mktemp("po") / "data.h5"))


def _metrics(results) -> dict:  # type: ignore[no-untyped-def]
    return {k: v["mean"] for k, v in results.overall.items()}


def test_forward_accepts_atoms_molecule_and_structure(store: DatasetStore) -> None:
    pytest.importorskip("pymatgen")
    from pymatgen.core import Lattice, Molecule, Structure

    task = ForwardTask(store, "ood")
    parts = predict(task, analytic_carve)
    ref = _metrics(task.evaluate(parts, n_resamples=20))
    assert ref["f1@0.1"] == 1.0
    # a slightly wrong particle, so the forms must agree on something other than perfection
    shifted = {sid: Particle(p.numbers, p.positions_angstrom + 0.05) for sid, p in parts.items()}
    want = _metrics(task.evaluate(shifted, n_resamples=20))
    as_atoms = {sid: p.to_ase() for sid, p in shifted.items()}
    as_mol = {sid: Molecule(p.numbers.tolist(), p.positions_angstrom) for sid, p in shifted.items()}
    as_struct = {sid: Structure(Lattice.cubic(200.0), p.numbers.tolist(), p.positions_angstrom,
                                coords_are_cartesian=True) for sid, p in shifted.items()}
    for form in (as_atoms, as_mol, as_struct):
        got = _metrics(task.evaluate(form, n_resamples=20))
        assert got.keys() == want.keys()
        assert all(np.isclose(got[k], want[k], atol=1e-9) or (np.isnan(got[k]) and np.isnan(want[k]))
                   for k in want)
    sid = next(iter(parts))
    with pytest.raises(C2NPInputError, match=f"entry '{sid}'.*must be a c2np Particle.*got builtins.dict"):
        task.evaluate({**parts, sid: {"numbers": [1]}}, n_resamples=20)


def test_inverse_accepts_predicted_crystals(store: DatasetStore) -> None:
    pytest.importorskip("pymatgen")
    from pymatgen.core import Molecule, Structure

    task = InverseTask(store, "ood")
    t = store.recipes
    rows = select_rows(t, "ood", "eval")
    cells = {t.sample_id(int(r)): store.cells[t.materials[int(t.material_index[r])]] for r in rows}
    as_atoms = {sid: c.to_ase() for sid, c in cells.items()}
    res = task.evaluate(as_atoms, n_resamples=20)
    assert res.n_failed == 0 and res.overall["joint_accuracy_strict"]["mean"] == 1.0
    proper = {sid: Structure(c.lattice_angstrom, c.numbers.tolist(), c.frac_coords) for sid, c in cells.items()}
    res = task.evaluate(proper, n_resamples=20)
    assert res.n_failed == 0 and res.overall["joint_accuracy_strict"]["mean"] == 1.0
    sid = next(iter(cells))
    mol = Molecule(["H", "H"], [[0, 0, 0], [0, 0, 0.74]])
    with pytest.raises(C2NPInputError, match=f"entry '{sid}'.*needs a lattice.*Molecule"):
        task.evaluate({**proper, sid: mol}, n_resamples=20)
    with pytest.raises(C2NPInputError, match=f"entry '{sid}'.*needs a lattice.*no cell"):
        task.evaluate({**proper, sid: Particle([1], [[0, 0, 0]]).to_ase()}, n_resamples=20)
    with pytest.raises(C2NPInputError, match=f"entry '{sid}'"):
        task.evaluate({**proper, sid: object()}, n_resamples=20)
