import numpy as np
import pytest

from c2np.baselines import (analytic_carve, composition_lookup, forward_queries, majority_class, memorisation,
                            random_ball, training_materials)
from c2np.cells import standardize
from c2np.store import DatasetStore, build_store


@pytest.fixture(scope="module")
def store(tmp_path_factory, ) -> DatasetStore:
    from conftest import crystal_zoo, perovskite

    zoo = crystal_zoo()
    path = build_store([perovskite(), zoo["orthorhombic"], zoo["hexagonal"]],
                       tmp_path_factory.mktemp("b") / "ds.h5", radii_angstrom=[6, 8, 9, 10, 28, 29],
                       progress=False)
    return DatasetStore.open(path)


def test_queries_never_carry_the_target(store: DatasetStore) -> None:
    q = forward_queries(store, [0])[0]
    assert set(vars(q)) == {"sample_id", "cell", "radius_angstrom", "quaternion", "centre_frac"}


def test_analytic_carve_reproduces_store(store: DatasetStore) -> None:
    rows = store.rows("ood")[:5]
    preds = analytic_carve(store, forward_queries(store, rows))
    for row in rows:
        s = store.sample(int(row))
        p = preds[s.sample_id]
        assert np.array_equal(p.numbers, s.particle.numbers)
        assert np.abs(p.positions_angstrom - s.particle.positions_angstrom).max() < 1e-5


def test_random_ball_density_composition_seeded(store: DatasetStore) -> None:
    rows = store.rows("id", material="KMgH3")[:3]
    qs = forward_queries(store, rows)
    a = random_ball(store, qs, seed=1)
    b = random_ball(store, qs, seed=1)
    c = random_ball(store, qs, seed=2)
    for q in qs:
        p = a[q.sample_id]
        assert np.array_equal(p.positions_angstrom, b[q.sample_id].positions_angstrom)
        assert not np.array_equal(p.positions_angstrom, c[q.sample_id].positions_angstrom)
        expected = q.cell.number_density_per_angstrom3 * 4 / 3 * np.pi * q.radius_angstrom ** 3
        assert abs(p.n_atoms - expected) <= 0.5
        assert np.linalg.norm(p.positions_angstrom, axis=1).max() <= q.radius_angstrom
        frac_h = np.mean(p.numbers == 1)
        assert abs(frac_h - 0.6) < 0.01


def test_memorisation_crops_larger_and_keeps_smaller(store: DatasetStore) -> None:
    # R=6 (ood): nearest train radius 8 -> cropped to 6 == exact carve
    row = int(store.rows("ood", material="KMgH3", radius=6)[3])
    q = forward_queries(store, [row])[0]
    p = memorisation(store, [q])[q.sample_id]
    assert p.n_atoms == store.particle(row).n_atoms
    # R=29 (ood): nearest train radius 28 -> returned as is, fewer atoms than the target
    row = int(store.rows("ood", material="KMgH3", radius=29)[3])
    q = forward_queries(store, [row])[0]
    p = memorisation(store, [q])[q.sample_id]
    assert p.n_atoms == store.base_particle("KMgH3", 28).n_atoms < store.particle(row).n_atoms


def test_inverse_memorisation_floors(store: DatasetStore) -> None:
    rows = list(store.rows("id")[:40])
    maj = majority_class(store, rows)
    assert len({p.spacegroup for p in maj}) == 1
    look = composition_lookup(store, rows)
    ids = store.recipes.sample_ids()
    for p, r in zip(look, rows):
        mat = ids[r].split("/")[0]
        assert p.spacegroup == standardize(store.cells[mat]).spacegroup
    assert set(training_materials(store)) == {"KMgH3", "NaMgH3", "Mg"}


def test_solver_baseline_recovers_lattice(store: DatasetStore) -> None:
    from c2np.baselines import crystallographic_solver

    rows = [int(store.rows("ood", material="KMgH3", radius=29)[2]), int(store.rows("id", material="Mg")[1])]
    preds = crystallographic_solver(store, rows)
    assert len(preds) == 2
    for p, r in zip(preds, rows):
        target = standardize(store.cells[store.sample(r).material])
        assert p.spacegroup == target.spacegroup
        assert abs(p.a - target.a_angstrom) < 0.05 and abs(p.c - target.c_angstrom) < 0.05
