"""``c2np identify`` on a corpus that no one here wrote, side by side with OVITO's PTM.

The corpus (cached in ``--corpus-dir``; every random choice is seeded, so a rerun rebuilds
the same files and reuses those already there):

(a) *Public crystals*: PyXtal random crystals (pip ``pyxtal``), one per space group 1-230
    and more drawn at random, 2-3 elements, 4-24 atoms per conventional cell; the expected
    answer is spglib's space group of the generated cell at 10^-3 Å. Each is carved with
    ``c2np.carving.carve`` at R = 12 and 20 Å about a random centre, in a random orientation.
(b) *EMT particles*: fcc Cu, Au, Al, Ni, Pt and the ordered alloys Cu3Au (L1_2) and CuAu
    (L1_0), carved at R = 8, 12, 16 Å and relaxed with ASE's EMT calculator (L-BFGS,
    fmax 0.05 eV/Å); variants: ``relaxed``; ``md300`` / ``md600``: Langevin MD (5 fs steps,
    friction 0.05/fs, from Maxwell-Boltzmann velocities) snapshots at 0.30, 0.35 and 0.40 ps;
    ``md300-avg`` / ``md600-avg``: the time average of 21 frames from 0.30 to 0.70 ps
    (:func:`c2np.trajectory.average_frames`, as ``identify --frames`` does); ``vacancies``:
    20 % of the relaxed particle's atoms removed; ``antisites`` (alloys): 10 % of the Cu/Au
    pairs swapped (composition kept); ``noise``: Gaussian noise of 0.2 Å per coordinate on the
    ideal carving. The expected answer is the ordered group (225, 221, 123) and the lattice is
    compared with the particle's own mean lattice: the affine map that best takes the ideal
    carving onto the particle (least squares over its atoms), applied to the ideal cell.
(c) *Non-crystalline clusters* (``ase.cluster``): Icosahedron, Decahedron (five-fold
    twinned) and amorphous (random dense packing relaxed with EMT) of Cu, Au, Pt at about the
    same radii. The right answer is no space group (exit 1).

For each particle it records identify's answer through the public API (``read_particle`` +
``solve_particle``; a refusal or a crash is a miss, never dropped) and, when ``ovito`` is
installed (optional; ``pip install -e ".[bench]"`` installs PyXtal and OVITO), Polyhedral
Template Matching on the same file:
the majority structure type of the atoms (fcc/hcp/bcc/ico) and, for alloys, the majority
ordering among the fcc atoms (L1_2 / L1_0). Printed: recognition per variant and radius
(identify | PTM), the calibration table (confidence bins against observed accuracy, expected
calibration error), wrong answers at confidence >= 0.9, lattice error against the particle's
own lattice, refusals by reason and time per particle. The results file (JSON) and the
docs page with its calibration plot are generated from it (``--page-only`` regenerates the
page from the results file).

Usage::

    PYTHONPATH=src nice -n 10 python benchmarks/identify.py --corpus-dir .cache/identify-corpus
    PYTHONPATH=src python benchmarks/identify.py --quick --corpus-dir /tmp/idq --results /tmp/idq.json --page ''
    PYTHONPATH=src python benchmarks/identify.py --page-only
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = "c2np.identify-benchmark/1"
CONF_BINS = np.linspace(0.0, 1.0, 11)
HIGH_CONFIDENCE = 0.9
MD_STEP_FS = 5.0
MD_FRICTION_PER_FS = 0.05
MD_END_STEP = 140  # 0.70 ps: the end of the averaging window

#: material -> (conventional cell builder args): elements by basis site, cubic a (Å), c/a, expected group
ALLOYS: dict[str, tuple[tuple[str, ...], float, float, int, str | None]] = {
    "Cu": (("Cu", "Cu", "Cu", "Cu"), 3.61, 1.0, 225, None),
    "Au": (("Au", "Au", "Au", "Au"), 4.08, 1.0, 225, None),
    "Al": (("Al", "Al", "Al", "Al"), 4.05, 1.0, 225, None),
    "Ni": (("Ni", "Ni", "Ni", "Ni"), 3.52, 1.0, 225, None),
    "Pt": (("Pt", "Pt", "Pt", "Pt"), 3.92, 1.0, 225, None),
    "Cu3Au": (("Au", "Cu", "Cu", "Cu"), 3.75, 1.0, 221, "L12"),
    "CuAu": (("Cu", "Cu", "Au", "Au"), 3.96, 0.93, 123, "L10"),  # Cu on the z = 0 layer, Au on z = 1/2
}
#: the standardized conventional cell of each material's space group, as rows of its fcc-like cell
#: (L1_0 CuAu: P4/mmm has the primitive tetragonal cell, a' = a / sqrt 2)
STANDARD_ROWS = {"CuAu": np.array([[0.5, 0.5, 0.0], [-0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])}
FCC_BASIS = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
CRYSTAL_ELEMENTS = ("Li", "B", "C", "N", "O", "F", "Na", "Mg", "Al", "Si", "P", "S", "Cl", "K", "Ca", "Ti",
                    "V", "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "Ga", "Ge", "Sr", "Y", "Zr", "Nb", "Mo", "Sn",
                    "Ba", "La", "W")


@dataclass(frozen=True)
class Size:
    """How much of the corpus to build and run."""

    n_crystals: int
    crystal_radii: tuple[float, ...]
    materials: tuple[str, ...]
    particle_radii: tuple[float, ...]
    md_radii: tuple[float, ...]
    cluster_elements: tuple[str, ...]


FULL = Size(310, (12.0, 20.0), tuple(ALLOYS), (8.0, 12.0, 16.0), (8.0, 12.0, 16.0), ("Cu", "Au", "Pt"))
QUICK = Size(24, (12.0, 20.0), ("Cu", "Cu3Au", "CuAu"), (8.0, 12.0), (8.0,), ("Cu",))


@dataclass(frozen=True)
class Sample:
    """One particle file of the corpus and what identify should answer.

    ``expected_spacegroup`` None: a non-crystalline cluster (the right answer is no space
    group). ``own_abc_angstrom``: the particle's own conventional lattice lengths (sorted).
    """

    id: str
    group: str  # crystal | particle | cluster
    material: str
    variant: str
    radius_angstrom: float
    file: str  # relative to the corpus folder
    n_atoms: int
    expected_spacegroup: int | None
    own_abc_angstrom: tuple[float, ...] | None
    ptm_structure: str | None  # expected PTM structure type (FCC) or None
    ptm_ordering: str | None  # L12 / L10 / None


def _seed(*parts: object) -> int:
    return zlib.crc32("/".join(str(p) for p in parts).encode())


def _random_rotation(rng: np.random.Generator) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    return np.asarray(Rotation.random(random_state=int(rng.integers(1 << 31))).as_matrix())


def _write_particle(corpus: Path, name: str, numbers: np.ndarray, positions: np.ndarray) -> str:
    from c2np.particle import Particle
    from c2np.particle_io import write_extxyz

    path = corpus / f"{name}.extxyz"
    write_extxyz(path, [(Particle(np.asarray(numbers), np.asarray(positions, dtype=float)), {})])
    return path.name


# --- (a) public crystals ---------------------------------------------------------------------

def _pyxtal_cell(sg: int, rng: np.random.Generator) -> Any:
    """A random PyXtal crystal of space group ``sg`` as a UnitCell, or None after 20 tries."""
    from pyxtal import pyxtal
    from pyxtal.symmetry import Group

    from c2np.cells import UnitCell

    mults = sorted({w.multiplicity for w in Group(sg).Wyckoff_positions})
    for _ in range(20):
        n_species = int(rng.integers(2, 4))
        species = [str(s) for s in rng.choice(CRYSTAL_ELEMENTS, n_species, replace=False)]
        repeat = max(1, 8 // mults[0])  # groups with small orbits: several orbits of one element
        counts = [int(rng.choice(mults[:3])) * int(rng.integers(1, repeat + 1)) for _ in species]
        if not 4 <= sum(counts) <= 24:
            continue
        crystal = pyxtal()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                crystal.from_random(3, sg, species, counts, random_state=int(rng.integers(1 << 30)))
        except Exception:  # PyXtal raises several types when a composition does not fit
            continue
        if crystal.valid:
            return UnitCell.from_ase(crystal.to_ase(), f"pyxtal-{sg}")
    return None


def _crystal_groups(n: int) -> list[int]:
    """Space groups of the ``n`` crystals: 1..230 once each, then drawn at random (seeded);
    fewer than 230: spread evenly over 1..230."""
    if n < 230:
        return [int(g) for g in np.linspace(1, 230, n).round()]
    rng = np.random.default_rng(_seed("crystal-groups"))
    return list(range(1, 231)) + [int(g) for g in rng.integers(1, 231, n - 230)]


def _build_crystal(corpus: Path, k: int, sg: int, radii: tuple[float, ...]) -> list[dict[str, Any]]:
    """The carvings of crystal ``k`` (cached with their expected answer in a small index file)."""
    from c2np.carving import carve
    from c2np.cells import standardize
    from c2np.errors import C2NPInputError
    from c2np.fileio import write_text

    index = corpus / f"crystal-{k:03d}-sg{sg}.json"
    if index.is_file():
        return list(json.loads(index.read_text()))
    rng = np.random.default_rng(_seed("crystal", k, sg))
    cell = _pyxtal_cell(sg, rng)
    entries: list[dict[str, Any]] = []
    if cell is not None:
        try:
            std = standardize(cell)
        except C2NPInputError:
            std = None
        for radius in radii if std is not None else ():
            name = f"crystal-{k:03d}-sg{sg}-R{radius:g}"
            part = carve(cell, radius, quaternion=_unit_quaternion(rng), centre_frac=rng.uniform(0, 1, 3)).particle
            _write_particle(corpus, name, part.numbers, part.positions_angstrom)
            entries.append({"file": f"{name}.extxyz", "radius": radius, "n_atoms": part.n_atoms,
                            "material": f"{cell.material_id}-{k:03d}", "spacegroup": int(std.spacegroup),
                            "abc": sorted(std.parameters.as_array()[:3].tolist())})
    write_text(index, json.dumps(entries))  # an empty list: PyXtal found no crystal (not retried)
    return entries


def build_crystals(corpus: Path, size: Size, progress: Callable[[Iterable[Any]], Iterable[Any]]) -> list[Sample]:
    """The PyXtal crystals carved at each radius (cached files are reused)."""
    out: list[Sample] = []
    for k, sg in enumerate(progress(_crystal_groups(size.n_crystals))):
        for e in _build_crystal(corpus, k, sg, size.crystal_radii):
            out.append(Sample(Path(e["file"]).stem, "crystal", e["material"], "crystal", float(e["radius"]),
                              e["file"], int(e["n_atoms"]), int(e["spacegroup"]), tuple(e["abc"]), None, None))
    return out


def _unit_quaternion(rng: np.random.Generator) -> tuple[float, float, float, float]:
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    return (float(q[0]), float(q[1]), float(q[2]), float(q[3]))


# --- (b) EMT particles -----------------------------------------------------------------------

def _alloy_cell(material: str) -> tuple[Any, np.ndarray]:
    """(UnitCell, conventional lattice rows) of an fcc metal or ordered alloy."""
    from ase.data import atomic_numbers

    from c2np.cells import UnitCell

    symbols, a, c_over_a, _, _ = ALLOYS[material]
    lattice = np.diag([a, a, a * c_over_a])
    return UnitCell(material, lattice, [atomic_numbers[s] for s in symbols], FCC_BASIS), lattice


def own_lattice(ideal: np.ndarray, positions: np.ndarray, lattice_rows: np.ndarray) -> np.ndarray:
    """(3, 3) ``lattice_rows`` under the affine map that best takes the ideal positions (n, 3)
    onto the particle's (least squares): the particle's own mean lattice (Å, rows)."""
    x0 = ideal - ideal.mean(axis=0)
    x = positions - positions.mean(axis=0)
    m, *_ = np.linalg.lstsq(x0, x, rcond=None)
    return np.asarray(lattice_rows @ m)


def standard_abc(material: str, rows: np.ndarray) -> tuple[float, ...]:
    """Sorted a, b, c (Å) of the standardized conventional cell of the material's group."""
    std = STANDARD_ROWS.get(material, np.eye(3)) @ np.asarray(rows)
    return tuple(sorted(np.linalg.norm(std, axis=1).tolist()))


