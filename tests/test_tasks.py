"""The task API (c2np.tasks): eval subsets, queries without targets, opaque task-2 ids,
training / validation examples under the protocols, and evaluate through the harness."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import numpy as np
import pytest

from c2np.baselines import analytic_carve, predict
from c2np.cells import UnitCell
from c2np.errors import C2NPInputError
from c2np.evaluation.results import Results
from c2np.lattice import LatticeParameters
from c2np.particle import Particle
from c2np.predictions import InversePrediction, write_inverse_predictions
from c2np.store import DatasetStore, build_store
from c2np.tasks import (
    EVAL_ROTATIONS_PER_GROUP,
    ForwardQuery,
    ForwardTask,
    InverseQuery,
    InverseTask,
    example_rows,
    inverse_target,
    opaque_sample_id,
    select_rows,
    training_material_rows,
)
from helpers import perovskite, two_perovskite_store

DOCS = Path(__file__).resolve().parents[1] / "docs" / "tutorials" / "benchmark-your-model.md"

README_EXAMPLE = '''\
from c2np.tasks import ForwardTask, InverseTask
task = ForwardTask.open("data.h5", split="ood", subset="eval")
preds = {q.sample_id: my_model(q) for q in task.queries()}   # q: ForwardQuery
results = task.evaluate(preds)                                 # a Results record
results.write("results.json")
'''


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_perovskite_store(tmp_path_factory.mktemp("t") / "data.h5")


@pytest.fixture(scope="module")
def store(store_path: Path) -> DatasetStore:
    return DatasetStore.open(store_path)


@pytest.fixture(scope="module")
def strict_store(tmp_path_factory: pytest.TempPathFactory) -> DatasetStore:
    cells = [perovskite(a=4.0 + 0.05 * i, ids=f"M{i}", A=[19, 11, 37, 55, 3][i]) for i in range(5)]
    path = build_store(cells, tmp_path_factory.mktemp("s") / "strict.h5", "strict",
                       radii_angstrom=[6, 13, 14], progress=False)
    return DatasetStore.open(path)


def test_the_readme_example_runs_as_written(tmp_path: Path, store_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "data.h5").symlink_to(store_path)
    monkeypatch.chdir(tmp_path)
    namespace = {"my_model": analytic_carve}
    exec(compile(README_EXAMPLE, "readme-example", "exec"), namespace)
    back = Results.read(tmp_path / "results.json")
    assert back.overall["f1@0.1"]["mean"] == 1.0 and back.n_failed == 0
    assert back.data["split"] == "ood" and back.n_samples == 2 * EVAL_ROTATIONS_PER_GROUP
    assert isinstance(namespace["results"], Results)


def test_tutorial_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert README_EXAMPLE.splitlines()[1] in text  # the tutorial shows the README's example
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for k, block in enumerate(blocks):
        exec(compile(block, f"benchmark-your-model.md block {k}", "exec"), namespace)
    assert Results.read(tmp_path / "results.json").n_failed == 0
    assert Results.read(tmp_path / "inverse.json").n_samples > 0


def test_eval_subset_is_fixed_seeded_and_excludes_identity(store: DatasetStore) -> None:
    t = store.recipes
    rows = select_rows(t, "ood", "eval")
    assert np.array_equal(rows, select_rows(t, "ood", "eval"))
    assert np.all(t.rotation_index[rows] > 0)
    for m in range(2):
        assert (t.material_index[rows] == m).sum() == EVAL_ROTATIONS_PER_GROUP  # one OOD radius
    k0 = sorted(t.rotation_index[rows[t.material_index[rows] == 0]])
    k1 = sorted(t.rotation_index[rows[t.material_index[rows] == 1]])
    assert k0 == k1  # materials sharing an orientation set get the same rotations
    assert len(select_rows(t, "ood", "full")) == int(t.mask("ood").sum())
    assert set(select_rows(t, "test", "full")) == set(np.flatnonzero(t.mask("id") | t.mask("ood")))
    with pytest.raises(C2NPInputError, match="unknown split"):
        select_rows(t, "bogus")
    with pytest.raises(C2NPInputError, match="unknown subset"):
        select_rows(t, "id", "most")
    with pytest.raises(C2NPInputError, match="held-out"):
        select_rows(t, "heldout")


def test_forward_query_holds_the_spec_inputs_only(store: DatasetStore) -> None:
    task = ForwardTask(store, "id")
    q = next(task.queries())
    assert isinstance(q, ForwardQuery)
    assert {f.name for f in dataclasses.fields(q)} == {"sample_id", "cell", "radius_angstrom",
                                                      "quaternion", "centre_frac"}
    assert isinstance(q.cell, UnitCell) and not q.quaternion.flags.writeable
    assert len(list(task.queries())) == len(task) == 16


def _reachable(obj: object, depth: int = 0) -> list[object]:
    """Every object reachable from ``obj`` through dataclass fields / attributes."""
    out = [obj]
    if depth > 4:
        return out
    children: list[object] = []
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        children = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        children = list(vars(obj).values())
    elif isinstance(obj, (list, tuple)):
        children = list(obj)
    for c in children:
        out += _reachable(c, depth + 1)
    return out


def test_inverse_query_holds_only_the_particle_and_an_opaque_id(store: DatasetStore) -> None:
    task = InverseTask(store, "id")
    queries = list(task.queries())
    assert len(queries) == len(task) == 16
    names = set(store.materials) | {"KMgH3", "NaMgH3"}
    for q in queries:
        assert isinstance(q, InverseQuery)
        assert {f.name for f in dataclasses.fields(q)} == {"sample_id", "particle"}
        assert re.fullmatch(r"s[0-9a-f]{20}", q.sample_id)
        assert {f.name for f in dataclasses.fields(q.particle)} == {"numbers", "positions_angstrom"}
        for obj in _reachable(q):
            assert not isinstance(obj, (UnitCell, LatticeParameters, DatasetStore))
            if isinstance(obj, str):
                assert not any(n in obj for n in names) and "/R" not in obj and "rot_" not in obj
        assert np.issubdtype(q.particle.numbers.dtype, np.integer)
    assert len({q.sample_id for q in queries}) == len(queries)
    # the id is opaque but stable: a pure function of the dataset and the sample
    row = int(select_rows(store.recipes, "id")[0])
    assert queries[0].sample_id == opaque_sample_id(store.fingerprint, store.recipes.sample_id(row))


def test_inverse_evaluate_under_opaque_or_store_ids(tmp_path: Path, store: DatasetStore) -> None:
    task = InverseTask(store, "id")
    rows = select_rows(store.recipes, "id")
    t = store.recipes
    perfect_store_ids = {t.sample_id(int(r)): InversePrediction(
        inverse_target(store.cells[t.materials[t.material_index[r]]]).parameters,
        inverse_target(store.cells[t.materials[t.material_index[r]]]).spacegroup) for r in rows}
    by_store = task.evaluate(perfect_store_ids, n_resamples=20)
    opaque = {opaque_sample_id(store.fingerprint, sid): p.as_tuple() for sid, p in perfect_store_ids.items()}
    by_opaque = task.evaluate(write_inverse_predictions(tmp_path / "o.csv", opaque), n_resamples=20)
    assert by_store.overall["joint_accuracy_strict"]["mean"] == 1.0
    assert by_opaque.data["metrics"] == by_store.data["metrics"]
    assert by_opaque.data["samples"]["sample_id"][0] == t.sample_id(int(rows[0]))  # results name samples
    one = next(iter(perfect_store_ids))
    both = {one: perfect_store_ids[one], opaque_sample_id(store.fingerprint, one): perfect_store_ids[one]}
    with pytest.raises(C2NPInputError, match="duplicate sample id"):
        task.evaluate(both)
    with pytest.raises(C2NPInputError, match="unknown sample id"):
        task.evaluate({"s" + "0" * 20: (4, 4, 4, 90, 90, 90, 221)})
    with pytest.raises(C2NPInputError, match="needs numeric"):
        task.evaluate({one: (4, 4, 4)})


def test_open_checks_the_protocol(store_path: Path) -> None:
    assert ForwardTask.open(store_path, split="id", protocol="paper").protocol == "paper"
    with pytest.raises(C2NPInputError, match="store has protocol 'paper', expected 'strict'"):
        InverseTask.open(store_path, split="id", protocol="strict")
    with pytest.raises(C2NPInputError, match="no samples"):
        ForwardTask.open(store_path, split="val", subset="eval")  # radii 6 and 10: no val rows


def test_training_examples_paper(store: DatasetStore) -> None:
    task = InverseTask(store, "id")
    with pytest.raises(C2NPInputError, match="no 'train' samples"):
        list(task.training_examples())  # radii 6 and 10 are OOD and ID: nothing to learn from


def test_training_examples_strict_exclude_heldout_and_val_radii(strict_store: DatasetStore) -> None:
    t = strict_store.recipes
    held = set(t.heldout_materials)
    assert held  # the strict protocol holds out materials
    fwd = ForwardTask(strict_store, "ood")
    seen_mats, seen_radii = set(), set()
    for q, target in fwd.training_examples(rotations_per_group=2):
        assert isinstance(target, Particle) and target.n_atoms > 0
        seen_mats.add(q.cell.material_id)
        seen_radii.add(q.radius_angstrom)
    assert seen_mats == set(t.materials) - held and seen_radii == {14.0}  # 13 Å is a val radius
    val = {q.radius_angstrom for q, _ in fwd.validation_examples(rotations_per_group=1)}
    assert val == {13.0}
    rows = example_rows(t, "train")
    assert not np.isin(t.material_index[rows], [t.materials.index(m) for m in held]).any()
    assert len(example_rows(t, "train", rotations_per_group=1)) == len(seen_mats)  # one per (material, R)
    inv = InverseTask(strict_store, "heldout")
    targets = [tg for _, tg in inv.training_examples(rotations_per_group=1)]
    assert len(targets) == len(set(t.materials) - held)
    assert len(inv) == 3 * EVAL_ROTATIONS_PER_GROUP  # the held-out material at its 3 radii


def test_training_material_rows_are_every_radius_of_the_training_materials_only(
        strict_store: DatasetStore, store: DatasetStore) -> None:
    t = strict_store.recipes
    held = [t.materials.index(m) for m in t.heldout_materials]
    rows = training_material_rows(t, per_group=2)
    assert np.all(np.diff(rows) > 0) and not np.isin(t.material_index[rows], held).any()
    assert set(t.material_index[rows]) == set(range(len(t.materials))) - set(held)
    assert set(t.radius_angstrom[rows]) == {6, 13, 14}          # ood, val and train radii
    assert not np.any(t.rotation_index[rows] == 0)               # never the fitted rot_0
    fitted = example_rows(t, "train", rotations_per_group=1)
    assert not np.isin(rows, fitted).any()
    n_groups = len({(int(m), int(r)) for m, r in zip(t.material_index[rows], t.radius_angstrom[rows])})
    assert len(rows) == 2 * n_groups
    same = np.concatenate([select_rows(t, s, per_group=2) for s in ("train", "val", "id", "ood")])
    assert set(rows) == set(same[~np.isin(t.material_index[same], held)])
    with pytest.raises(C2NPInputError, match="no held-out materials"):
        training_material_rows(store.recipes)


def test_inverse_target_is_the_standardized_cell(kmgh3: UnitCell) -> None:
    tg = inverse_target(kmgh3)
    assert tg.spacegroup == 221 and tg.parameters.a_angstrom == pytest.approx(4.02)
    assert inverse_target(kmgh3) is tg  # cached per cell content
    assert tg.to_dict() == {"a_angstrom": tg.parameters.a_angstrom, "b_angstrom": tg.parameters.b_angstrom,
                            "c_angstrom": tg.parameters.c_angstrom, "alpha_deg": 90.0, "beta_deg": 90.0,
                            "gamma_deg": 90.0, "spacegroup": 221}


def test_forward_evaluate_matches_file_and_memory(tmp_path: Path, store: DatasetStore) -> None:
    from c2np.predictions import write_forward_predictions

    task = ForwardTask(store, "id")
    preds = predict(task, analytic_carve)
    a = task.evaluate(preds, n_resamples=20)
    b = task.evaluate(write_forward_predictions(tmp_path / "p.extxyz", preds), n_resamples=20)
    assert a.overall["f1@0.1"] == b.overall["f1@0.1"] and a.data["samples"]["ok"] == b.data["samples"]["ok"]
    assert b.overall["chamfer"]["mean"] < 1e-5  # float32 store, 8-decimal file
    assert a.data["predictions"]["format"] == "in-memory"
    assert os.path.basename(b.data["predictions"]["path"]) == "p.extxyz"
