"""Task 2 on held-out materials: perturbed queries, the particle descriptor, the
descriptor-neighbour floor, composition lookup on held-out materials, per-space-group
results, and the crystal generators' read-out, fit, save and load."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest

from c2np.baselines import CompositionLookup, DescriptorNeighbour, crystallographic_solver, predict
from c2np.carving import carve, rotate_positions
from c2np.errors import C2NPInputError
from c2np.models.inverse.choice import vote
from c2np.models.inverse.config import GenConfig
from c2np.models.inverse.examples import cell_example, training_pairs
from c2np.models.inverse.generator import CrystalGenerator
from c2np.models.inverse.io import load_generator, save_generator
from c2np.models.inverse.readout import min_pair_distance_angstrom, read_cell_to_prediction
from c2np.models.inverse.training import fit_generator, learning_rate_factor
from c2np.particle_descriptor import describe
from c2np.store import DatasetStore, build_store
from c2np.tasks import ForwardTask, InverseTask, inverse_target
from helpers import crystal_zoo, perovskite

# Lattice constants 0.6 Å apart: no training material is within the paper's 0.5 Å of another.
A_ANGSTROM = (3.4, 4.0, 4.6, 5.2, 5.8)
SPECIES_A = (19, 11, 37, 55, 3)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DatasetStore:
    cells = [perovskite(a=a, ids=f"M{i}", A=z) for i, (a, z) in enumerate(zip(A_ANGSTROM, SPECIES_A))]
    path = build_store(cells, tmp_path_factory.mktemp("h") / "strict.h5", "strict",
                       radii_angstrom=[8, 10, 12], progress=False)
    return DatasetStore.open(path)


@pytest.fixture(scope="module")
def task(store: DatasetStore) -> InverseTask:
    return InverseTask(store, "heldout", per_group=2)


def test_heldout_task_has_only_heldout_materials(store: DatasetStore, task: InverseTask) -> None:
    held = set(store.recipes.heldout_materials)
    assert held and len(held) < len(store.cells)
    res = task.evaluate({}, n_resamples=10)
    assert set(res.data["metrics"]["per_material"]) == held
    assert res.data["subset_definition"]["rotations_per_material_radius"] == 2


def test_perturbed_queries_are_deterministic_and_keep_ids(task: InverseTask) -> None:
    clean = list(task.queries())
    same = list(task.perturbed_queries())
    assert [q.sample_id for q in same] == [q.sample_id for q in clean]
    assert all(np.array_equal(a.particle.positions_angstrom, b.particle.positions_angstrom)
               for a, b in zip(clean, same))
    n1 = list(task.perturbed_queries(noise_angstrom=0.05, seed=3))
    n2 = list(task.perturbed_queries(noise_angstrom=0.05, seed=3))
    n3 = list(task.perturbed_queries(noise_angstrom=0.05, seed=4))
    d = np.concatenate([b.particle.positions_angstrom - a.particle.positions_angstrom for a, b in zip(clean, n1)])
    assert 0.045 < d.std() < 0.055
    assert all(np.array_equal(a.particle.positions_angstrom, b.particle.positions_angstrom) for a, b in zip(n1, n2))
    assert not np.array_equal(n1[0].particle.positions_angstrom, n3[0].particle.positions_angstrom)
    rc = list(task.perturbed_queries(random_centre=True, seed=1))
    assert [q.sample_id for q in rc] == [q.sample_id for q in clean]
    assert any(a.particle.n_atoms != b.particle.n_atoms for a, b in zip(clean, rc))
    with pytest.raises(C2NPInputError, match="noise_angstrom"):
        next(task.perturbed_queries(noise_angstrom=-1.0))


def test_descriptor_is_rotation_invariant_and_scaled() -> None:
    cell = perovskite(a=4.4)
    p = carve(cell, 10.0).particle
    q = np.array([0.3, -0.2, 0.5, 0.78])
    q /= np.linalg.norm(q)
    d1 = describe(p)
    d2 = describe(type(p)(p.numbers, rotate_positions(p.positions_angstrom, q)))
    assert d1.scale_angstrom == pytest.approx(2.2, abs=1e-6)          # B-H bond = a / 2
    assert list(d1.slot_numbers) == [1, 12, 19]                         # H, then B, then A
    np.testing.assert_allclose(d1.histograms, d2.histograms, atol=1e-6)
    d3 = describe(carve(perovskite(a=5.5), 10.0).particle)
    assert d3.scale_angstrom == pytest.approx(2.75, abs=1e-6)


def test_composition_lookup_scores_zero_on_heldout_materials(task: InverseTask) -> None:
    """No held-out material's composition is among the training examples, so the lookup
    answers another material's cell; 0.6 Å apart, that is never within tolerance."""
    train = {tuple(sorted(set(q.particle.numbers.tolist()))) for q, _ in task.training_examples()}
    held = {tuple(sorted(set(q.particle.numbers.tolist()))) for q in task.queries()}
    assert not train & held
    lookup = predict(task, CompositionLookup.fit(task))
    res = task.evaluate(lookup, model="composition-lookup", n_resamples=50)
    assert res.overall["joint_accuracy_paper"]["mean"] == 0.0
    solver = task.evaluate(predict(task, crystallographic_solver), n_resamples=50)
    assert solver.overall["joint_accuracy_paper"]["mean"] == 1.0


