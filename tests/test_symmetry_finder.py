"""The symmetry finder (moyopy) runs bounded in memory and time: a cell on which
moyopy's search grows without bound is a limit error naming the limit, the helper recovers,
and a particle too noisy for a space group is a clean 'no answer'."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from c2np import limits
from c2np.carving import carve
from c2np.catalog.textbook import prototype_cell
from c2np.errors import C2NPLimitError, C2NPNoAnswerError
from c2np.solver import solve
from c2np.solver.geometry import nearest_distinct_site_angstrom
from c2np.solver.symmetry import symmetry_sweep
from c2np.solver.symmetry_finder import find_symmetry, lattice_rotation_count

RUNAWAY = Path(__file__).parent / "data" / "moyo_runaway_cell.json"
PEROVSKITE = (np.eye(3) * 4.0, np.array([[0, 0, 0], [.5, .5, .5], [.5, .5, 0], [.5, 0, .5], [0, .5, .5]]),
              np.array([19, 12, 1, 1, 1]))


def _runaway() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    d = json.loads(RUNAWAY.read_text())
    return np.array(d["lattice_angstrom"]), np.array(d["frac"]), np.array(d["numbers"])


def test_answers_match_moyopy_in_process() -> None:
    import moyopy

    lat, frac, z = PEROVSKITE
    ds = find_symmetry(lat, frac, z, symprec_angstrom=0.01)
    ref = moyopy.MoyoDataset(moyopy.Cell(lat.tolist(), frac.tolist(), z.tolist()), symprec=0.01)
    assert ds is not None and ds.number == ref.number == 221
    assert np.array_equal(ds.rotations, np.array(ref.operations.rotations))
    assert np.array_equal(ds.std_lattice_angstrom, np.array(ref.std_cell.basis))
    assert np.array_equal(ds.std_positions, np.array(ref.std_cell.positions))
    assert lattice_rotation_count(lat, symprec_angstrom=0.01) == 48


@pytest.mark.parametrize("limit, value, word", [("solver_symmetry_bytes", 150e6, "needed more than"),
                                                ("solver_symmetry_seconds", 1, "ran longer than")])
def test_runaway_search_is_a_limit_error_and_the_helper_recovers(limit: str, value: float, word: str) -> None:
    lat, frac, z = _runaway()
    with limits.override(**{limit: value}), pytest.raises(C2NPLimitError, match=f"{word}.*{limit}"):
        find_symmetry(lat, frac, z, symprec_angstrom=1.389)
    ds = find_symmetry(*PEROVSKITE, symprec_angstrom=0.01)
    assert ds is not None and ds.number == 221


def test_sweep_keeps_the_groups_found_before_a_limit() -> None:
    lat, frac, z = _runaway()
    with limits.override(solver_symmetry_seconds=1):
        sweep = symmetry_sweep(lat, frac, z, [0.01, 1.389], 3)
        assert sweep.stopped_by is not None and "solver_symmetry_seconds" in sweep.stopped_by
        assert [s.symprec_angstrom for s in sweep.steps] == [0.01] and sweep.chosen.spacegroup == 1
        with pytest.raises(C2NPLimitError):
            symmetry_sweep(lat, frac, z, [1.389], 3)


def test_site_count_is_checked_before_the_call() -> None:
    lat, frac, z = _runaway()
    with limits.override(solver_sites=10), pytest.raises(C2NPLimitError,
                                                         match="48 sites exceeds the limit solver_sites"):
        find_symmetry(lat, frac, z, symprec_angstrom=0.01)


def test_nearest_distinct_site() -> None:
    lat, frac, z = PEROVSKITE
    assert nearest_distinct_site_angstrom(lat, frac, z) == pytest.approx(2.0 * np.sqrt(2.0))
    assert nearest_distinct_site_angstrom(lat, frac[:2], z[:2]) == np.inf
    assert nearest_distinct_site_angstrom(*_runaway()) == pytest.approx(0.92126, abs=1e-4)


def test_very_noisy_particle_fails_cleanly() -> None:
    """sigma = 0.3 A on every coordinate of an R = 8 A KMgH3 particle: the noise floor of the
    sweep passes half the distance between distinct sites; no tolerance is tried there."""
    rng = np.random.default_rng(45)
    part = carve(prototype_cell("KMgH3-cubic"), 8.0, centre_frac=rng.random(3),
                 quaternion=Rotation.random(random_state=rng).as_quat()).particle
    pos = part.positions_angstrom + rng.normal(scale=0.3, size=part.positions_angstrom.shape)
    with pytest.raises(C2NPNoAnswerError, match="too noisy for a space group"):
        solve(part.numbers, pos)


def test_site_clustering_stops_at_its_bound() -> None:
    from c2np.solver.geometry import cluster_sites

    rng = np.random.default_rng(0)
    frac = rng.random((400, 3))
    lat = np.eye(3) * 20.0
    labels, centres = cluster_sites(frac, np.arange(400), lat, 0.5)
    assert len(centres) > 50 and labels.min() >= 0
    with pytest.raises(C2NPLimitError, match="solver_sites"):
        cluster_sites(frac, np.arange(400), lat, 0.5, max_clusters=50)
    # the bound does not change an answer below it
    labels2, centres2 = cluster_sites(frac, np.arange(400), lat, 0.5, max_clusters=len(centres))
    assert np.array_equal(labels, labels2) and np.array_equal(centres, centres2)
