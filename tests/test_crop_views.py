"""Central crops as extra conditions of a crystal generator (GenConfig.crop_radii_angstrom,
decision record 0037): the crop is a smaller sphere of the same particle, a
generator without crop radii is unchanged, and crop-conditioned cells are ranked against the
whole particle."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from c2np.carving import carve
from c2np.errors import C2NPInputError
from c2np.models.inverse.config import CROP_MIN_GAP_ANGSTROM, GenConfig
from c2np.models.inverse.examples import cell_example
from c2np.models.inverse.generator import CrystalGenerator
from c2np.models.inverse.pool import GeneratorPool, PoolRule
from c2np.models.inverse.ranking import cell_pair_profile, particle_pair_profile, profile_mismatch
from c2np.models.inverse.templates import template_of
from c2np.particle import Particle, central_crop
from c2np.particle_descriptor import describe
from helpers import crystal_zoo


def test_central_crop_is_the_inner_sphere_around_the_centroid() -> None:
    rng = np.random.default_rng(0)
    pos = rng.normal(size=(200, 3)) * 5.0 + np.array([10.0, -3.0, 2.0])   # off-origin frame
    p = Particle(rng.integers(1, 3, 200), pos)
    crop = central_crop(p, 4.0)
    centred = pos - pos.mean(axis=0)
    inside = np.linalg.norm(centred, axis=1) <= 4.0
    assert crop.n_atoms == int(inside.sum()) > 0
    np.testing.assert_allclose(crop.positions_angstrom, centred[inside])
    np.testing.assert_array_equal(crop.numbers, p.numbers[inside])
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(C2NPInputError, match="crop radius"):
            central_crop(p, bad)


def test_bad_crop_radii_are_refused() -> None:
    for bad in ((0.0,), (-2.0,), (8.0, 8.0)):
        with pytest.raises(C2NPInputError, match="crop_radii_angstrom"):
            GenConfig(crop_radii_angstrom=bad)
    assert GenConfig(crop_radii_angstrom=[10, 8]).crop_radii_angstrom == (10.0, 8.0)   # JSON list -> tuple
    for bad_noise in (-0.1, float("nan")):
        with pytest.raises(C2NPInputError, match="crop_max_noise_angstrom"):
            GenConfig(crop_radii_angstrom=(8.0,), crop_max_noise_angstrom=bad_noise)


@pytest.fixture(scope="module")
def setup():
    cell = crystal_zoo()["orthorhombic"]                    # NaMgH3, Pnma
    big = carve(cell, 11.0).particle
    small = carve(cell, 7.0).particle
    ex = cell_example(describe(big), cell)
    t = template_of(ex.lattice_angstrom, ex.frac, ex.slots, "NaMgH3")
    cfg = GenConfig(hidden=16, layers=1, steps=8, train_steps=0, z_candidates="templates", read_rule="template",
                    rank="refine", refine_top=1, refine_evals=20, refine_screen_evals=5, n_samples=2)
    n = len(CrystalGenerator.features([ex.descriptor])[0])
    torch.manual_seed(0)
    model = CrystalGenerator(cfg, n, [t.composition], np.zeros(n), np.ones(n),
                             ex.lattice_angstrom / ex.descriptor.scale_angstrom, 0.05)
    model.templates = [t]
    return model, [big, small]


def _key(cands):
    return [(c.params.tolist(), c.spacegroup, c.mismatch, c.view_radius_angstrom) for c in cands]


def test_views_are_crops_smaller_than_the_particle(setup) -> None:
    model, (big, small) = setup
    model.cfg = dataclasses.replace(model.cfg, crop_radii_angstrom=(6.0, 10.0))
    views = model.condition_views([big, small])
    radius = np.linalg.norm(big.positions_angstrom - big.positions_angstrom.mean(0), axis=1).max()
    assert 6.0 + CROP_MIN_GAP_ANGSTROM <= radius < 10.0 + CROP_MIN_GAP_ANGSTROM
    assert [r for r, _ in views[0]] == [6.0]                # 10 Å is not a crop of an 11 Å particle
    assert views[1] == []                                   # 6 Å is too close to a 7 Å particle
    np.testing.assert_allclose(views[0][0][1].vector, describe(central_crop(big, 6.0)).vector)
    model.cfg = dataclasses.replace(model.cfg, crop_radii_angstrom=())
    assert model.condition_views([big, small]) == [[], []]
    # the noise limit: a clean particle (estimate 0) keeps its crop, a noisy one has none
    noisy = Particle(big.numbers, big.positions_angstrom
                     + np.random.default_rng(1).normal(scale=0.02, size=big.positions_angstrom.shape))
    model.cfg = dataclasses.replace(model.cfg, crop_radii_angstrom=(6.0,), crop_max_noise_angstrom=0.002)
    assert [[r for r, _ in v] for v in model.condition_views([big, noisy])] == [[6.0], []]
    model.cfg = dataclasses.replace(model.cfg, crop_radii_angstrom=(), crop_max_noise_angstrom=None)


def test_crops_add_candidates_ranked_against_the_whole_particle(setup) -> None:
    model, parts = setup
    descs = [describe(p) for p in parts]
    prof = [particle_pair_profile(p, d) for p, d in zip(parts, descs)]
    base_cfg = dataclasses.replace(model.cfg, crop_radii_angstrom=())
    model.cfg = base_cfg
    plain = model.candidates(descs, seed=4, profiles=prof)
    assert _key(plain[0]) == _key(model.candidates(descs, seed=4, profiles=prof, particles=parts)[0])
    model.cfg = dataclasses.replace(base_cfg, crop_radii_angstrom=(6.0,), rank="stretch")
    with pytest.raises(C2NPInputError, match="particles"):
        model.candidates(descs, seed=4, profiles=prof)
    cropped = model.candidates(descs, seed=4, profiles=prof, particles=parts)
    model.cfg = dataclasses.replace(base_cfg, rank="stretch")
    alone = model.candidates(descs, seed=4, profiles=prof)
    # the whole-particle candidates are those without crops, bit for bit (own random stream)
    assert _key([c for c in cropped[0] if c.view_radius_angstrom == 0.0]) == _key(alone[0])
    assert _key(cropped[1]) == _key(alone[1])               # the small particle has no crop
    assert {c.view_radius_angstrom for c in cropped[0]} == {0.0, 6.0}
    assert len(alone[0]) > 0 and len(cropped[0]) == 2 * len(alone[0])   # one crop: twice the draws
    for c in cropped[0]:                                    # mismatch against the whole particle
        lat, frac, sl = c.cell
        mis = profile_mismatch(prof[0], cell_pair_profile(lat, frac, sl, descs[0].scale_angstrom))
        assert mis == pytest.approx(c.mismatch, rel=1e-6, abs=1e-9)


def test_predict_particles_and_the_pool_pass_the_particles(setup) -> None:
    model, parts = setup
    model.cfg = dataclasses.replace(model.cfg, crop_radii_angstrom=(6.0,), rank="refine")
    preds = model.predict_particles(parts, seed=2)
    assert len(preds) == 2 and all(p is not None for p in preds)
    other = CrystalGenerator(model.cfg, model.desc_mean.numel(), model.compositions, np.zeros(model.desc_mean.numel()),
                             np.ones(model.desc_mean.numel()), model.lat_mean.numpy(), float(model.lat_std))
    other.templates = model.templates
    pool = GeneratorPool([("a", model), ("b", other)], PoolRule())
    pooled = pool.candidates([describe(p) for p in parts], seed=2,
                             profiles=[particle_pair_profile(p, describe(p)) for p in parts], particles=parts)
    assert {c.view_radius_angstrom for c in pooled[0]} == {0.0, 6.0}
    assert {c.generator for c in pooled[0]} == {"a", "b"}
    assert len(pool.predict_particles(parts, seed=2)) == 2
