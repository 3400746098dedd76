"""The solver on particles as they come from experiments and simulations: antisites, vacancies,
smooth strain, long lattice translations, checked answers, and particles that are no crystal."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from c2np.carving import carve
from c2np.cells import UnitCell
from c2np.errors import C2NPNoAnswerError
from c2np.solver import solve

FCC = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])


def _cell(name: str) -> tuple[UnitCell, int]:
    """A test crystal and its space group."""
    if name == "Cu":
        return UnitCell("Cu", np.eye(3) * 3.61, [29] * 4, FCC), 225
    if name == "Cu3Au":  # L1_2
        return UnitCell("Cu3Au", np.eye(3) * 3.75, [79, 29, 29, 29], FCC), 221
    if name == "CuAu":  # L1_0
        return UnitCell("CuAu", np.diag([3.96, 3.96, 3.70]), [79, 79, 29, 29], FCC), 123
    raise KeyError(name)


def _particle(name: str, radius: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    cell, _ = _cell(name)
    res = carve(cell, radius, centre_frac=rng.random(3), quaternion=Rotation.random(random_state=rng).as_quat())
    return res.particle.numbers.copy(), res.particle.positions_angstrom.copy()


def _swap_pairs(numbers: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
    """Swap ``share`` of the Cu/Au pairs (composition kept)."""
    out = numbers.copy()
    au, cu = np.flatnonzero(out == 79), np.flatnonzero(out == 29)
    k = max(1, int(round(share * min(len(au), len(cu)))))
    ia, ic = rng.choice(au, k, replace=False), rng.choice(cu, k, replace=False)
    out[ia], out[ic] = 29, 79
    return out


@pytest.mark.parametrize("name", ["Cu3Au", "CuAu"])
@pytest.mark.parametrize("radius", [8.0, 12.0])
def test_antisites_give_the_ordered_group_and_the_degree_of_order(name: str, radius: float) -> None:
    for seed in (0, 1):
        numbers, positions = _particle(name, radius, seed)
        swapped = _swap_pairs(numbers, 0.1, np.random.default_rng(seed))
        result = solve(swapped, positions)
        assert result.spacegroup == _cell(name)[1], (name, radius, seed, result.international)
        assert result.diagnostics["n_antisite_atoms"] > 0
        assert 0.5 < result.degree_of_order < 1.0
        assert solve(numbers, positions).degree_of_order == 1.0


def test_vacancies_are_tolerated() -> None:
    for name in ("Cu3Au", "Cu"):
        numbers, positions = _particle(name, 12.0, 3)
        keep = np.random.default_rng(3).random(len(numbers)) >= 0.2
        result = solve(numbers[keep], positions[keep])
        assert result.spacegroup == _cell(name)[1], (name, result.international)
        assert result.confidence > 0.3


def _strained(positions: np.ndarray, radius: float, rng: np.random.Generator, *, contraction: float,
              thermal_angstrom: float) -> np.ndarray:
    """Surface contraction (radial, growing as r^2) plus a smooth random strain field and
    uncorrelated thermal motion: what relaxation and MD do to a particle."""
    centre = positions.mean(axis=0)
    rel = positions - centre
    r = np.linalg.norm(rel, axis=1)[:, None]
    rel = rel * (1.0 - contraction * (r / radius) ** 2)
    k = rng.normal(size=(3, 3)) / radius
    phase = rng.uniform(0, 2 * np.pi, 3)
    wave = 0.05 * np.sin(rel @ k.T + phase)  # long-wavelength displacement field, 0.05 Å
    return centre + rel + wave + rng.normal(scale=thermal_angstrom, size=rel.shape)


@pytest.mark.parametrize("radius", [8.0, 12.0, 16.0])
def test_smooth_strain_and_thermal_motion_at_every_size(radius: float) -> None:
    """A larger particle is never harder: the symmetry tolerance follows the measured spread
    of the lattice, which the lattice reports."""
    for name in ("Cu", "Cu3Au"):
        numbers, positions = _particle(name, radius, 5)
        rng = np.random.default_rng(int(radius))
        strained = _strained(positions, radius, rng, contraction=0.02, thermal_angstrom=0.12)
        result = solve(numbers, strained)
        assert result.spacegroup == _cell(name)[1], (name, radius, result.international)
        assert result.lattice_spread_angstrom > 0.0
        assert result.to_dict()["lattice_spread_angstrom"] == result.lattice_spread_angstrom


def _long_cell() -> UnitCell:
    """Orthorhombic P2mm-like cell whose c translation (17.5 Å) is longer than 16 Å."""
    frac = np.array([[0, 0, 0], [0.5, 0.5, 0.08], [0, 0.5, 0.21], [0.5, 0, 0.37], [0, 0, 0.52],
                     [0.5, 0.5, 0.71], [0, 0.5, 0.83]])
    return UnitCell("long", np.diag([3.1, 3.4, 17.5]), [11, 11, 12, 11, 12, 11, 8], frac)


def test_reach_follows_the_particle_size() -> None:
    from c2np.cells import standardize
    from c2np.solver.reach import reach_fraction

    cell = _long_cell()
    quat = np.array([0.9, 0.1, 0.3, 0.2]) / np.linalg.norm([0.9, 0.1, 0.3, 0.2])
    # 34 Å across supports 0.56 x 34 = 19 Å: the 17.5 Å translation is found
    big = carve(cell, 17.0, centre_frac=(0.13, 0.27, 0.41), quaternion=quat).particle
    result = solve(big.numbers, big.positions_angstrom)
    target = standardize(cell)
    assert result.spacegroup == target.spacegroup
    np.testing.assert_allclose(sorted(result.lattice.as_array()[:3]), sorted(target.lattice_params[:3]), atol=0.01)
    assert result.diagnostics["lattice_pass"] == "long translations"
    assert result.diagnostics["longest_translation_tried_angstrom"] > 17.5
    # 24 Å across supports 13.7 Å: refused, with the longest translation tried and the size needed
    small = carve(cell, 12.0, centre_frac=(0.13, 0.27, 0.41), quaternion=quat).particle
    with pytest.raises(C2NPNoAnswerError, match=r"translations up to [\d.]+ Å were tried.*needs a particle"):
        solve(small.numbers, small.positions_angstrom)
    assert 0.5 < reach_fraction(0.25) < 0.6


def test_verification_refuses_a_cell_that_loses_atoms() -> None:
    from c2np.solver.verification import verify_cell

    lat = np.eye(3) * 3.75
    zs = np.array([79, 29, 29, 29])
    particle = np.repeat(zs, 50)
    ok = verify_cell(particle, lat, FCC, zs, lat, FCC, zs, 221, symprec_angstrom=0.01,
                     matched_fraction=1.0, atoms_per_slot=1.0)
    assert ok.refusal is None and ok.factor == 1.0 and ok.spglib_spacegroup == 221
    # the symmetrized cell dropped two of four sites: density and composition are wrong
    lost = verify_cell(particle, lat, FCC, zs, lat, FCC[:2], zs[:2], 221, symprec_angstrom=0.01,
                       matched_fraction=1.0, atoms_per_slot=1.0)
    assert lost.refusal is not None and "density" in lost.refusal and "composition" in lost.refusal
    # a cell too small for the particle: two atoms per site and cell
    small = verify_cell(particle, lat, FCC, zs, lat, FCC, zs, 221, symprec_angstrom=0.01,
                        matched_fraction=1.0, atoms_per_slot=2.0)
    assert small.refusal is not None and "lost atoms" in small.refusal


def test_verification_catches_a_supergroup_trap() -> None:
    """A tetragonal cell (c/a = 1.03) claimed cubic: spglib at the reported tolerance finds
    the subgroup, and the confidence is lowered."""
    from c2np.solver.verification import DISAGREEMENT_FACTOR, verify_cell

    lat = np.diag([3.6, 3.6, 3.708])
    zs = np.full(4, 29)
    trap = verify_cell(np.full(100, 29), lat, FCC, zs, np.eye(3) * 3.64, FCC, zs, 225, symprec_angstrom=0.01,
                       matched_fraction=1.0, atoms_per_slot=1.0)
    assert trap.spglib_spacegroup == 139 and trap.factor == DISAGREEMENT_FACTOR


def _amorphous(n: int, seed: int) -> np.ndarray:
    """Random sequential packing in a ball (no two atoms closer than 2.2 Å)."""
    rng = np.random.default_rng(seed)
    radius = (n / 0.06 * 3 / (4 * np.pi)) ** (1 / 3)
    pts: list[np.ndarray] = []
    while len(pts) < n:
        p = rng.uniform(-radius, radius, 3)
        if np.linalg.norm(p) <= radius and (not pts or np.min(np.linalg.norm(np.array(pts) - p, axis=1)) >= 2.2):
            pts.append(p)
    return np.array(pts)


def test_noncrystalline_particles_get_no_space_group() -> None:
    from ase.cluster import Decahedron, Icosahedron

    rng = np.random.default_rng(4)
    cases = {"icosahedral": Icosahedron("Cu", 5), "decahedral": Decahedron("Au", 5, 3, 2)}
    for kind, atoms in cases.items():
        for noise in (0.0, 0.05):
            pos = atoms.get_positions() + rng.normal(scale=noise, size=(len(atoms), 3))
            with pytest.raises(C2NPNoAnswerError, match=f"not a crystal: five-fold twinned, {kind}"):
                solve(atoms.numbers, pos)
    with pytest.raises(C2NPNoAnswerError, match="not a crystal: amorphous"):
        solve(np.full(300, 29), _amorphous(300, 0))


def test_classifier_leaves_crystals_alone() -> None:
    from c2np.solver.noncrystal import classify_noncrystal

    for name in ("Cu", "Cu3Au", "CuAu"):
        _, positions = _particle(name, 12.0, 6)
        assert classify_noncrystal(positions, lattice_found=False) is None


def test_ranked_answers_library_and_cli(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from typer.testing import CliRunner

    from c2np.cli import build_app
    from c2np.particle import Particle
    from c2np.particle_io import write_extxyz

    numbers, positions = _particle("Cu3Au", 8.0, 7)
    noisy = positions + np.random.default_rng(7).normal(scale=0.1, size=positions.shape)
    result = solve(numbers, noisy, top_k=5)
    assert 1 <= len(result.candidates) <= 5
    first = result.candidates[0]
    assert first.spacegroup == result.spacegroup == 221 and first.probability == result.confidence
    assert len({c.spacegroup for c in result.candidates}) == len(result.candidates)
    assert sum(c.probability for c in result.candidates) <= 1.0 + 1e-9
    assert all(0.0 <= c.probability <= 1.0 for c in result.candidates)
    assert len(solve(numbers, noisy).candidates) == 1
    with pytest.raises(ValueError, match="top_k"):
        solve(numbers, noisy, top_k=0)
    path = tmp_path / "p.xyz"
    write_extxyz(path, [(Particle(numbers, noisy), {})])
    runner, app = CliRunner(), build_app()
    out = runner.invoke(app, ["identify", str(path), "--json", "--top", "3"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["candidates"][0]["spacegroup"] == 221 and 1 <= len(data["candidates"]) <= 3
    assert {"probability", "a", "alpha", "international"} <= set(data["candidates"][0])
    assert "degree_of_order" in data and "lattice_spread_angstrom" in data
    text = runner.invoke(app, ["identify", str(path), "--top", "3"])
    assert text.exit_code == 0 and "ranked answers" in text.output
    many = runner.invoke(app, ["identify", str(path), str(path), "--json", "--top", "2"])
    assert many.exit_code == 0, many.output
    assert all(1 <= len(item["candidates"]) <= 2 for item in json.loads(many.stdout))


def test_cli_says_what_a_noncrystal_is(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ase.cluster import Icosahedron
    from typer.testing import CliRunner

    from c2np.cli import build_app
    from c2np.particle import Particle
    from c2np.particle_io import write_extxyz

    atoms = Icosahedron("Cu", 4)
    path = tmp_path / "ico.xyz"
    write_extxyz(path, [(Particle(atoms.numbers, atoms.get_positions()), {})])
    out = CliRunner().invoke(build_app(), ["identify", str(path)])
    assert out.exit_code == 1
    assert "five-fold twinned, icosahedral" in out.output and "Traceback" not in out.output


def test_strain_gradient_is_found_by_the_strained_pass() -> None:
    """A relaxed particle's lattice varies smoothly (here a radial contraction growing as r^2):
    a true translation's residual grows with its length, which the first pass reads as a
    pseudo-translation; the pass for strained particles allows it."""
    numbers, positions = _particle("CuAu", 12.0, 2)
    rel = positions - positions.mean(axis=0)
    r = np.linalg.norm(rel, axis=1)[:, None]
    result = solve(numbers, rel * (1.0 - 0.02 * (r / 12.0) ** 2))
    assert result.spacegroup == 123
    assert result.diagnostics["lattice_pass"] == "strained or defective particle"
    assert result.confidence >= 0.5
