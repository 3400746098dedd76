"""Baselines through the task API: task-1 baselines take ForwardQuery, task-2 baselines
InverseQuery, fitted baselines see the task's training examples only."""

import numpy as np
import pytest

from c2np.baselines import (
    CompositionLookup,
    MajorityClass,
    Memorisation,
    analytic_carve,
    crystallographic_solver,
    predict,
    random_ball,
)
from c2np.store import DatasetStore, build_store
from c2np.tasks import ForwardTask, InverseTask, inverse_target


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> DatasetStore:
    from helpers import crystal_zoo, perovskite

    zoo = crystal_zoo()
    path = build_store([perovskite(), zoo["orthorhombic"], zoo["hexagonal"]],
                       tmp_path_factory.mktemp("b") / "ds.h5", radii_angstrom=[6, 8, 9, 10, 28, 29],
                       progress=False)
    return DatasetStore.open(path)


def test_analytic_carve_reproduces_store(store: DatasetStore) -> None:
    task = ForwardTask(store, "ood")
    preds = predict(task, analytic_carve)
    for row in store.rows("ood")[:5]:
        s = store.sample(int(row))
        if s.sample_id not in preds:
            continue
        p = preds[s.sample_id]
        assert np.array_equal(p.numbers, s.particle.numbers)
        assert np.abs(p.positions_angstrom - s.particle.positions_angstrom).max() < 1e-5
    assert task.evaluate(preds, n_resamples=20).overall["f1@0.1"]["mean"] == 1.0


def test_random_ball_density_composition_seeded(store: DatasetStore) -> None:
    qs = [q for q in ForwardTask(store, "id").queries() if q.cell.material_id == "KMgH3"][:3]
    for q in qs:
        p = random_ball(q, seed=1)
        assert np.array_equal(p.positions_angstrom, random_ball(q, seed=1).positions_angstrom)
        assert not np.array_equal(p.positions_angstrom, random_ball(q, seed=2).positions_angstrom)
        expected = q.cell.number_density_per_angstrom3 * 4 / 3 * np.pi * q.radius_angstrom ** 3
        assert abs(p.n_atoms - expected) <= 0.5
        assert np.linalg.norm(p.positions_angstrom, axis=1).max() <= q.radius_angstrom
        assert abs(np.mean(p.numbers == 1) - 0.6) < 0.01


def test_memorisation_crops_larger_and_keeps_smaller(store: DatasetStore) -> None:
    task = ForwardTask(store, "ood", "full")
    mem = Memorisation.fit(task)
    assert sorted(mem.table["KMgH3"]) == [8, 9, 28]  # the train radii of this store
    by_id = {q.sample_id: q for q in task.queries()}
    # R=6 (ood): nearest train radius 8 -> cropped to 6 == exact carve
    row = int(store.rows("ood", material="KMgH3", radius=6)[3])
    p = mem(by_id[store.recipes.sample_id(row)])
    assert p.n_atoms == store.particle(row).n_atoms
    assert np.abs(np.sort(np.linalg.norm(p.positions_angstrom, axis=1))
                  - np.sort(np.linalg.norm(store.particle(row).positions_angstrom, axis=1))).max() < 1e-5
    # R=29 (ood): nearest train radius 28 -> returned as is, fewer atoms than the target
    row = int(store.rows("ood", material="KMgH3", radius=29)[3])
    p = mem(by_id[store.recipes.sample_id(row)])
    assert p.n_atoms == store.base_particle("KMgH3", 28).n_atoms < store.particle(row).n_atoms


def test_inverse_memorisation_floors(store: DatasetStore) -> None:
    task = InverseTask(store, "id")
    maj = predict(task, MajorityClass.fit(task))
    assert len({p.spacegroup for p in maj.values()}) == 1
    look = predict(task, CompositionLookup.fit(task))
    res = task.evaluate(look, n_resamples=20)
    assert res.overall["spacegroup_accuracy"]["mean"] == 1.0  # every material is in train
    mats = {t for _, t in task.training_examples(rotations_per_group=1)}
    assert {m.spacegroup for m in mats} == {inverse_target(c).spacegroup for c in store.cells.values()}


def test_solver_baseline_recovers_lattice(store: DatasetStore) -> None:
    task = InverseTask(store, "ood")
    queries = {q.sample_id: q for q in task.queries()}
    picked = [q for q in queries.values()
              if q.particle.n_atoms == store.base_particle("KMgH3", 29).n_atoms][:1]
    picked += [q for q in queries.values() if set(np.unique(q.particle.numbers)) == {12}][:1]
    assert len(picked) == 2
    for q, mat in zip(picked, ("KMgH3", "Mg")):
        p = crystallographic_solver(q)
        target = inverse_target(store.cells[mat])
        assert p is not None and p.spacegroup == target.spacegroup
        assert abs(p.parameters.a_angstrom - target.parameters.a_angstrom) < 0.05
        assert abs(p.parameters.c_angstrom - target.parameters.c_angstrom) < 0.05


def test_memorisation_has_no_answer_for_a_material_without_training_samples() -> None:
    """Under strict a held-out material has no training particle: no answer (a counted
    failure in the harness), never an exception that stops a benchmark."""
    from c2np.tasks import ForwardQuery
    from helpers import perovskite

    mem = Memorisation({"KMgH3": {}})
    q = ForwardQuery("x", perovskite(ids="NaMgH3", A=11), 8.0, np.array([0.0, 0.0, 0.0, 1.0]), np.zeros(3))
    assert mem(q) is None