def test_descriptor_neighbour_rescales_the_lattice(task: InverseTask) -> None:
    res = task.evaluate(predict(task, DescriptorNeighbour.fit(task)), n_resamples=50)
    assert res.n_failed == 0
    assert res.overall["spacegroup_accuracy"]["mean"] == 1.0
    assert res.overall["joint_accuracy_paper"]["mean"] == 1.0           # the nn-ratio scaling
    assert res.overall["length_rmse"]["mean"] < 0.05


def test_harness_reports_per_spacegroup_and_confusion(task: InverseTask) -> None:
    preds = {q.sample_id: (4.0, 4.0, 4.0, 90, 90, 90, 225) for q in task.queries()}
    first = next(iter(preds))
    del preds[first]
    res = task.evaluate(preds, n_resamples=10)
    assert set(res.data["metrics"]["per_spacegroup"]) == {"221"}
    conf = res.data["spacegroup_confusion"]
    assert conf == {"221": {"225": res.n_samples - 1, "missing": 1}}


def test_read_out_recovers_targets_of_true_cells() -> None:
    for name in ("cubic", "orthorhombic", "trigonal"):
        cell = crystal_zoo()[name]
        ex = cell_example(describe(carve(cell, 9.0).particle), cell)
        got = read_cell_to_prediction(ex.lattice_angstrom, ex.frac, ex.descriptor.slot_numbers[ex.slots])
        target = inverse_target(cell)
        assert got is not None and got[1] == target.spacegroup, name
        np.testing.assert_allclose(got[0], target.params, atol=1e-3)
    assert read_cell_to_prediction(np.zeros((3, 3)), np.zeros((1, 3)), np.array([1])) is None


def test_longest_run_read_out_sees_through_small_errors() -> None:
    """A Pnma cell with 0.01 Å of noise: P1 at the two tightest tolerances (so the plateau
    rule answers P1), Pnma over the longest run of the fine sweep."""
    cell = crystal_zoo()["orthorhombic"]
    ex = cell_example(describe(carve(cell, 9.0).particle), cell)
    cart = ex.frac @ ex.lattice_angstrom + np.random.default_rng(0).normal(scale=0.01, size=ex.frac.shape)
    frac = cart @ np.linalg.inv(ex.lattice_angstrom)
    z = ex.descriptor.slot_numbers[ex.slots]
    plateau = read_cell_to_prediction(ex.lattice_angstrom, frac, z, rule="plateau")
    longest = read_cell_to_prediction(ex.lattice_angstrom, frac, z, rule="longest")
    assert plateau is not None and plateau[1] == 1
    assert longest is not None and longest[1] == 62
    np.testing.assert_allclose(longest[0], inverse_target(cell).params, atol=0.05)
    with pytest.raises(C2NPInputError, match="rule"):
        read_cell_to_prediction(ex.lattice_angstrom, frac, z, rule="best")


@pytest.mark.parametrize(("process", "sampler", "lattice_param"),
                         [("diffcsp", "sde", "eps"), ("diffcsp", "pc", "x0"), ("diffcsp", "ode", "x0"),
                          ("flowmm", "sde", "eps"), ("diffcsp", "pair", "x0"), ("mattergen", "pc", "x0"),
                          ("mattergen", "sde", "eps"), ("cdvae", "sde", "x0"), ("adit", "sde", "x0")])
