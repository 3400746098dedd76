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
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from c2np.recognition import (
    SCHEMA,
    identify_right,
    lattice_error,
    markdown_tables,
    own_lattice,
    ptm_right,
    standard_abc,
    summarize,
    write_page,
)

ROOT = Path(__file__).resolve().parents[1]
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
