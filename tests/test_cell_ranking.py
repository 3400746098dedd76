"""Analysis by synthesis for the task-2 crystal generators: the pair profiles of a particle
and of a generated cell, their mismatch, and the candidate choice (c2np.models.inverse.ranking,
choose_candidate / candidates)."""

from __future__ import annotations

import numpy as np
import pytest

from c2np.carving import carve
from c2np.errors import C2NPInputError
from c2np.models.inverse.choice import Candidate, choose_candidate, vote
from c2np.models.inverse.config import GenConfig
from c2np.models.inverse.examples import cell_example
from c2np.models.inverse.generator import CrystalGenerator
from c2np.models.inverse.ranking import cell_pair_profile, particle_pair_profile, profile_mismatch
from c2np.models.inverse.training import fit_generator
from c2np.particle_descriptor import describe
from c2np.store import DatasetStore, build_store
from c2np.tasks import ForwardTask
from helpers import perovskite


@pytest.fixture(scope="module")
def cubic():
    cell = perovskite(a=4.0)
    part = carve(cell, 14.0).particle
    desc = describe(part)
    return part, desc, cell_example(desc, cell)


def test_true_cell_matches_its_particle_better_than_wrong_cells(cubic) -> None:
    part, desc, ex = cubic
    s = desc.scale_angstrom
    pp = particle_pair_profile(part, desc)
    good = profile_mismatch(pp, cell_pair_profile(ex.lattice_angstrom, ex.frac, ex.slots, s))
    h_on_h = ex.frac.copy()
    h_on_h[0] = h_on_h[1]                                     # two H on one site
    stretched = ex.lattice_angstrom * np.array([[2.0], [1.0], [1.0]])   # the same atoms in twice the volume
    off = ex.frac.copy()
    off[ex.slots == 0] += 0.08                                # H off their sites
    wrong = [profile_mismatch(pp, cell_pair_profile(ex.lattice_angstrom, h_on_h, ex.slots, s)),
             profile_mismatch(pp, cell_pair_profile(stretched, ex.frac * [0.5, 1, 1], ex.slots, s)),
             profile_mismatch(pp, cell_pair_profile(ex.lattice_angstrom, off, ex.slots, s))]
    assert good < 0.1
    assert min(wrong) > 2 * good