def test_generator_fits_saves_and_loads(store: DatasetStore, tmp_path: Path, process: str, sampler: str,
                                        lattice_param: str) -> None:
    fwd = ForwardTask(store, "train", "full")
    ex = [cell_example(describe(p), q.cell) for q, p in fwd.training_examples(rotations_per_group=1)]
    pair = sampler == "pair"       # the periodic pair readout (with the default sampler)
    cfg = GenConfig(process=process, hidden=16, layers=1, n_freq=2, steps=4, train_steps=3, batch=4,
                    sampler="pc" if pair else sampler, lattice_param=lattice_param, n_samples=2,
                    pair_readout=pair)
    rows: list[dict] = []
    model = fit_generator(ex, cfg, log=rows.append)
    assert rows and np.isfinite(rows[-1]["loss"])
    assert model.compositions == [(3, 1, 1)]
    old_mask = os.umask(0o027)
    try:
        save_generator(model, tmp_path / "g", rows)
    finally:
        os.umask(old_mask)
    for name in ("model.safetensors", "config.json", "train_log.jsonl"):  # new files honour the umask
        assert (tmp_path / "g" / name).stat().st_mode & 0o777 == 0o640, name
    assert sorted(p.name for p in (tmp_path / "g").iterdir()) == ["config.json", "model.safetensors",
                                                                  "train_log.jsonl"]
    again = load_generator(tmp_path / "g")
    descs = [e.descriptor for e in ex[:3]]
    a, b = model.predict_descriptors(descs, seed=5), again.predict_descriptors(descs, seed=5)
    assert [x.as_tuple() if x else None for x in a] == [x.as_tuple() if x else None for x in b]
    with pytest.raises(C2NPInputError):
        load_generator(tmp_path / "missing")
    meta = json.loads((tmp_path / "g" / "config.json").read_text())
    other = dict(meta, config={**meta["config"], "process": "adit" if process != "adit" else "cdvae"})
    (tmp_path / "g" / "config.json").write_text(json.dumps(other))
    with pytest.raises(C2NPInputError, match="do not fit the model built from config.json"):  # another family
        load_generator(tmp_path / "g")
    meta["config"]["no_such_field"] = 1.0
    (tmp_path / "g" / "config.json").write_text(json.dumps(meta))
    with pytest.raises(C2NPInputError, match="no_such_field"):
        load_generator(tmp_path / "g")