def _emt_atoms(numbers: np.ndarray, positions: np.ndarray) -> Any:
    from ase import Atoms
    from ase.calculators.emt import EMT

    atoms = Atoms(numbers=numbers, positions=positions)
    atoms.calc = EMT()
    return atoms


def _relax(atoms: Any, *, steps: int = 300) -> None:
    from ase.optimize import LBFGS

    LBFGS(atoms, logfile=None).run(fmax=0.05, steps=steps)


def _md_frames(atoms: Any, temperature_k: float, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Langevin MD from ``atoms``: (snapshots at 0.30, 0.35, 0.40 ps, the mean of 21 frames 20 fs
    apart from 0.30 to 0.70 ps: a few periods of the atoms' vibrations, so that it averages)."""
    from ase import units
    from ase.md.langevin import Langevin
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution, Stationary, ZeroRotation

    from c2np.trajectory import Trajectory, average_frames

    md = atoms.copy()
    md.calc = atoms.calc
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():  # ASE 3.29 renames it; the older name works across our range
        warnings.simplefilter("ignore", DeprecationWarning)
        MaxwellBoltzmannDistribution(md, temperature_K=temperature_k, rng=rng)
    Stationary(md)
    ZeroRotation(md)
    dyn = Langevin(md, MD_STEP_FS * units.fs, temperature_K=temperature_k, friction=MD_FRICTION_PER_FS / units.fs,
                   fixcm=False, rng=rng)
    frames: list[np.ndarray] = []
    snaps: list[np.ndarray] = []
    for step in range(0, MD_END_STEP + 1, 2):  # 10 fs apart
        if step:
            dyn.run(2)
        if step in (60, 70, 80):
            snaps.append(md.positions.copy())
        if step >= 60 and step % 4 == 0:
            frames.append(md.positions.copy())
    traj = Trajectory(Path("md"), "md", md.numbers, np.stack(frames), np.arange(len(frames)))
    return snaps, average_frames(traj).particle.positions_angstrom


def _particle_variants(material: str, radius: float,
                       md: bool) -> tuple[np.ndarray, list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]]:
    """(the conventional lattice rows in the particle's frame, [(variant, numbers, positions,
    ideal positions of the same atoms)]) of one material and radius."""
    from c2np.carving import carve

    cell, lattice = _alloy_cell(material)
    rng = np.random.default_rng(_seed("particle", material, radius))
    rot = _random_rotation(rng)
    part = carve(cell, radius).particle
    numbers = part.numbers
    ideal = part.positions_angstrom @ rot.T
    out = [("noise", numbers, ideal + rng.normal(0, 0.2, ideal.shape), ideal)]
    atoms = _emt_atoms(numbers, ideal)
    _relax(atoms)
    relaxed = atoms.positions.copy()
    out.append(("relaxed", numbers, relaxed, ideal))
    keep = np.sort(rng.choice(len(numbers), int(round(0.8 * len(numbers))), replace=False))
    out.append(("vacancies", numbers[keep], relaxed[keep], ideal[keep]))
    if ALLOYS[material][4] is not None:
        cu, au = np.flatnonzero(numbers == 29), np.flatnonzero(numbers == 79)
        k = int(round(0.1 * min(len(cu), len(au))))
        swapped = numbers.copy()
        i, j = rng.choice(cu, k, replace=False), rng.choice(au, k, replace=False)
        swapped[i], swapped[j] = 79, 29
        out.append(("antisites", swapped, relaxed, ideal))
    if md:
        for temp in (300, 600):
            snaps, mean = _md_frames(atoms, temp, _seed("md", material, radius, temp))
            out += [(f"md{temp}-{t}", numbers, s, ideal) for t, s in zip(("0.30ps", "0.35ps", "0.40ps"), snaps)]
            out.append((f"md{temp}-avg", numbers, mean, ideal))
    return lattice @ rot.T, out


def _build_particle_job(_: Any, job: tuple[str, str, float, bool]) -> list[dict[str, Any]]:
    """Worker side: the files of one material and radius (reused when its index is there)."""
    from c2np.fileio import write_text

    corpus, material, radius, md = Path(job[0]), job[1], job[2], job[3]
    index = corpus / f"particle-{material}-R{radius:g}{f'-md{MD_END_STEP}' if md else ''}.json"
    if index.is_file():
        return list(json.loads(index.read_text()))
    lattice, variants = _particle_variants(material, radius, md)
    entries = []
    for variant, numbers, pos, ideal in variants:
        name = f"particle-{material}-R{radius:g}-{variant}"
        _write_particle(corpus, name, numbers, pos)
        entries.append({"variant": variant, "file": f"{name}.extxyz", "n_atoms": int(len(numbers)),
                        "own_lattice": own_lattice(ideal, pos, lattice).tolist()})
    write_text(index, json.dumps(entries))
    return entries


def build_particles(corpus: Path, size: Size, workers: int) -> list[Sample]:
    """The EMT particles, one job per material and radius on ``workers`` processes."""
    from tqdm import tqdm

    from c2np.executor import LocalExecutor

    jobs = [(str(corpus), m, r, r in size.md_radii) for r in size.particle_radii for m in size.materials]
    out: list[Sample] = []
    with LocalExecutor(workers) as ex:
        results = list(tqdm(ex.map(_build_particle_job, jobs), total=len(jobs), desc="EMT particles",
                            file=sys.stderr, leave=False))
    for (_, material, radius, _), part in zip(jobs, results):
        _, _, _, sg, ordering = ALLOYS[material]
        for e in part[0]:
            abc = standard_abc(material, np.array(e["own_lattice"]))
            out.append(Sample(Path(e["file"]).stem, "particle", material, _variant_family(e["variant"]), radius,
                              e["file"], int(e["n_atoms"]), sg, abc, "FCC", ordering))
    return out


def _variant_family(variant: str) -> str:
    """md300-0.4ps -> md300 (snapshots of one temperature are one variant)."""
    return variant.rsplit("-", 1)[0] if variant.endswith("ps") else variant


# --- (c) non-crystalline clusters -------------------------------------------------------------

def _amorphous(symbol: str, radius: float, rng: np.random.Generator) -> np.ndarray:
    """Random dense packing in a sphere (minimum distance 0.8 x the fcc neighbour distance)."""
    _, a, _, _, _ = ALLOYS[symbol]
    d_min = 0.8 * a / math.sqrt(2)
    n_target = int(4 / a**3 * 4 / 3 * math.pi * radius**3 * 0.9)
    pts: list[np.ndarray] = []
    while len(pts) < n_target:
        cand = rng.uniform(-radius, radius, (4000, 3))
        cand = cand[np.linalg.norm(cand, axis=1) <= radius]
        for c in cand:
            if len(pts) >= n_target:
                break
            if not pts or np.min(np.linalg.norm(np.asarray(pts) - c, axis=1)) >= d_min:
                pts.append(c)
        d_min *= 0.97  # jammed: loosen slowly
    return np.asarray(pts)


CLUSTER_KINDS = ("icosahedron", "decahedron", "amorphous")


def _cluster_positions(kind: str, symbol: str, radius: float) -> np.ndarray:
    """(n, 3) ideal positions of a cluster of about ``radius`` (Å)."""
    from ase.cluster import Decahedron, Icosahedron

    a = ALLOYS[symbol][1]
    n_shell = max(2, int(round(radius / (a / math.sqrt(2)))) + 1)  # shells of one neighbour distance
    if kind == "icosahedron":
        return np.asarray(Icosahedron(symbol, n_shell, latticeconstant=a).positions)
    if kind == "decahedron":
        return np.asarray(Decahedron(symbol, n_shell, n_shell - 1, 0, latticeconstant=a).positions)
    return _amorphous(symbol, radius, np.random.default_rng(_seed("amorphous", symbol, radius)))


def _build_cluster_job(_: Any, job: tuple[str, str, str, float]) -> int:
    """Worker side: one cluster relaxed with EMT (40 L-BFGS steps); its atom count."""
    from ase.data import atomic_numbers

    from c2np.particle_io import read_particle

    corpus, kind, symbol, radius = Path(job[0]), job[1], job[2], job[3]
    path = corpus / f"cluster-{symbol}-R{radius:g}-{kind}.extxyz"
    if not path.is_file():
        pos = _cluster_positions(kind, symbol, radius)
        atoms = _emt_atoms(np.full(len(pos), atomic_numbers[symbol]), pos)
        _relax(atoms, steps=40)
        _write_particle(corpus, path.stem, atoms.numbers, atoms.positions)
    return read_particle(path).n_atoms


def build_clusters(corpus: Path, size: Size, workers: int) -> list[Sample]:
    """Icosahedra, decahedra and amorphous clusters, relaxed with EMT."""
    from tqdm import tqdm

    from c2np.executor import LocalExecutor

    jobs = [(str(corpus), k, s, r) for s in size.cluster_elements for r in size.particle_radii for k in CLUSTER_KINDS]
    with LocalExecutor(workers) as ex:
        counts = list(tqdm(ex.map(_build_cluster_job, jobs), total=len(jobs), desc="clusters", file=sys.stderr,
                           leave=False))
    return [Sample(f"cluster-{s}-R{r:g}-{k}", "cluster", s, k, r, f"cluster-{s}-R{r:g}-{k}.extxyz", n[0], None, None,
                   None, None) for (_, k, s, r), n in zip(jobs, counts)]


# --- measurement -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """identify (and PTM) on one sample."""

    answered: bool
    spacegroup: int | None
    confidence: float | None
    abc_angstrom: tuple[float, ...] | None
    seconds: float
    kind: str  # answer | no answer | bad input | crash
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # optional result fields (e.g. a degree of order)
    ptm: dict[str, Any] | None = None


#: result fields kept from ``SolverResult.to_dict`` beyond the standard ones, when the solver gives them
_STANDARD_KEYS = {"a", "b", "c", "alpha", "beta", "gamma", "spacegroup", "confidence", "international",
                  "crystal_system", "symprec_angstrom", "n_atoms", "primitive_lattice_angstrom", "cell",
                  "diagnostics"}


def _identify(path: Path) -> Outcome:
    from c2np.errors import C2NPInputError, C2NPNoAnswerError
    from c2np.particle_io import read_particle
    from c2np.solver import solve_particle

    particle = read_particle(path)
    t0 = time.perf_counter()
    try:
        result = solve_particle(particle)
    except C2NPInputError as exc:
        kind = "no answer" if isinstance(exc, C2NPNoAnswerError) else "bad input"
        return Outcome(False, None, None, None, time.perf_counter() - t0, kind, str(exc))
    except Exception as exc:  # a crash is recorded as a miss with its message, never dropped
        return Outcome(False, None, None, None, time.perf_counter() - t0, "crash", f"{type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - t0
    data = result.to_dict()
    extra = {k: v for k, v in data.items() if k not in _STANDARD_KEYS and _jsonable(v)}
    lat = result.lattice
    return Outcome(True, int(result.spacegroup), float(result.confidence),
                   tuple(sorted([lat.a_angstrom, lat.b_angstrom, lat.c_angstrom])), seconds, "answer", extra=extra)


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _ptm(path: Path) -> dict[str, Any]:
    """OVITO PTM on one file: the most common structure type among the atoms PTM assigns (OTHER
    when it assigns none; surface atoms, with no full neighbour shell, are never assigned), its
    share of the assigned atoms, and the most common ordering among the fcc atoms that have one."""
    from ovito.io import import_file
    from ovito.modifiers import PolyhedralTemplateMatchingModifier as PTM

    pipeline = import_file(str(path))
    pipeline.modifiers.append(PTM(output_ordering=True))
    t0 = time.perf_counter()
    data = pipeline.compute()
    seconds = time.perf_counter() - t0
    types = np.asarray(data.particles["Structure Type"])
    names = {int(v): k for k, v in PTM.Type.__members__.items()}
    assigned = types[types != int(PTM.Type.OTHER)]
    structure, share = "OTHER", 0.0
    if len(assigned):
        value, n = Counter(assigned.tolist()).most_common(1)[0]
        structure, share = names[int(value)], n / len(assigned)
    ordering = None
    if "Ordering Type" in data.particles:
        order_names = {int(v): k for k, v in PTM.OrderingType.__members__.items()}
        fcc = types == int(PTM.Type.FCC)
        orders = Counter(np.asarray(data.particles["Ordering Type"])[fcc].tolist())
        orders.pop(int(PTM.OrderingType.NONE), None)  # atoms whose shell matches no ordering (e.g. an antisite)
        if orders:
            ordering = order_names[int(orders.most_common(1)[0][0])]
    return {"structure": structure, "share": share, "assigned": len(assigned) / len(types), "ordering": ordering,
            "seconds": seconds}


def _measure(corpus: Path, sample: Sample, use_ptm: bool) -> Outcome:
    path = corpus / sample.file
    out = _identify(path)
    if use_ptm and sample.group != "crystal":
        out = Outcome(**{**asdict(out), "ptm": _ptm(path)})
    return out


def _measure_job(ctx: Any, job: tuple[str, dict[str, Any], bool]) -> dict[str, Any]:
    corpus, sample, use_ptm = job
    return asdict(_measure(Path(corpus), Sample(**sample), use_ptm))


# --- scoring ---------------------------------------------------------------------------------------

def identify_right(sample: dict[str, Any], outcome: dict[str, Any]) -> bool:
    """A crystal or particle: the expected space group; a cluster: no space group."""
    if sample["expected_spacegroup"] is None:
        return outcome["kind"] == "no answer"
    return bool(outcome["answered"] and outcome["spacegroup"] == sample["expected_spacegroup"])


def ptm_right(sample: dict[str, Any], ptm: dict[str, Any] | None) -> bool | None:
    """PTM recognises the particle's structure (and ordering); on a cluster, PTM is right when
    its majority type is no crystal structure (ico or other). None: not applicable."""
    if ptm is None or sample["group"] == "crystal":
        return None
    if sample["group"] == "cluster":
        return ptm["structure"] not in ("FCC", "HCP", "BCC")
    if ptm["structure"] != sample["ptm_structure"]:
        return False
    want = sample["ptm_ordering"]
    return want is None or (ptm["ordering"] or "").startswith(want)


def lattice_error(sample: dict[str, Any], outcome: dict[str, Any]) -> float | None:
    """Largest relative error of the sorted a, b, c against the particle's own lattice."""
    if not outcome["answered"] or sample["own_abc_angstrom"] is None:
        return None
    found = np.asarray(outcome["abc_angstrom"])
    own = np.asarray(sample["own_abc_angstrom"])
    return float(np.max(np.abs(found - own) / own))


def refusal_reason(outcome: dict[str, Any]) -> str:
    """The refusal's first clause, without numbers (a reason to count)."""
    import re

    text = re.sub(r"^(.*?\.extxyz: )?(solver input: )?", "", outcome["reason"])
    head = re.split(r"[:(;]", text, maxsplit=1)[0].strip()
    head = re.sub(r"[-+]?\d[\d.,eE-]*", "N", head)
    return f"{outcome['kind']}: {head[:90]}"


def calibration(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Reliability table over answered rows: per confidence bin the count, mean confidence and
    observed accuracy; expected calibration error (weighted mean |accuracy - confidence|)."""
    answered = [r for r in rows if r["outcome"]["answered"]]
    conf = np.array([r["outcome"]["confidence"] for r in answered], dtype=float)
    right = np.array([r["right"] for r in answered], dtype=float)
    bins = []
    ece = 0.0
    for lo, hi in zip(CONF_BINS[:-1], CONF_BINS[1:]):
        m = (conf >= lo) & ((conf < hi) if hi < 1.0 else (conf <= hi))
        if not m.any():
            bins.append({"lo": float(lo), "hi": float(hi), "n": 0, "confidence": None, "accuracy": None})
            continue
        acc, mc = float(right[m].mean()), float(conf[m].mean())
        ece += m.sum() / max(len(conf), 1) * abs(acc - mc)
        bins.append({"lo": float(lo), "hi": float(hi), "n": int(m.sum()), "confidence": mc, "accuracy": acc})
    return {"n_answered": len(answered), "ece": float(ece) if len(conf) else None, "bins": bins}


#: variant -> the share of particles at R >= 12 Å to answer right (the targets of the benchmark)
PARTICLE_TARGETS = {"relaxed": 1.0, "md300": 0.95, "md600": 0.90, "vacancies": 0.90, "antisites": 0.90}
TARGET_RADIUS_ANGSTROM = 12.0


def targets(rows: list[dict[str, Any]], cal: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target: what, the measured value, the goal, met or not."""
    out: list[dict[str, Any]] = []

    def add(what: str, value: float | None, goal: str, met: bool) -> None:
        out.append({"target": what, "value": value, "goal": goal, "met": bool(met)})

    crystals = [r for r in rows if r["sample"]["group"] == "crystal"]
    if crystals:
        acc = sum(r["right"] for r in crystals) / len(crystals)
        add("public crystals: exact space group", acc, ">= 0.97", acc >= 0.97)
    big = [r for r in rows if r["sample"]["group"] == "particle"
           and r["sample"]["radius_angstrom"] >= TARGET_RADIUS_ANGSTROM]
    for variant, goal in PARTICLE_TARGETS.items():
        rs = [r for r in big if r["sample"]["variant"] == variant]
        if rs:
            acc = sum(r["right"] for r in rs) / len(rs)
            add(f"particles R >= {TARGET_RADIUS_ANGSTROM:g} Å, {variant}: right space group", acc, f">= {goal:g}",
                acc >= goal)
    for variant in sorted({r["sample"]["variant"] for r in big}):
        rs = [r for r in big if r["sample"]["variant"] == variant and r["ptm_right"] is not None]
        if rs:
            ours, theirs = sum(r["right"] for r in rs) / len(rs), sum(r["ptm_right"] for r in rs) / len(rs)
            add(f"particles R >= {TARGET_RADIUS_ANGSTROM:g} Å, {variant}: at least PTM's rate ({theirs:.2f})", ours,
                f">= {theirs:.2f}", ours >= theirs)
    clusters = [r for r in rows if r["sample"]["group"] == "cluster"]
    if clusters:
        given = sum(r["outcome"]["answered"] for r in clusters)
        add("non-crystalline clusters: space groups given", given, "0", given == 0)
    wrong = sum(1 for r in rows if r["outcome"]["answered"] and not r["right"]
                and r["outcome"]["confidence"] >= HIGH_CONFIDENCE)
    add(f"wrong answers at confidence >= {HIGH_CONFIDENCE}", wrong, "0", wrong == 0)
    if cal["ece"] is not None:
        add("expected calibration error", cal["ece"], "<= 0.05", cal["ece"] <= 0.05)
    errs = [r["lattice_error"] for r in big if r["right"] and r["lattice_error"] is not None]
    if errs:
        med = float(np.median(errs))
        add(f"particles R >= {TARGET_RADIUS_ANGSTROM:g} Å: median lattice error against their own lattice", med,
            "<= 0.003", med <= 0.003)
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Every table of the page from the per-sample rows."""
    recog: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        s = r["sample"]
        cells[(s["variant"], f"{s['radius_angstrom']:g}")].append(r)
    for (variant, radius), rs in sorted(cells.items()):
        ptm = [r["ptm_right"] for r in rs if r["ptm_right"] is not None]
        recog[variant][radius] = {"n": len(rs), "identify": sum(r["right"] for r in rs),
                                  "ptm": sum(ptm) if ptm else None, "ptm_n": len(ptm)}
    lat: dict[str, dict[str, Any]] = {}
    by_variant: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r["right"] and r["lattice_error"] is not None:
            by_variant[r["sample"]["variant"]].append(r["lattice_error"])
    for v, errs in sorted(by_variant.items()):
        lat[v] = {"n": len(errs), "median": float(np.median(errs)), "p90": float(np.percentile(errs, 90))}
    wrong_high = [{"id": r["sample"]["id"], "expected": r["sample"]["expected_spacegroup"],
                   "found": r["outcome"]["spacegroup"], "confidence": r["outcome"]["confidence"]}
                  for r in rows if r["outcome"]["answered"] and not r["right"]
                  and r["outcome"]["confidence"] >= HIGH_CONFIDENCE]
    refusals = Counter(refusal_reason(r["outcome"]) for r in rows if not r["outcome"]["answered"])
    times: dict[str, dict[str, Any]] = {}
    for group in ("crystal", "particle", "cluster"):
        t = [r["outcome"]["seconds"] for r in rows if r["sample"]["group"] == group]
        p = [r["outcome"]["ptm"]["seconds"] for r in rows if r["sample"]["group"] == group and r["outcome"]["ptm"]]
        if t:
            times[group] = {"n": len(t), "median_s": float(np.median(t)), "p90_s": float(np.percentile(t, 90)),
                            "ptm_median_s": float(np.median(p)) if p else None}
    extra_keys = sorted({k for r in rows for k in r["outcome"]["extra"]})
    cal = calibration(rows)
    return {"recognition": recog, "calibration": cal, "targets": targets(rows, cal), "lattice_error": lat,
            "wrong_high_confidence": wrong_high, "refusals": dict(refusals.most_common()), "time": times,
            "optional_result_fields": extra_keys,
            "totals": {g: {"n": sum(1 for r in rows if r["sample"]["group"] == g),
                           "right": sum(r["right"] for r in rows if r["sample"]["group"] == g),
                           "crashes": sum(r["outcome"]["kind"] == "crash" for r in rows
                                          if r["sample"]["group"] == g)}
                       for g in ("crystal", "particle", "cluster")}}


# --- tables, page and plot --------------------------------------------------------------------------

VARIANT_ORDER = ("crystal", "relaxed", "md300", "md300-avg", "md600", "md600-avg", "vacancies", "antisites",
                 "noise", "icosahedron", "decahedron", "amorphous")


def _frac(k: int | None, n: int) -> str:
    return "—" if k is None or n == 0 else f"{k}/{n} ({k / n:.0%})"


def markdown_tables(results: dict[str, Any]) -> str:
    """The page body (Markdown tables) from a results document."""
    s = results["summary"]
    radii = sorted({r for v in s["recognition"].values() for r in v}, key=float)
    ptm_note = "" if results["ptm"] else " (OVITO not installed: no PTM column)"
    lines = ["## Targets", "", "| target | measured | goal | met |", "|---|---:|---:|---|"]
    for t in s.get("targets", []):
        v = t["value"]
        shown = f"{v:.4f}" if isinstance(v, float) else str(v)
        lines.append(f"| {t['target']} | {shown} | {t['goal']} | {'yes' if t['met'] else '**no**'} |")
    lines += ["", f"## Recognition per variant and radius{ptm_note}", "",
             "Right: the expected space group (crystals and particles); no space group (clusters). "
             "Each cell: identify | PTM (majority structure type, and ordering for the alloys).", "",
             "| variant | " + " | ".join(f"R = {r} Å" for r in radii) + " |",
             "|---|" + "---|" * len(radii)]
    for v in sorted(s["recognition"], key=lambda x: VARIANT_ORDER.index(x) if x in VARIANT_ORDER else 99):
        row = [v]
        for r in radii:
            c = s["recognition"][v].get(r)
            row.append("" if c is None else f"{_frac(c['identify'], c['n'])} \\| {_frac(c['ptm'], c['ptm_n'])}")
        lines.append("| " + " | ".join(row) + " |")
    cal = s["calibration"]
    ece = "—" if cal["ece"] is None else f"{cal['ece']:.3f}"
    lines += ["", "## Calibration", "", f"{cal['n_answered']} answers; expected calibration error **{ece}**.",
              "", "| confidence | answers | mean confidence | accuracy |", "|---|---:|---:|---:|"]
    for b in cal["bins"]:
        mc = "" if b["confidence"] is None else f"{b['confidence']:.3f}"
        acc = "" if b["accuracy"] is None else f"{b['accuracy']:.3f}"
        lines.append(f"| {b['lo']:.1f}–{b['hi']:.1f} | {b['n']} | {mc} | {acc} |")
    lines += ["", "![Calibration of identify's confidence](identify_calibration.png)", "",
              f"## Wrong answers at confidence ≥ {HIGH_CONFIDENCE}", ""]
    wrong = s["wrong_high_confidence"]
    if wrong:
        lines += [f"{len(wrong)} wrong answers.", "", "| particle | expected | found | confidence |",
                  "|---|---:|---:|---:|"]
        lines += [f"| {w['id']} | {w['expected'] if w['expected'] is not None else 'none'} | {w['found']} | "
                  f"{w['confidence']:.3f} |" for w in wrong[:40]]
    else:
        lines.append("None.")
    lines += ["", "## Lattice error against the particle's own lattice", "",
              "Largest relative error of the sorted a, b, c, over right answers.", "",
              "| variant | answers | median | 90th percentile |", "|---|---:|---:|---:|"]
    for v, e in s["lattice_error"].items():
        lines.append(f"| {v} | {e['n']} | {e['median']:.3%} | {e['p90']:.3%} |")
    lines += ["", "## Refusals by reason", "", "| reason | count |", "|---|---:|"]
    lines += [f"| {reason.replace('|', '/')} | {n} |" for reason, n in s["refusals"].items()] or ["| none | 0 |"]
    lines += ["", "## Time per particle", "", "| group | particles | identify median (s) | identify p90 (s) | "
              "PTM median (s) |", "|---|---:|---:|---:|---:|"]
    for g, t in s["time"].items():
        ptm = "—" if t["ptm_median_s"] is None else f"{t['ptm_median_s']:.3f}"
        lines.append(f"| {g} | {t['n']} | {t['median_s']:.3f} | {t['p90_s']:.3f} | {ptm} |")
    if s["optional_result_fields"]:
        lines += ["", "Further result fields recorded in the results file: "
                  + ", ".join(f"`{k}`" for k in s["optional_result_fields"]) + "."]
    return "\n".join(lines) + "\n"


def write_page(results: dict[str, Any], page: Path) -> None:
    """The generated docs page and its calibration plot, beside it."""
    from c2np.fileio import write_text

    totals = results["summary"]["totals"]
    n_crystals = len({r["sample"]["material"] for r in results["rows"] if r["sample"]["group"] == "crystal"})
    head = ["# identify on crystals and particles no one here made", "",
            "<!-- generated by benchmarks/identify.py from " + results["results_file"] + "; do not edit -->", "",
            "How the corpus is made and scored: [How identify works](../explanation/identify.md#the-benchmark). "
            f"Corpus: {n_crystals} public crystals ({totals['crystal']['n']} carvings), "
            f"{totals['particle']['n']} EMT particles, "
            f"{totals['cluster']['n']} non-crystalline clusters"
            f"{' (quick run)' if results['quick'] else ''}; c2np {results['c2np_version']}"
            f"{', OVITO ' + results['ptm'] if results['ptm'] else ''}.", "",
            "| group | right | crashes |", "|---|---:|---:|"]
    for g, t in totals.items():
        head.append(f"| {g} | {_frac(t['right'], t['n'])} | {t['crashes']} |")
    write_text(page, "\n".join(head) + "\n\n" + markdown_tables(results))
    plot_calibration(results, page.parent / "identify_calibration.png")


def plot_calibration(results: dict[str, Any], png: Path) -> None:
    """Reliability diagram: observed accuracy against mean confidence per bin (marker area: answers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from c2np.fileio import atomic_path

    cal = results["summary"]["calibration"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9, 4), gridspec_kw={"width_ratios": [3, 2]})
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="perfect calibration")
    pts = [b for b in cal["bins"] if b["n"]]
    if pts:
        ax.scatter([b["confidence"] for b in pts], [b["accuracy"] for b in pts],
                   s=[20 + 200 * b["n"] / max(p["n"] for p in pts) for b in pts], color="C0", zorder=3,
                   label="identify (area: answers)")
        ax.plot([b["confidence"] for b in pts], [b["accuracy"] for b in pts], color="C0", lw=1)
    ax.set(xlim=(0, 1.02), ylim=(0, 1.02), xlabel="confidence (bin mean)", ylabel="observed accuracy",
           title=f"reliability (ECE {cal['ece']:.3f})" if cal["ece"] is not None else "reliability")
    ax.legend(loc="upper left", fontsize=8)
    bx.bar([(b["lo"] + b["hi"]) / 2 for b in cal["bins"]], [b["n"] for b in cal["bins"]], width=0.09, color="C0")
    bx.set(xlabel="confidence", ylabel="answers", title="answers per bin", xlim=(0, 1))
    fig.tight_layout()
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def print_tables(results: dict[str, Any]) -> None:
    """The tables on stdout (the page body)."""
    print(markdown_tables(results))


# --- main --------------------------------------------------------------------------------------------

def build_corpus(corpus: Path, size: Size, *, workers: int) -> list[Sample]:
    """Every sample of the corpus, building the missing files."""
    from tqdm import tqdm

    corpus.mkdir(parents=True, exist_ok=True)

    def progress(desc: str) -> Callable[[Iterable[Any]], Iterable[Any]]:
        return lambda it: tqdm(list(it), desc=desc, file=sys.stderr, leave=False)

    return (build_crystals(corpus, size, progress("crystals")) + build_particles(corpus, size, workers)
            + build_clusters(corpus, size, workers))


def run(samples: list[Sample], corpus: Path, *, workers: int, use_ptm: bool) -> list[dict[str, Any]]:
    """identify (and PTM) on every sample; per-sample rows with the scores."""
    from tqdm import tqdm

    from c2np.executor import LocalExecutor

    jobs = [(str(corpus), asdict(s), use_ptm) for s in samples]
    outcomes: list[dict[str, Any]] = []
    with LocalExecutor(workers) as ex, tqdm(total=len(jobs), desc="identify", file=sys.stderr) as bar:
        for part in ex.map(_measure_job, jobs, chunk=4):
            outcomes.extend(part)
            bar.update(len(part))
    rows = []
    for s, o in zip(samples, outcomes):
        sample = asdict(s)
        rows.append({"sample": sample, "outcome": o, "right": identify_right(sample, o),
                     "ptm_right": ptm_right(sample, o["ptm"]), "lattice_error": lattice_error(sample, o)})
    return rows


def _ovito_version() -> str | None:
    try:
        import ovito
    except ImportError:
        return None
    return ".".join(str(x) for x in ovito.version)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--corpus-dir", type=Path, default=ROOT / ".cache" / "identify-corpus",
                    help="folder of the generated corpus (reused when there)")
    ap.add_argument("--quick", action="store_true", help="a small corpus (a few minutes)")
    ap.add_argument("--results", type=Path, default=ROOT / "docs" / "results" / "identify.json")
    ap.add_argument("--page", default=str(ROOT / "docs" / "results" / "identify.md"),
                    help="generated docs page ('' for none); the plot is written beside it")
    ap.add_argument("--workers", type=int, default=1, help="processes solving particles")
    ap.add_argument("--no-ptm", action="store_true", help="skip OVITO PTM even when installed")
    ap.add_argument("--page-only", action="store_true", help="regenerate the page from --results")
    args = ap.parse_args(argv)

    from c2np.fileio import write_text
    from c2np.structured import read_json

    if args.page_only:
        results = read_json(args.results, what="identify benchmark results")
        write_page(results, Path(args.page))
        print(f"page -> {args.page}")
        return 0
    ptm_version = None if args.no_ptm else _ovito_version()
    if ptm_version is None:
        print("note: OVITO is not installed (pip install ovito) or --no-ptm: no PTM column", file=sys.stderr)
    size = QUICK if args.quick else FULL
    t0 = time.perf_counter()
    samples = build_corpus(args.corpus_dir, size, workers=args.workers)
    t_build = time.perf_counter() - t0
    rows = run(samples, args.corpus_dir, workers=args.workers, use_ptm=ptm_version is not None)
    import c2np

    results = {"schema": SCHEMA, "c2np_version": c2np.__version__, "quick": args.quick, "ptm": ptm_version,
               "results_file": _display(args.results), "size": asdict(size),
               "seconds": {"corpus": t_build, "total": time.perf_counter() - t0},
               "summary": summarize(rows), "rows": rows}
    write_text(args.results, json.dumps(results, indent=1))
    print_tables(results)
    print(f"results -> {args.results} ({len(rows)} particles, {results['seconds']['total']:.0f} s, corpus "
          f"{t_build:.0f} s)")
    if args.page:
        write_page(results, Path(args.page))
        print(f"page -> {args.page}")
    return 0


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    sys.exit(main())