def test_cell_profile_is_a_property_of_the_crystal_not_of_the_cell(cubic) -> None:
    """A supercell, another basis of the same lattice and a translation give the same profile."""
    _, desc, ex = cubic
    s = desc.scale_angstrom
    base = cell_pair_profile(ex.lattice_angstrom, ex.frac, ex.slots, s)
    assert base is not None
    sup_f = np.concatenate([(ex.frac + [k, 0, 0]) * [0.5, 1, 1] for k in (0, 1)])
    sup = cell_pair_profile(ex.lattice_angstrom * np.array([[2.0], [1.0], [1.0]]), sup_f,
                            np.concatenate([ex.slots, ex.slots]), s)
    m = np.array([[1, 1, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float64)         # unimodular: a' = a + b
    other = cell_pair_profile(m @ ex.lattice_angstrom, ex.frac @ np.linalg.inv(m), ex.slots, s)
    moved = cell_pair_profile(ex.lattice_angstrom, ex.frac + [0.13, 0.4, 0.77], ex.slots, s)
    for p in (sup, other, moved):
        assert p is not None
        np.testing.assert_allclose(p, base, atol=1e-9)
    assert cell_pair_profile(np.zeros((3, 3)), ex.frac, ex.slots, s) is None
    assert cell_pair_profile(np.diag([0.05, 0.05, 4.0]), ex.frac, ex.slots, s) is None   # too many images
    assert profile_mismatch(base, None) == np.inf


def test_particle_profile_is_rotation_invariant_and_converges_with_size(cubic) -> None:
    from scipy.spatial.transform import Rotation

    from c2np.particle import Particle

    part, desc, ex = cubic
    rot = Rotation.from_euler("xyz", [0.3, 1.1, -0.4]).as_matrix()
    turned = Particle(part.numbers, part.positions_angstrom @ rot.T + 5.0)
    np.testing.assert_allclose(particle_pair_profile(turned, describe(turned)),
                               particle_pair_profile(part, desc), atol=1e-9)
    bulk = cell_pair_profile(ex.lattice_angstrom, ex.frac, ex.slots, desc.scale_angstrom)
    small = carve(perovskite(a=4.0), 7.0).particle
    err = [profile_mismatch(particle_pair_profile(p, describe(p)), bulk) for p in (small, part)]
    assert err[1] < err[0]


def _cand(sg: int, a: float, mismatch: float, min_pair: float = 2.0) -> Candidate:
    return Candidate((3, 1, 1), np.array([a, a, a, 90.0, 90.0, 90.0]), sg, min_pair, mismatch, 0.0, a ** 3)


def test_choose_candidate_by_profile_and_by_vote() -> None:
    cands = [_cand(221, 4.0, 0.5), _cand(221, 4.01, 0.6), _cand(62, 5.0, 0.1), _cand(1, 6.0, 0.01, min_pair=0.1)]
    best = choose_candidate(cands, rule="profile", min_pair_angstrom=0.7)
    assert best is not None and best.as_tuple()[6] == 62                   # the collided cell is not valid
    worst = choose_candidate(cands, rule="profile", min_pair_angstrom=0.0)
    assert worst is not None and worst.as_tuple()[6] == 1
    voted = choose_candidate(cands, rule="vote", min_pair_angstrom=0.7)
    assert voted is not None and voted.as_tuple() == vote([(c.params, c.spacegroup) for c in cands[:3]]).as_tuple()
    only_bad = choose_candidate(cands[3:], rule="profile", min_pair_angstrom=0.7)  # none valid -> all
    assert only_bad is not None and only_bad.as_tuple()[6] == 1
    assert choose_candidate([], rule="profile") is None
    with pytest.raises(C2NPInputError, match="mismatch"):
        choose_candidate([_cand(221, 4.0, float("nan"))], rule="profile")
    with pytest.raises(C2NPInputError, match="rank"):
        choose_candidate(cands, rule="best")


def test_generator_candidates_for_every_composition(tmp_path_factory: pytest.TempPathFactory) -> None:
    cells = [perovskite(a=a, ids=f"M{i}", A=z) for i, (a, z) in enumerate(zip((3.4, 4.0, 4.6, 5.2, 5.8),
                                                                             (19, 11, 37, 55, 3)))]
    store = DatasetStore.open(build_store(cells, tmp_path_factory.mktemp("r") / "s.h5", "strict",
                                          radii_angstrom=[8, 10], progress=False))
    fwd = ForwardTask(store, "train", "full")
    pairs = list(fwd.training_examples(rotations_per_group=1))
    ex = [cell_example(describe(p), q.cell) for q, p in pairs]
    cfg = GenConfig(hidden=16, layers=1, n_freq=2, steps=4, train_steps=3, batch=4, sampler="pc",
                    lattice_param="x0", n_samples=2, z_candidates="all", rank="profile")
    model = fit_generator(ex, cfg)
    model.compositions = [(3, 1, 1), (6, 2, 2)]                # two compositions to generate for
    model.comp_head = type(model.comp_head)(16, 16, 2, 2)
    parts = [p for _, p in pairs[:3]]
    descs = [describe(p) for p in parts]
    profiles = [particle_pair_profile(p, d) for p, d in zip(parts, descs)]
    cands = model.candidates(descs, seed=1, profiles=profiles)
    for c in cands:
        assert 1 <= len(c) <= 4 and {x.composition for x in c} <= {(3, 1, 1), (6, 2, 2)}
        assert all(np.isfinite(x.mismatch) or x.mismatch == np.inf for x in c)
    preds = model.predict_particles(parts, seed=1)
    expected = [choose_candidate(c, rule="profile", min_pair_angstrom=0.0) for c in cands]
    assert [p.as_tuple() if p else None for p in preds] == [p.as_tuple() if p else None for p in expected]
    with pytest.raises(C2NPInputError, match="profile"):
        model.predict_descriptors(descs, seed=1)
    with pytest.raises(C2NPInputError, match="z_candidates"):
        GenConfig(z_candidates="density")
    with pytest.raises(C2NPInputError, match="rank"):
        GenConfig(rank="oracle")


def test_stretch_finds_the_particles_scale(cubic) -> None:
    """A cell 5 % too large is stretched back to the particle's distances, and the stretched
    mismatch is that of the true cell (the stretch reads the particle only)."""
    from c2np.models.inverse.ranking import best_scale_mismatch

    part, desc, ex = cubic
    s = desc.scale_angstrom
    pp = particle_pair_profile(part, desc)
    true = profile_mismatch(pp, cell_pair_profile(ex.lattice_angstrom, ex.frac, ex.slots, s))
    big = ex.lattice_angstrom * 1.05
    lam, mis = best_scale_mismatch(pp, big, ex.frac, ex.slots, s)
    assert abs(lam - 1 / 1.05) < 0.006
    assert mis < 0.5 * profile_mismatch(pp, cell_pair_profile(big, ex.frac, ex.slots, s))
    assert mis < true + 0.02
    assert best_scale_mismatch(pp, np.zeros((3, 3)), ex.frac, ex.slots, s) == (1.0, np.inf)


def test_refinement_recovers_a_pnma_cell_from_its_particle() -> None:
    """From a Pnma cell with its lattice 4 % off and its free coordinates moved, fitting the
    template's free parameters to the particle's pair profile recovers the lattice and
    keeps the cell exactly in the template's group."""
    from c2np.cells import standardize
    from c2np.models.inverse.ranking import refine_to_profile
    from c2np.models.inverse.templates import project_frac, project_lattice, template_of
    from helpers import crystal_zoo

    cell = crystal_zoo()["orthorhombic"]
    part = carve(cell, 12.0).particle
    desc = describe(part)
    ex = cell_example(desc, cell)
    t = template_of(ex.lattice_angstrom, ex.frac, ex.slots, cell.material_id)
    rng = np.random.default_rng(1)
    lat0 = project_lattice(ex.lattice_angstrom * np.array([[1.04], [0.97], [1.03]]), t.rotations)
    frac0 = project_frac((ex.frac + rng.normal(scale=0.006, size=ex.frac.shape)) % 1.0,
                         t.rotations, t.translations, t.perm, t.frac)
    pp = particle_pair_profile(part, desc)
    s = desc.scale_angstrom
    start = profile_mismatch(pp, cell_pair_profile(lat0, frac0, ex.slots, s))
    lat, frac, mis = refine_to_profile(pp, t, lat0, frac0, ex.slots, s, max_evals=400)
    assert mis < 0.5 * start
    true_len = np.linalg.norm(ex.lattice_angstrom, axis=1)
    assert np.abs(np.linalg.norm(lat, axis=1) - true_len).max() < 0.5 * np.abs(
        np.linalg.norm(lat0, axis=1) - true_len).max()
    assert standardize((lat, frac, ex.slots + 1), symprec_angstrom=1e-4).spacegroup == 62


def test_symmetric_margin_prefers_the_more_symmetric_of_equally_good_cells() -> None:
    """A refined Pnma cell with zero tilts explains a cubic particle as well as the Pm-3m
    cell does; within the margin the more symmetric template's answer is chosen, outside it
    the better fit."""
    def cand(sg: int, n_ops: int, mis: float, a: float) -> Candidate:
        return Candidate((3, 1, 1), np.array([a, a, a, 90.0, 90.0, 90.0]), sg, 1.5, mis, 0.0, 64.0, sg, None, n_ops)

    pnma, cubic = cand(62, 8, 0.100, 5.6), cand(221, 48, 0.102, 4.0)
    assert choose_candidate([pnma, cubic], rule="refine").spacegroup == 62
    assert choose_candidate([pnma, cubic], rule="refine", symmetric_margin=0.01).spacegroup == 221
    far = cand(221, 48, 0.2, 4.0)
    assert choose_candidate([pnma, far], rule="refine", symmetric_margin=0.01).spacegroup == 62


def test_relative_margin_widens_with_the_best_mismatch() -> None:
    """The relative part of the margin scales with the best mismatch: a cubic candidate 0.05
    behind a Pnma fit is taken when the best fit is poor (a noisy particle, best 0.4: margin
    0.25 x 0.4 = 0.1), not when it is good (best 0.04: margin 0.01); with no relative part
    the absolute margin alone decides, as before."""
    def cand(sg: int, n_ops: int, mis: float) -> Candidate:
        a = 4.0 if sg == 221 else 5.6
        return Candidate((3, 1, 1), np.array([a, a, a, 90.0, 90.0, 90.0]), sg, 1.5, mis, 0.0, 64.0, sg, None, n_ops)

    noisy = [cand(62, 8, 0.40), cand(221, 48, 0.45)]
    clean = [cand(62, 8, 0.04), cand(221, 48, 0.09)]
    assert choose_candidate(noisy, rule="refine", symmetric_margin_rel=0.25).spacegroup == 221
    assert choose_candidate(clean, rule="refine", symmetric_margin_rel=0.25).spacegroup == 62
    assert choose_candidate(noisy, rule="refine", symmetric_margin=0.01).spacegroup == 62
    assert choose_candidate(noisy, rule="refine", symmetric_margin=0.01, symmetric_margin_rel=0.1).spacegroup == 221
    with pytest.raises(C2NPInputError, match="must be >= 0"):
        GenConfig(symmetric_margin_rel=-0.1)


def test_noise_margin_follows_the_particles_own_noise_estimate() -> None:
    """The per-Å margin reads the particle's noise estimate: about 0 for a carved particle, so
    the clean answer is the absolute margin's; about 0.8 sigma with Gaussian noise sigma,
    which widens the margin to the more symmetric candidate."""
    from c2np.particle import Particle
    from c2np.particle_descriptor import position_noise_angstrom

    clean = carve(perovskite(a=4.0), 12.0).particle
    rng = np.random.default_rng(0)
    x = clean.positions_angstrom
    noisy = Particle(clean.numbers, x + rng.normal(scale=0.05, size=x.shape))
    s_clean, s_noisy = position_noise_angstrom(clean), position_noise_angstrom(noisy)
    assert s_clean < 1e-9
    assert 0.025 < s_noisy < 0.06

    def cand(sg: int, n_ops: int, mis: float) -> Candidate:
        a = 4.0 if sg == 221 else 5.6
        return Candidate((3, 1, 1), np.array([a, a, a, 90.0, 90.0, 90.0]), sg, 1.5, mis, 0.0, 64.0, sg, None, n_ops)

    cands = [cand(62, 8, 0.20), cand(221, 48, 0.30)]
    for s, want in ((s_clean, 62), (s_noisy, 221)):
        got = choose_candidate(cands, rule="refine", symmetric_margin=0.01, symmetric_margin_per_angstrom=4.0,
                               noise_angstrom=s)
        assert got is not None and got.spacegroup == want


def test_shape_starts_keep_volume_and_symmetry_and_the_fit_is_never_worse() -> None:
    """The multi-start's shape changes of a Pnma metric keep its volume and its symmetry and
    move it by the asked amplitude; with them the refinement returns a fit at least as good."""
    from c2np.models.inverse.ranking import _metric_basis, _shape_starts, refine_to_profile
    from c2np.models.inverse.templates import metric_average, template_of
    from helpers import crystal_zoo

    cell = crystal_zoo()["orthorhombic"]
    part = carve(cell, 10.0).particle
    desc = describe(part)
    ex = cell_example(desc, cell)
    t = template_of(ex.lattice_angstrom, ex.frac, ex.slots, cell.material_id)
    G0 = ex.lattice_angstrom @ ex.lattice_angstrom.T
    basis = _metric_basis(t.rotations) * float(np.trace(G0) / 3.0)
    starts = _shape_starts(G0, basis, [0.1, 0.3])
    assert len(starts) == 2 * 2 * (len(basis) - 1)        # ± each amplitude, each non-isotropic direction
    for x in starts:
        G = G0 + np.tensordot(x, basis, axes=1)
        assert np.linalg.det(G) == pytest.approx(np.linalg.det(G0), rel=1e-9)
        assert np.allclose(metric_average(G, t.rotations), G)
        assert 0.05 < np.linalg.norm(G - G0) / np.linalg.norm(G0) < 0.7      # t |G0|, then the volume kept
    squeezed = ex.lattice_angstrom * np.array([[1.25], [0.8], [1.0]])   # far from the crystal's shape
    pp = particle_pair_profile(part, desc)
    s = desc.scale_angstrom
    one = refine_to_profile(pp, t, squeezed, ex.frac, ex.slots, s, max_evals=60)[2]
    multi = refine_to_profile(pp, t, squeezed, ex.frac, ex.slots, s, max_evals=60, shape_starts=(0.1, 0.2))[2]
    assert multi <= one


def test_coordinate_starts_are_deterministic_halton_shifts() -> None:
    """The coordinate starts: n points in [-1/2, 1/2)^d, the same every call, all distinct."""
    from c2np.models.inverse.ranking import _coordinate_starts

    u = _coordinate_starts(3, 32)
    assert u.shape == (32, 3)
    assert np.all(u >= -0.5) and np.all(u < 0.5)
    assert np.array_equal(u, _coordinate_starts(3, 32))
    assert len(np.unique(np.round(u, 12), axis=0)) == 32


def test_coordinate_starts_recover_a_cell_whose_wyckoff_coordinate_starts_far() -> None:
    """A tetragonal cell (one free Wyckoff coordinate) shifted 0.3 along it: one local fit stays
    far off; with coordinate starts the fit returns to the crystal's own mismatch."""
    from c2np.models.inverse.ranking import _moved_orbits, _site_basis, refine_to_profile
    from c2np.models.inverse.templates import metric_average, template_of
    from helpers import crystal_zoo

    cell = crystal_zoo()["tetragonal"]
    part = carve(cell, 10.0).particle
    desc = describe(part)
    ex = cell_example(desc, cell)
    t = template_of(ex.lattice_angstrom, ex.frac, ex.slots, cell.material_id)
    sites = _site_basis(t)
    moved = _moved_orbits(ex.frac, sites, np.asarray(t.rotations, dtype=float), np.asarray(t.translations, dtype=float),
                          np.full(sum(len(b) for _, b, _ in sites), 0.3))
    pp = particle_pair_profile(part, desc)
    s = desc.scale_angstrom
    own = refine_to_profile(pp, t, ex.lattice_angstrom, ex.frac, ex.slots, s, max_evals=1)[2]
    one = refine_to_profile(pp, t, ex.lattice_angstrom, moved, ex.slots, s, max_evals=60)[2]
    lat, frac, multi = refine_to_profile(pp, t, ex.lattice_angstrom, moved, ex.slots, s, max_evals=60,
                                         coord_starts=16)
    assert one > 0.5 > 2.0 * own
    assert multi <= own * 1.05
    assert np.allclose(metric_average(lat @ lat.T, t.rotations), lat @ lat.T)   # still symmetric


def test_gen_config_checks_the_refinement_starts() -> None:
    """Negative coordinate starts and shape amplitudes outside (0, 1) are refused; a JSON list
    of amplitudes becomes a tuple."""
    with pytest.raises(C2NPInputError, match="refine_coord_starts"):
        GenConfig(refine_coord_starts=-1)
    with pytest.raises(C2NPInputError, match="refine_shape_starts"):
        GenConfig(refine_shape_starts=(0.2, 1.5))
    assert GenConfig(refine_shape_starts=[0.2, 0.4]).refine_shape_starts == (0.2, 0.4)  # type: ignore[arg-type]


def test_the_screen_refines_a_candidate_that_starts_worse_but_fits() -> None:
    """With one refinement (``refine_top`` 1), the candidate of smallest unrefined mismatch is
    refined: a tetragonal cell moved along its free coordinate (stays far off). The screen
    (``refine_screen_evals``) refines every candidate a little first, and the one that starts
    worse (the crystal with c squeezed to 0.7) but fits is refined and found."""
    import dataclasses

    from c2np.models.inverse.ranking import _moved_orbits, _site_basis, best_scale_mismatch
    from c2np.models.inverse.templates import template_of
    from helpers import crystal_zoo

    cell = crystal_zoo()["tetragonal"]
    part = carve(cell, 10.0).particle
    desc = describe(part)
    ex = cell_example(desc, cell)
    t = template_of(ex.lattice_angstrom, ex.frac, ex.slots, cell.material_id)
    sites = _site_basis(t)
    moved = _moved_orbits(ex.frac, sites, np.asarray(t.rotations, dtype=float), np.asarray(t.translations, dtype=float),
                          np.full(sum(len(b) for _, b, _ in sites), -0.15))
    pp = particle_pair_profile(part, desc)
    cfg = GenConfig(rank="refine", read_rule="template", refine_top=1, refine_evals=60)

    def generator(config: GenConfig) -> CrystalGenerator:
        return CrystalGenerator(config, 4, [tuple(t.composition)], np.zeros(4), np.ones(4), np.zeros((3, 3)), 1.0)

    gen = generator(cfg)

    def candidate(lat: np.ndarray, frac: np.ndarray) -> Candidate:
        lam, mis = best_scale_mismatch(pp, lat, frac, ex.slots, desc.scale_angstrom)
        c = gen._read(lat * lam, frac, ex.slots, gen.cell_of(np.zeros((3, 3)), frac, ex.slots, desc)[2],
                      tuple(t.composition), 0.0, t, mis)
        assert c is not None
        return c

    stuck = candidate(ex.lattice_angstrom, moved)
    squeezed = candidate(ex.lattice_angstrom * np.array([[1.0], [1.0], [0.7]]), ex.frac)
    assert stuck.mismatch < squeezed.mismatch
    row = [(stuck, t), (squeezed, t)]
    plain = gen._refined(row, desc, pp)
    screened = generator(dataclasses.replace(cfg, refine_screen_evals=20))._refined(row, desc, pp)
    assert min(c.mismatch for c in plain) > 0.5
    assert min(c.mismatch for c in screened) < 0.1
    assert min(screened, key=lambda c: c.mismatch).spacegroup == stuck.spacegroup
    with pytest.raises(C2NPInputError, match="refine_screen_evals"):
        GenConfig(refine_screen_evals=-1)