@pytest.mark.parametrize(("pair", "process"), [(False, "diffcsp"), (True, "diffcsp"), (True, "mattergen")])
def test_denoiser_is_translation_invariant_and_permutation_equivariant(pair: bool, process: str) -> None:
    import torch

    from c2np.models.inverse.network import Denoiser

    torch.manual_seed(0)
    net = Denoiser(GenConfig(process=process, hidden=16, layers=2, n_freq=3, pair_readout=pair), n_desc=5,
                   typed=process == "mattergen")
    x_l, f = torch.randn(1, 3, 3), torch.rand(1, 5, 3)
    slot = torch.tensor([[0, 0, 0, 1, 2]])
    mask = torch.ones(1, 5, dtype=torch.bool)
    temb, cond = torch.randn(1, 16), torch.randn(1, 16)
    if process == "mattergen":          # a masked type (the absorbing state) is a token of its own
        slot = torch.tensor([[0, 0, 3, 1, 2]])
    out_l, out_f, out_t = net(x_l, f, slot, mask, temb, cond)
    assert (out_t is None) == (process != "mattergen")
    l2, f2, t2 = net(x_l, (f + torch.tensor([0.3, -0.7, 0.11])) % 1.0, slot, mask, temb, cond)
    torch.testing.assert_close(f2, out_f, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(l2, out_l, atol=1e-4, rtol=1e-4)
    perm = torch.tensor([2, 0, 1, 3, 4])
    _, f3, t3 = net(x_l, f[:, perm], slot[:, perm], mask, temb, cond)
    torch.testing.assert_close(f3, out_f[:, perm], atol=1e-5, rtol=1e-5)
    if out_t is not None:
        assert t2 is not None and t3 is not None and out_t.shape == (1, 5, 3)
        torch.testing.assert_close(t2, out_t, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(t3, out_t[:, perm], atol=1e-5, rtol=1e-5)


def test_generator_config_is_checked() -> None:
    with pytest.raises(C2NPInputError, match="process"):
        GenConfig(process="dimenet")
    with pytest.raises(C2NPInputError, match="ld_steps_per_level"):
        GenConfig(process="cdvae", ld_steps_per_level=0)
    with pytest.raises(C2NPInputError, match="noise levels"):
        GenConfig(process="cdvae", steps=1)
    with pytest.raises(C2NPInputError, match="type_known_fraction"):
        GenConfig(process="mattergen", type_known_fraction=1.5)
    with pytest.raises(C2NPInputError, match="sampler"):
        GenConfig(sampler="euler")
    with pytest.raises(C2NPInputError, match="lattice_param"):
        GenConfig(lattice_param="v")
    with pytest.raises(C2NPInputError, match="n_samples"):
        GenConfig(n_samples=0)
    with pytest.raises(C2NPInputError, match="sample_steps"):
        GenConfig(sample_steps=-1)
    with pytest.raises(C2NPInputError, match="min_pair_angstrom"):
        GenConfig(min_pair_angstrom=-0.1)
    with pytest.raises(C2NPInputError, match="mid_t_fraction"):
        GenConfig(mid_t_fraction=1.5)


def test_min_pair_distance_sees_periodic_images_and_collisions() -> None:
    lat = np.diag([4.0, 5.0, 6.0])
    assert min_pair_distance_angstrom(lat, np.array([[0.0, 0.0, 0.0]])) == pytest.approx(4.0)
    two = np.array([[0.02, 0.5, 0.5], [0.98, 0.5, 0.5]])           # 0.16 Å apart across the boundary
    assert min_pair_distance_angstrom(lat, two) == pytest.approx(0.16)
    skew = np.array([[4.0, 0.0, 0.0], [3.9, 1.0, 0.0], [0.0, 0.0, 6.0]])   # b - a is 1.0 Å long
    assert min_pair_distance_angstrom(skew, np.array([[0.1, 0.2, 0.3]])) == pytest.approx(np.hypot(0.1, 1.0))


def test_fine_sampling_grid_is_the_training_schedule_refined() -> None:
    import torch

    model = CrystalGenerator(GenConfig(steps=10), 5, [(3, 1, 1)], np.zeros(5), np.ones(5), np.zeros((3, 3)), 1.0)
    ab, sig = model.schedule(30)
    assert len(ab) == len(sig) == 31
    torch.testing.assert_close(ab[::3], model.alpha_bar, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(sig[::3], model.sigma, atol=1e-7, rtol=1e-5)
    assert bool(torch.all(sig[1:] > sig[:-1])) and bool(torch.all(ab[1:] <= ab[:-1]))


def test_validity_filter_drops_collided_cells_before_the_vote(store: DatasetStore) -> None:
    """With an impossible minimum distance every cell is invalid, so the vote falls back to
    all read cells (same answers as without the filter); a fine grid and the training
    options (balanced classes, mid-noise emphasis) train and sample."""
    import dataclasses

    fwd = ForwardTask(store, "train", "full")
    ex = [cell_example(describe(p), q.cell) for q, p in fwd.training_examples(rotations_per_group=1)]
    cfg = GenConfig(hidden=16, layers=1, n_freq=2, steps=4, train_steps=3, batch=4, sampler="pc",
                    lattice_param="x0", n_samples=2, balance_classes=True, mid_t_fraction=0.5)
    model = fit_generator(ex, cfg)
    descs = [e.descriptor for e in ex[:3]]
    base = model.predict_descriptors(descs, seed=3)
    model.cfg = dataclasses.replace(cfg, min_pair_angstrom=1e6)
    assert [x.as_tuple() if x else None for x in model.predict_descriptors(descs, seed=3)] == \
        [x.as_tuple() if x else None for x in base]
    model.cfg = dataclasses.replace(cfg, sample_steps=12)
    assert len(model.predict_descriptors(descs, seed=3)) == 3


def test_vote_takes_the_most_frequent_spacegroup_and_lattice() -> None:
    cubic = np.array([4.0, 4.0, 4.0, 90, 90, 90])
    answers = [(cubic + 0.05, 221), (cubic * 1.3, 221), (cubic - 0.05, 221), (cubic, 1), (cubic, 1)]
    got = vote(answers)
    assert got is not None and got.spacegroup == 221          # 3 x 221 against 2 x P1
    np.testing.assert_allclose(got.as_tuple()[:3], 4.0, atol=1e-9)  # median of the two close ones
    split = [(cubic, 221), (cubic * 1.3, 221), (cubic * 1.6, 221), (cubic, 2), (cubic, 2)]
    got = vote(split)                                          # the lattice cluster counts, not the group
    assert got is not None and got.spacegroup == 2
    assert vote([]) is None


def test_learning_rate_warms_up_then_decays_to_the_floor() -> None:
    f = [learning_rate_factor(p) for p in np.linspace(0, 1, 101)]
    assert f[0] < 0.01 and max(f) == pytest.approx(1.0, abs=0.01)
    peak = int(np.argmax(f))
    assert all(a >= b for a, b in zip(f[peak:], f[peak + 1:]))
    assert f[-1] == pytest.approx(0.02) and learning_rate_factor(2.0) == pytest.approx(0.02)


def test_generator_training_stops_at_the_time_budget(store: DatasetStore) -> None:
    fwd = ForwardTask(store, "train", "full")
    ex = [cell_example(describe(p), q.cell) for q, p in fwd.training_examples(rotations_per_group=1)]
    rows: list[dict] = []
    saved: list[int] = []
    cfg = GenConfig(hidden=8, layers=1, n_freq=2, steps=4, train_steps=1000, batch=2)
    fit_generator(ex, cfg, log=rows.append, time_budget_s=0.0, checkpoint=lambda m, s: saved.append(s))
    assert rows[-1]["step"] == 0 and rows[-1]["stopped"] == "time budget"
    assert saved == [0]


def test_training_pairs_hold_no_heldout_material(store: DatasetStore, task: InverseTask) -> None:
    """The generator's training pairs (clean, re-centred noisy, noisy copies) come from the
    training materials only: no pair has a held-out material's element set or target."""
    pairs = training_pairs(ForwardTask(store, "train", "full"), seed=0, noisy_copies=1)
    n_train = len(list(ForwardTask(store, "train", "full").training_examples(rotations_per_group=1)))
    assert len(pairs) == 3 * n_train
    held_species = {tuple(sorted(set(q.particle.numbers.tolist()))) for q in task.queries()}
    held_targets = {inverse_target(store.cells[m]).params[0].round(3) for m in store.recipes.heldout_materials}
    for e in pairs:
        species = tuple(sorted(int(z) for z in e.descriptor.numbers))
        assert species not in held_species
        a = read_cell_to_prediction(e.lattice_angstrom, e.frac, e.descriptor.slot_numbers[e.slots])
        assert a is not None and round(float(a[0][0]), 3) not in held_targets


def test_noisy_descriptor_neighbour_holds_noisy_copies(task: InverseTask) -> None:
    clean = DescriptorNeighbour.fit(task)
    noisy = DescriptorNeighbour.fit(task, noise_angstrom=(0.02, 0.05))
    assert len(noisy.entries) == 3 * len(clean.entries)
    assert not np.allclose(noisy.entries[1][0].histograms, noisy.entries[0][0].histograms)
    res = task.evaluate(predict(task, DescriptorNeighbour.fit_noisy(task)), n_resamples=20)
    assert res.overall["joint_accuracy_paper"]["mean"] == 1.0
    with pytest.raises(C2NPInputError, match="noise_angstrom"):
        DescriptorNeighbour.fit(task, noise_angstrom=(0.0,))


def test_flowmm_vector_fields_have_no_drift_and_anneal_slope_is_checked() -> None:
    """FlowMM's coordinate fields live on the torus modulo translations: the masked mean over
    each cell's atoms is removed (padding stays zero); a negative anti-annealing slope is bad
    input, and a positive one changes the sampled cells (same seed)."""
    import torch

    from c2np.models.inverse.flowmm import no_drift
    from c2np.models.inverse.generator import CrystalGenerator

    u = torch.randn(2, 5, 3)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    v = no_drift(u, mask)
    torch.testing.assert_close(v[0].mean(0), torch.zeros(3), atol=1e-6, rtol=0)
    torch.testing.assert_close(v[1, :3].mean(0), torch.zeros(3), atol=1e-6, rtol=0)
    assert torch.all(v[1, 3:] == 0) and not torch.allclose(v[1, :3], u[1, :3])
    with pytest.raises(C2NPInputError, match="anneal_slope"):
        GenConfig(process="flowmm", anneal_slope=-1.0)
    cfg = GenConfig(process="flowmm", hidden=16, layers=1, n_freq=2, steps=5)
    model = CrystalGenerator(cfg, 4, [(3, 1, 1)], np.zeros(4), np.ones(4), np.zeros((3, 3)), 1.0)
    feats = torch.zeros(1, 4)
    plain = model.sample(feats, [(3, 1, 1)], torch.Generator().manual_seed(0))[0][1]
    model.cfg = dataclasses.replace(cfg, anneal_slope=5.0)
    annealed = model.sample(feats, [(3, 1, 1)], torch.Generator().manual_seed(0))[0][1]
    assert not np.allclose(plain, annealed)
