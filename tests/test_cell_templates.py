"""Space-group templates of the crystal generator (c2np.models.inverse.templates): the template of
a training cell, the projection onto its symmetric subspace (perturbed cells project back to
the group; idempotent; symmetric cells are fixed points; the lattice keeps its orientation),
JSON round trip, templates from training cells only, and sampling under a template."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from c2np.carving import carve
from c2np.cells import standardize
from c2np.models.inverse.config import GenConfig
from c2np.models.inverse.examples import build_templates, cell_example
from c2np.models.inverse.generator import CrystalGenerator
from c2np.models.inverse.templates import (
    CellTemplate,
    load_templates,
    project_frac,
    project_lattice,
    save_templates,
    template_of,
)
from c2np.particle_descriptor import describe
from c2np.splits import build_recipes
from c2np.store import DatasetStore, build_store
from c2np.tasks import ForwardTask
from helpers import crystal_zoo, perovskite


@pytest.fixture(scope="module")
def pnma() -> CellTemplate:
    cell = crystal_zoo()["orthorhombic"]                    # NaMgH3, Pnma, 20-atom primitive cell
    ex = cell_example(describe(carve(cell, 9.0).particle), cell)
    return template_of(ex.lattice_angstrom, ex.frac, ex.slots, cell.material_id)


def _perturbed(t: CellTemplate, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lat = t.lattice_angstrom @ (np.eye(3) + rng.normal(scale=0.02, size=(3, 3)))
    return lat, (t.frac + rng.normal(scale=0.01, size=t.frac.shape)) % 1.0


def _group(lat: np.ndarray, frac: np.ndarray, slots: np.ndarray, symprec: float) -> int:
    return standardize((lat, frac, slots + 1), symprec_angstrom=symprec).spacegroup


def test_template_of_a_pnma_cell(pnma: CellTemplate) -> None:
    assert pnma.spacegroup == 62 and pnma.composition == (12, 4, 4)
    assert len(pnma.rotations) == 8 and pnma.perm.shape == (8, 20)
    assert all(sorted(p) == list(range(20)) for p in pnma.perm.tolist())
    assert np.all(pnma.slots[pnma.perm] == pnma.slots[None, :])     # species kept by every operation


def test_perturbed_cell_projects_back_to_the_group(pnma: CellTemplate) -> None:
    lat, frac = _perturbed(pnma, 0)
    assert _group(lat, frac, pnma.slots, 1e-4) != 62
    lat_p = project_lattice(lat, pnma.rotations)
    frac_p = project_frac(frac, pnma.rotations, pnma.translations, pnma.perm, pnma.frac)
    assert _group(lat_p, frac_p, pnma.slots, 1e-5) == 62
    d = frac_p - pnma.frac
    assert np.abs(d - np.round(d)).max() < 0.05            # close to the cell it came from


def test_projection_is_idempotent_and_fixes_symmetric_cells(pnma: CellTemplate) -> None:
    lat, frac = _perturbed(pnma, 1)
    lat_p = project_lattice(lat, pnma.rotations)
    frac_p = project_frac(frac, pnma.rotations, pnma.translations, pnma.perm, pnma.frac)
    assert np.allclose(project_lattice(lat_p, pnma.rotations), lat_p, atol=1e-10)
    again = project_frac(frac_p, pnma.rotations, pnma.translations, pnma.perm, pnma.frac)
    d = again - frac_p
    assert np.abs(d - np.round(d)).max() < 1e-10
    assert np.allclose(project_lattice(pnma.lattice_angstrom, pnma.rotations), pnma.lattice_angstrom, atol=1e-10)
    d0 = project_frac(pnma.frac, pnma.rotations, pnma.translations, pnma.perm, pnma.frac) - pnma.frac
    assert np.abs(d0 - np.round(d0)).max() < 1e-6


def test_projected_lattice_keeps_its_orientation(pnma: CellTemplate) -> None:
    lat, _ = _perturbed(pnma, 2)
    lat_p = project_lattice(lat, pnma.rotations)
    def rotation(m: np.ndarray) -> np.ndarray:              # Q of the polar decomposition L = G^(1/2) Q
        ev, v = np.linalg.eigh(m @ m.T)
        return (v / np.sqrt(ev)) @ v.T @ m

    assert np.allclose(rotation(lat_p), rotation(lat), atol=1e-10)
    assert np.abs(lat_p - lat).max() < 0.1 * np.abs(lat).max()
    g = lat_p @ lat_p.T
    assert np.allclose(g, np.diag(np.diag(g)), atol=1e-9)   # an orthorhombic metric


def test_projection_of_a_batch_is_per_cell(pnma: CellTemplate) -> None:
    cells = [_perturbed(pnma, s) for s in (3, 4)]
    lat = np.stack([c[0] for c in cells])
    frac = np.stack([c[1] for c in cells])
    both = project_frac(frac, pnma.rotations, pnma.translations, pnma.perm, pnma.frac)
    one = project_frac(frac[1], pnma.rotations, pnma.translations, pnma.perm, pnma.frac)
    assert np.allclose(both[1], one)
    assert np.allclose(project_lattice(lat, pnma.rotations)[0], project_lattice(lat[0], pnma.rotations))


def test_templates_round_trip_through_json(pnma: CellTemplate, tmp_path) -> None:
    save_templates([pnma], tmp_path)
    (back,) = load_templates(tmp_path) or []
    assert back.key == pnma.key and np.array_equal(back.perm, pnma.perm)
    assert np.allclose(back.translations, pnma.translations)
    assert load_templates(tmp_path / "nowhere") is None


@pytest.fixture(scope="module")
def strict_store(tmp_path_factory: pytest.TempPathFactory) -> DatasetStore:
    cells = [perovskite(a=3.4 + 0.6 * i, ids=f"M{i}", A=z) for i, z in enumerate((19, 11, 37, 55, 3))]
    cells.append(crystal_zoo()["orthorhombic"])
    path = build_store(cells, tmp_path_factory.mktemp("t") / "strict.h5", "strict",
                       radii_angstrom=[8, 10], progress=False)
    return DatasetStore.open(path)


def test_no_heldout_material_contributes_a_template(strict_store: DatasetStore) -> None:
    task = ForwardTask(strict_store, "train", "full")
    held = set(task.heldout_materials)
    templates = build_templates(task)
    sources = {m for t in templates for m in t.materials}
    assert held and not sources & held
    assert sources == set(strict_store.cells) - held


def test_shipped_templates_are_training_materials_of_protocol_strict() -> None:
    from pathlib import Path

    from c2np.catalog.shipped import load_catalog

    folder = Path(__file__).resolve().parents[1] / "pretrained" / "diffcsp-inverse"
    templates = load_templates(folder)
    assert templates
    cells = load_catalog()
    held = set(build_recipes(cells, "strict").heldout_materials)
    sources = {m for t in templates for m in t.materials}
    assert held and not sources & held and sources <= {c.material_id for c in cells}


def test_sampling_under_a_template_gives_its_space_group(pnma: CellTemplate) -> None:
    cell = crystal_zoo()["orthorhombic"]
    desc = describe(carve(cell, 9.0).particle)
    cfg = GenConfig(hidden=16, layers=1, steps=10, train_steps=0, z_candidates="templates", read_rule="tight")
    n = len(CrystalGenerator.features([desc])[0])
    torch.manual_seed(0)
    model = CrystalGenerator(cfg, n, [pnma.composition], np.zeros(n), np.ones(n),
                             pnma.lattice_angstrom / desc.scale_angstrom, 0.05)
    model.templates = [pnma]
    (xl, fr, sl), = model.sample(torch.as_tensor(model.features([desc])), [pnma.composition],
                                 torch.Generator().manual_seed(0), pnma)
    lat, frac, numbers = model.cell_of(xl, fr, sl, desc)
    import spglib

    sym = spglib.get_symmetry((lat, frac, numbers), symprec=1e-4)     # float32 sampling
    assert sym is not None
    for w, t in zip(pnma.rotations, pnma.translations):     # every template operation is one of the cell's
        same = np.all(sym["rotations"] == w, axis=(1, 2))
        d = sym["translations"][same] - t
        assert np.any(np.abs(d - np.round(d)).max(-1) < 1e-5)
    (cands,) = model.candidates([desc], seed=0)
    assert len(cands) <= 1 and all(c.composition == pnma.composition for c in cands)


def test_atoms_keep_their_wyckoff_positions() -> None:
    cell = perovskite()                                     # Pm-3m: every site fixed (1a, 1b, 3c/3d)
    ex = cell_example(describe(carve(cell, 8.0).particle), cell)
    t = template_of(ex.lattice_angstrom, ex.frac, ex.slots, cell.material_id)
    frac = np.random.default_rng(0).random((4, len(t.slots), 3))   # anywhere, e.g. B nearer 1b than 1a
    d = project_frac(frac, t.rotations, t.translations, t.perm, t.frac) - t.frac
    assert np.abs(d - np.round(d)).max() < 1e-9            # A and B never swap sites or collide


def test_template_read_rule_keeps_the_template_group_of_a_barely_distorted_cell(pnma: CellTemplate) -> None:
    """A Pnma cell whose tilts are a few thousandths of an Å reads as a higher group at the
    tight rule's 0.005 Å; the ``template`` rule reads the template's group on its ladder,
    and falls back to the tight read for a cell that has no such symmetry at any rung."""
    from c2np.models.inverse.readout import read_cell_to_prediction

    ideal = np.round(pnma.frac * 4) / 4                     # the cubic aristotype in the Pnma cell
    frac = ideal + 0.005 * _wrap_diff(pnma.frac, ideal)     # displacements ~0.002 Å
    assert np.abs(_wrap_diff(frac, ideal) @ pnma.lattice_angstrom).max() < 0.005
    numbers = np.array([1, 11, 12])[pnma.slots]
    tight = read_cell_to_prediction(pnma.lattice_angstrom, frac, numbers, rule="tight")
    tpl = read_cell_to_prediction(pnma.lattice_angstrom, frac, numbers, rule="template", template_spacegroup=62)
    assert tight is not None and tpl is not None
    assert tight[1] != 62 and tpl[1] == 62
    np.testing.assert_allclose(np.sort(tpl[0][:3]), np.sort(np.linalg.norm(pnma.lattice_angstrom, axis=1)),
                               atol=1e-3)
    other = read_cell_to_prediction(pnma.lattice_angstrom, frac, numbers, rule="template", template_spacegroup=167)
    assert other is not None and other[1] == tight[1]       # no R-3c at any rung: the tight read


def _wrap_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = a - b
    return d - np.round(d)


def test_refine_rank_never_worsens_the_stretched_candidate(pnma: CellTemplate) -> None:
    """rank 'refine' starts from the same (seeded) stretched cell as rank 'stretch' and only
    accepts the fit's result, so its mismatch is never larger; the cell keeps the group."""
    import dataclasses

    from c2np.models.inverse.ranking import particle_pair_profile

    cell = crystal_zoo()["orthorhombic"]
    part = carve(cell, 9.0).particle
    desc = describe(part)
    cfg = GenConfig(hidden=16, layers=1, steps=10, train_steps=0, z_candidates="templates", read_rule="template",
                    rank="stretch", refine_top=1, refine_evals=60)
    n = len(CrystalGenerator.features([desc])[0])
    torch.manual_seed(0)
    model = CrystalGenerator(cfg, n, [pnma.composition], np.zeros(n), np.ones(n),
                             pnma.lattice_angstrom / desc.scale_angstrom, 0.05)
    model.templates = [pnma]
    prof = [particle_pair_profile(part, desc)]
    (stretched,) = model.candidates([desc], seed=0, profiles=prof)
    model.cfg = dataclasses.replace(cfg, rank="refine", min_pair_angstrom=0.0)
    (refined,) = model.candidates([desc], seed=0, profiles=prof)
    assert len(stretched) == len(refined) == 1
    assert refined[0].mismatch <= stretched[0].mismatch
    assert refined[0].spacegroup == 62 and refined[0].template_spacegroup == 62 and refined[0].n_operations == 8
