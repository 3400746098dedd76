"""Structure and trajectory readers of ``c2np identify`` (c2np.trajectory): every format, every bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from c2np import limits
from c2np.carving import carve
from c2np.cells import UnitCell
from c2np.errors import C2NPInputError, C2NPLimitError
from c2np.particle import Particle
from c2np.particle_io import write_extxyz
from c2np.trajectory import (
    FrameSelection,
    average_frames,
    make_whole,
    parse_frame_selection,
    parse_species_map,
    read_structure,
    read_trajectory,
)

A_CU = 3.61


def _cu3au_particle(radius: float = 7.0) -> Particle:
    """An L1_2 Cu3Au particle (Au at the cube corners), 100-300 atoms."""
    cell = UnitCell("Cu3Au", np.eye(3) * 3.75, [79, 29, 29, 29],
                    [[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    return carve(cell, radius).particle


def _write_dump(path: Path, frames: list[np.ndarray], types: np.ndarray, *, box: float = 40.0,
                shift: float = 0.0, elements: list[str] | None = None, bounds: str = "pp pp pp") -> None:
    """A LAMMPS text dump (``id type x y z`` [``element``]), positions wrapped into [0, box)."""
    lines = []
    for t, pos in enumerate(frames):
        lines += ["ITEM: TIMESTEP", str(100 * t), "ITEM: NUMBER OF ATOMS", str(len(pos)),
                  f"ITEM: BOX BOUNDS {bounds}"] + [f"0 {box}"] * 3
        lines.append("ITEM: ATOMS id type x y z" + (" element" if elements else ""))
        wrapped = np.mod(pos + shift, box)
        for i, (ty, x) in enumerate(zip(types, wrapped)):
            extra = f" {elements[ty - 1]}" if elements else ""
            lines.append(f"{i + 1} {ty} {x[0]:.6f} {x[1]:.6f} {x[2]:.6f}{extra}")
    path.write_text("\n".join(lines) + "\n")


def _types(numbers: np.ndarray) -> np.ndarray:
    return np.where(numbers == 29, 1, 2)


def _noisy_frames(part: Particle, n: int, sigma: float, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [part.positions_angstrom + rng.normal(0, sigma, part.positions_angstrom.shape) for _ in range(n)]


def _runner():  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from c2np.cli import build_app

    return CliRunner(), build_app()


# --- frame selections and species maps ---------------------------------------------------------

@pytest.mark.parametrize("spec,n,expected", [
    ("all", 5, [0, 1, 2, 3, 4]), ("0:100:10", 25, [0, 10, 20]), ("2", 5, [2]), ("-1", 5, [4]),
    ("1:", 4, [1, 2, 3]), ("::2", 5, [0, 2, 4]), ("-2:", 5, [3, 4]),
])
def test_frame_selection(spec: str, n: int, expected: list[int]) -> None:
    sel = parse_frame_selection(spec)
    assert sel.indices(n) == expected
    if not sel.needs_count:
        assert [i for i in range(n) if sel.may_select(i)] == expected


@pytest.mark.parametrize("spec", ["", "a", "1:2:0", "1:2:-1", "1:2:3:4", "1.5"])
def test_frame_selection_bad(spec: str) -> None:
    with pytest.raises(C2NPInputError, match="--frames"):
        parse_frame_selection(spec)


def test_species_map() -> None:
    assert parse_species_map("1=Cu, 2=Au") == {1: 29, 2: 79}
    for bad, why in [("1=Xx", "unknown element"), ("0=Cu", "positive"), ("Cu=1", "positive"),
                     ("1=Cu,1=Au", "twice"), ("", "empty")]:
        with pytest.raises(C2NPInputError, match=why):
            parse_species_map(bad)


# --- readers ----------------------------------------------------------------------------------

def test_lammps_dump_with_species_map_wrapped_across_the_box(tmp_path: Path) -> None:
    part = _cu3au_particle()
    frames = _noisy_frames(part, 3, 0.02, seed=1)
    dump = tmp_path / "np.lammpstrj"
    _write_dump(dump, frames, _types(part.numbers), shift=-2.0)  # the particle straddles the box corner
    traj = read_trajectory(dump, frames=parse_frame_selection("all"), species={1: 29, 2: 79})
    assert traj.format == "lammps-dump-text"
    assert traj.n_frames == 3 and traj.frame_indices.tolist() == [0, 1, 2]
    assert np.array_equal(traj.numbers, part.numbers)
    for k in range(3):  # made whole: the same shape as the particle, up to a translation
        d = traj.positions_angstrom[k] - frames[k]
        assert np.allclose(d, d[0], atol=1e-4)
    first = read_structure(dump, species={1: 29, 2: 79})  # the first frame by default
    assert np.allclose(first.positions_angstrom, traj.positions_angstrom[0])


def test_lammps_dump_with_element_column_needs_no_map(tmp_path: Path) -> None:
    part = _cu3au_particle()
    dump = tmp_path / "np.dump"
    _write_dump(dump, [part.positions_angstrom], _types(part.numbers), shift=20.0, elements=["Cu", "Au"])
    traj = read_trajectory(dump)
    assert np.array_equal(traj.numbers, part.numbers)
    with pytest.raises(C2NPInputError, match="names its elements"):
        read_trajectory(dump, species={1: 29, 2: 79})


def test_lammps_dump_without_species_is_refused(tmp_path: Path) -> None:
    part = _cu3au_particle()
    dump = tmp_path / "np.dump"
    _write_dump(dump, [part.positions_angstrom], _types(part.numbers), shift=20.0)
    with pytest.raises(C2NPInputError, match=r"np.dump: frame 0: atom types 1, 2 but no elements.*--species"):
        read_trajectory(dump)
    with pytest.raises(C2NPInputError, match="atom type 2 has no element"):
        read_trajectory(dump, species={1: 29})


def test_periodic_solid_is_not_a_particle(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    pos = rng.uniform(0, 10.0, (400, 3))  # fills a 10 Å box: no vacuum gap
    dump = tmp_path / "bulk.dump"
    _write_dump(dump, [pos], np.ones(400, dtype=int), box=10.0)
    with pytest.raises(C2NPInputError, match="fill the periodic box along a .*not a finite particle"):
        read_trajectory(dump, species={1: 29})
    # the same atoms in a non-periodic box are read as they are
    _write_dump(dump, [pos], np.ones(400, dtype=int), box=10.0, bounds="ff ff ff")
    assert read_trajectory(dump, species={1: 29}).positions_angstrom.shape == (1, 400, 3)


def test_make_whole_triclinic() -> None:
    cell = np.array([[30.0, 0, 0], [8.0, 28.0, 0], [3.0, 4.0, 26.0]])
    part = _cu3au_particle().positions_angstrom
    frac = np.mod((part + [1.0, 1.0, 1.0]) @ np.linalg.inv(cell), 1.0)  # wrapped into the box
    out, problem = make_whole(frac @ cell, cell, np.array([True, True, True]))
    assert problem is None
    d = out - part
    assert np.allclose(d, d[0], atol=1e-9)


def test_ase_formats(tmp_path: Path) -> None:
    from ase import Atoms
    from ase.io import write

    part = _cu3au_particle()
    atoms = Atoms(numbers=part.numbers, positions=part.positions_angstrom, cell=np.eye(3) * 30.0, pbc=True)
    atoms.positions += 15.0
    moved = atoms.copy()
    moved.positions += 0.5
    cases = {"POSCAR": ("vasp", [atoms]), "p.pdb": ("proteindatabank", [atoms]),
             "p.traj": ("traj", [atoms, moved]), "p.xsf": ("xsf", [atoms]), "XDATCAR": ("vasp-xdatcar", [atoms, moved])}
    for name, (fmt, images) in cases.items():
        write(tmp_path / name, images, format=fmt)
        traj = read_trajectory(tmp_path / name, frames=parse_frame_selection("all"))
        assert traj.format == fmt, name
        assert traj.n_frames == len(images), name
        assert np.array_equal(np.sort(traj.numbers), np.sort(part.numbers)), name
        got = traj.positions_angstrom[-1]
        assert np.allclose(np.ptp(got, axis=0), np.ptp(part.positions_angstrom, axis=0), atol=2e-3), name
    # a POSCAR without its usual name, by --format
    os.rename(tmp_path / "POSCAR", tmp_path / "particle.data")
    assert read_trajectory(tmp_path / "particle.data", fmt="vasp").n_frames == 1


def test_extxyz_multiframe_and_negative_selection(tmp_path: Path) -> None:
    part = _cu3au_particle()
    frames = _noisy_frames(part, 4, 0.01, seed=3)
    path = tmp_path / "md.extxyz"
    write_extxyz(path, [(Particle(part.numbers, f), {"step": k}) for k, f in enumerate(frames)])
    traj = read_trajectory(path, frames=parse_frame_selection("-2:"))
    assert traj.frame_indices.tolist() == [2, 3]
    assert np.allclose(traj.positions_angstrom[1], frames[3], atol=1e-7)
    with pytest.raises(C2NPInputError, match="selects none of its 4 frames"):
        read_trajectory(path, frames=parse_frame_selection("10:"))


def test_average_frames_removes_rigid_motion_and_noise() -> None:
    from scipy.spatial.transform import Rotation

    part = _cu3au_particle()
    rng = np.random.default_rng(4)
    frames = []
    for _ in range(12):
        rot = Rotation.from_rotvec(rng.normal(0, 0.05, 3)).as_matrix()
        frames.append((part.positions_angstrom + rng.normal(0, 0.1, part.positions_angstrom.shape)) @ rot.T
                      + rng.normal(0, 3.0, 3))
    from c2np.trajectory import Trajectory

    traj = Trajectory(Path("x"), "extxyz", part.numbers, np.stack(frames), np.arange(12))
    avg = average_frames(traj)
    mean = avg.particle.positions_angstrom
    ideal = part.positions_angstrom
    # compare shapes: the pairwise distances of the mean are much closer to the ideal than one frame's
    from scipy.spatial.distance import pdist

    err_mean = np.abs(pdist(mean) - pdist(ideal)).mean()
    err_one = np.abs(pdist(frames[0]) - pdist(ideal)).mean()
    assert err_mean < 0.45 * err_one
    assert avg.rms_fluctuation_angstrom == pytest.approx(0.1 * np.sqrt(3 * 11 / 12), rel=0.15)
    assert avg.n_frames == 12


# --- bad input ----------------------------------------------------------------------------------

def test_changing_atom_count_is_refused(tmp_path: Path) -> None:
    part = _cu3au_particle()
    frames = _noisy_frames(part, 2, 0.01, seed=5)
    frames[1] = frames[1][:-1]
    dump = tmp_path / "md.dump"
    lines_a = tmp_path / "a.dump"
    _write_dump(lines_a, frames[:1], _types(part.numbers), shift=20.0)
    b = tmp_path / "b.dump"
    _write_dump(b, frames[1:], _types(part.numbers)[:-1], shift=20.0)
    dump.write_text(lines_a.read_text() + b.read_text())
    with pytest.raises(C2NPInputError, match=rf"md.dump: frame 1: {part.n_atoms - 1} atoms, but frame 0 has "
                                             rf"{part.n_atoms}: .*fixed atom count"):
        read_trajectory(dump, frames=parse_frame_selection("all"), species={1: 29, 2: 79})
    assert read_trajectory(dump, species={1: 29, 2: 79}).n_frames == 1  # the first frame alone is fine


def test_changing_species_order_is_refused(tmp_path: Path) -> None:
    part = _cu3au_particle()
    path = tmp_path / "md.xyz"
    swapped = part.numbers.copy()
    other = int(np.flatnonzero(swapped != swapped[0])[0])
    swapped[[0, other]] = swapped[[other, 0]]
    write_extxyz(path, [(part, {}), (Particle(swapped, part.positions_angstrom), {})])
    with pytest.raises(C2NPInputError, match="frame 1: atom 0 has another element than in frame 0"):
        read_trajectory(path, frames=parse_frame_selection("all"))


def test_bad_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.dump"
    empty.write_text("")
    with pytest.raises(C2NPInputError, match="empty.dump: empty file"):
        read_trajectory(empty)
    with pytest.raises(C2NPInputError, match="not a regular file"):
        read_trajectory(tmp_path)
    with pytest.raises(C2NPInputError, match="no such file"):
        read_trajectory(tmp_path / "missing.dump")
    odd = tmp_path / "notes.qqq"
    odd.write_text("just some words\n")
    with pytest.raises(C2NPInputError, match="notes.qqq: unknown structure format.*--format"):
        read_trajectory(odd)
    with pytest.raises(C2NPInputError, match="--format 'nonsense': not a structure format"):
        read_trajectory(odd, fmt="nonsense")
    with pytest.raises(C2NPInputError, match="--format 'db'"):
        read_trajectory(odd, fmt="db")
    broken = tmp_path / "broken.dump"
    broken.write_text("ITEM: TIMESTEP\n0\nITEM: NUMBER OF ATOMS\n3\nITEM: BOX BOUNDS pp pp pp\n0 10\n0 10\n"
                      "0 10\nITEM: ATOMS id type x y z\n1 1 0 0 0\n2 1 zero 0 0\n")
    with pytest.raises(C2NPInputError, match="broken.dump: frame 0: unreadable as lammps-dump-text"):
        read_trajectory(broken, species={1: 29})
    with pytest.raises(C2NPInputError, match="--species maps LAMMPS type ids"):
        read_trajectory(_xyz(tmp_path), species={1: 29})


def _xyz(tmp_path: Path) -> Path:
    path = tmp_path / "p.xyz"
    write_extxyz(path, [(_cu3au_particle(), {})])
    return path


def test_non_finite_positions(tmp_path: Path) -> None:
    part = _cu3au_particle()
    pos = part.positions_angstrom.copy()
    pos[5, 1] = np.nan
    dump = tmp_path / "nan.dump"
    _write_dump(dump, [pos], _types(part.numbers), shift=20.0, bounds="ff ff ff")
    with pytest.raises(C2NPInputError, match="nan.dump: frame 0: atom 5 has a non-finite position"):
        read_trajectory(dump, species={1: 29, 2: 79})
    xyz = tmp_path / "nan.xyz"
    xyz.write_text(f"{part.n_atoms}\n\n" + "".join(
        f"{'Cu' if z == 29 else 'Au'} {x:.5f} {y:.5f} {zz:.5f}\n" for z, (x, y, zz) in zip(part.numbers, pos)))
    with pytest.raises(C2NPInputError, match="frame 0: atom 5 has a non-finite position"):
        read_trajectory(xyz)


def test_size_limit(tmp_path: Path) -> None:
    path = _xyz(tmp_path)
    with limits.override(trajectory_bytes=100):
        with pytest.raises(C2NPLimitError, match="trajectory_bytes"):
            read_trajectory(path)


# --- the command ---------------------------------------------------------------------------------

def test_cli_frames_json_per_frame_and_averaged(tmp_path: Path) -> None:
    part = _cu3au_particle(8.0)
    dump = tmp_path / "md.lammpstrj"
    _write_dump(dump, _noisy_frames(part, 4, 0.03, seed=6), _types(part.numbers), shift=-3.0)
    runner, app = _runner()
    res = runner.invoke(app, ["identify", str(dump), "--species", "1=Cu,2=Au", "--frames", "0:4:2", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["format"] == "lammps-dump-text" and data["frames"] == [0, 2]
    assert [r["frame"] for r in data["per_frame"]] == [0, 2]
    assert data["averaged"]["n_frames"] == 2
    assert data["averaged"]["spacegroup"] == 221  # L1_2 Cu3Au: Pm-3m
    assert data["averaged"]["a"] == pytest.approx(3.75, abs=0.02)
    assert data["averaged"]["rms_fluctuation_angstrom"] > 0
    text = runner.invoke(app, ["identify", str(dump), "--species", "1=Cu,2=Au", "--frames", "all"])
    assert text.exit_code == 0, text.output
    assert "mean of 4" in text.stdout and "Pm-3m" in text.stdout


def test_cli_bad_inputs_one_line_exit_2(tmp_path: Path) -> None:
    part = _cu3au_particle()
    dump = tmp_path / "md.dump"
    _write_dump(dump, [part.positions_angstrom], _types(part.numbers), shift=20.0)
    runner, app = _runner()
    cases = [
        ["identify", str(dump)],  # type ids without --species
        ["identify", str(dump), "--species", "1=Cu"],
        ["identify", str(dump), "--species", "1=Cu,2=Au", "--frames", "1:0"],
        ["identify", str(dump), "--species", "1=Cu,2=Au", "--frames", "x"],
        ["identify", str(dump), str(dump), "--species", "1=Cu,2=Au"],
        ["identify", str(dump), "--format", "nonsense"],
    ]
    for args in cases:
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), (args, res.output)
        assert "Traceback" not in res.output


def test_frame_selection_record() -> None:
    assert FrameSelection().indices(3) == [0]
    assert parse_frame_selection("0:100:10").describe() == "0:100:10"


def test_cif_and_fifo(tmp_path: Path) -> None:
    from c2np.cells import write_cif

    cell = UnitCell("Cu3Au", np.eye(3) * 3.75, [79, 29, 29, 29],
                    [[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    write_cif(cell, tmp_path / "c.cif")
    traj = read_trajectory(tmp_path / "c.cif", frames=parse_frame_selection("all"))
    assert traj.format == "cif" and traj.n_frames == 1 and sorted(traj.numbers.tolist()) == [29, 29, 29, 79]
    fifo = tmp_path / "pipe.xyz"
    os.mkfifo(fifo)
    with pytest.raises(C2NPInputError, match="pipe.xyz: not a regular file"):
        read_trajectory(fifo)  # refused from its metadata: never opened, never blocks


def test_cli_single_frame_of_other_formats(tmp_path: Path) -> None:
    from ase import Atoms
    from ase.io import write

    part = _cu3au_particle(8.0)
    atoms = Atoms(numbers=part.numbers, positions=part.positions_angstrom + 15.0, cell=np.eye(3) * 30.0, pbc=True)
    write(tmp_path / "CONTCAR", atoms, format="vasp")
    runner, app = _runner()
    res = runner.invoke(app, ["identify", str(tmp_path / "CONTCAR"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["spacegroup"] == 221
    os.rename(tmp_path / "CONTCAR", tmp_path / "cluster.txt")
    res = runner.invoke(app, ["identify", str(tmp_path / "cluster.txt"), "--format", "vasp", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["spacegroup"] == 221
