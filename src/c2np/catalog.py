"""The material catalog: perovskite hydrides ABH3 relaxed with a universal potential.

Compositions: A in {Li, Na, K, Rb, Cs} x B in {Be, Mg, Ca, Sr, Ba, Al, Sc, Ti, V, Cr, Mn,
Fe, Co, Ni, Cu, Zn} (80) plus the inverse perovskites SrLiH3 and BaLiH3 (alkaline earth
on the A site, Li on the octahedral B site). Material ids are the formula with the
A-site cation first, e.g. ``KMgH3``.

Every composition is started from four perovskite prototypes built in code: the cubic
aristotype Pm-3m and three octahedrally tilted ones made from a 2x2x2 cubic supercell by
a Glazer tilt pattern: a-b+a- (Pnma), a-a-a- (R-3c) and a0a0c- (I4/mcm). Each is relaxed
(positions and cell) with CHGNet (default) or SevenNet under ASE's ``FixSymmetry``
constraint and a ``FrechetCellFilter``, and the prototype of lowest energy per atom is
kept. Unphysical or non-converged relaxations are rejected with the reason recorded.

The shipped catalog (``c2np/data/catalog``: one CIF per material plus ``catalog.json``)
is exactly what :func:`build_catalog` writes. Nothing heavy is imported at module import.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from c2np.cells import UnitCell, read_cif_text, standardize, write_cif
from c2np.errors import C2NPError, C2NPInputError
from c2np.fileio import write_text

__all__ = [
    "A_SITES",
    "B_SITES",
    "INVERSE_PEROVSKITES",
    "PROTOTYPES",
    "PROTOTYPE_SPACEGROUP",
    "Composition",
    "PrototypeResult",
    "CatalogEntry",
    "compositions",
    "material_ids",
    "start_lattice_constant_angstrom",
    "build_prototype",
    "relax_prototype",
    "relax_material",
    "build_catalog",
    "load_catalog",
    "catalog_entries",
    "catalog_failures",
    "get_cell",
    "default_demo_materials",
    "shortest_distance_angstrom",
    "framework_defect",
    "catalog_data_dir",
]

A_SITES: tuple[str, ...] = ("Li", "Na", "K", "Rb", "Cs")
B_SITES: tuple[str, ...] = ("Be", "Mg", "Ca", "Sr", "Ba", "Al", "Sc", "Ti", "V", "Cr", "Mn",
                            "Fe", "Co", "Ni", "Cu", "Zn")
#: Inverse perovskites: (A site, B site). The alkaline earth takes the 12-fold A site.
INVERSE_PEROVSKITES: tuple[tuple[str, str], ...] = (("Sr", "Li"), ("Ba", "Li"))

#: Prototype names in order of decreasing symmetry (this order breaks energy ties).
PROTOTYPES: tuple[str, ...] = ("Pm-3m", "I4/mcm", "R-3c", "Pnma")
PROTOTYPE_SPACEGROUP: dict[str, int] = {"Pm-3m": 221, "I4/mcm": 140, "R-3c": 167, "Pnma": 62}
#: Glazer tilt pattern per prototype: per pseudo-cubic axis x, y, z, (tilt sign, phase).
#: phase "-" = out-of-phase along that axis, "+" = in-phase; sign 0 = no tilt.
_GLAZER: dict[str, tuple[tuple[int, str], tuple[int, str], tuple[int, str]]] = {
    "I4/mcm": ((0, "0"), (0, "0"), (1, "-")),   # a0a0c-
    "R-3c": ((1, "-"), (1, "-"), (1, "-")),     # a-a-a-
    "Pnma": ((1, "-"), (1, "+"), (1, "-")),     # a-b+a-
}

# Shannon ionic radii (Å): A site 12-fold (Li: no tabulated 12-fold value; 1.25 Å is an
# extrapolation from its 4-, 6- and 8-fold radii), B site 6-fold (high spin for 3d M2+),
# hydride H- taken as 1.30 Å (so that 2 (r_Mg + r_H) reproduces a(KMgH3) ~ 4.02 Å).
_R_A_12: dict[str, float] = {"Li": 1.25, "Na": 1.39, "K": 1.64, "Rb": 1.72, "Cs": 1.88,
                             "Sr": 1.44, "Ba": 1.61}
_R_B_6: dict[str, float] = {"Be": 0.45, "Mg": 0.72, "Ca": 1.00, "Sr": 1.18, "Ba": 1.35,
                            "Al": 0.535, "Sc": 0.745, "Ti": 0.86, "V": 0.79, "Cr": 0.80,
                            "Mn": 0.83, "Fe": 0.78, "Co": 0.745, "Ni": 0.69, "Cu": 0.73,
                            "Zn": 0.74, "Li": 0.76}
_R_HYDRIDE = 1.30

#: Shortest interatomic distance below which a result is unphysical (Å).
MIN_DISTANCE_ANGSTROM = 0.6
#: Largest allowed volume change factor relative to the starting prototype.
MAX_VOLUME_RATIO = 3.0
#: Energy ties (eV/atom) are broken in favour of the higher-symmetry prototype.
ENERGY_TIE_EV_PER_ATOM = 2e-4
EV_PER_A3_TO_GPA = 160.21766208
SCHEMA_VERSION = 1
POTENTIALS: tuple[str, ...] = ("chgnet", "sevenn")


# --- compositions ------------------------------------------------------------------------
@dataclass(frozen=True)
class Composition:
    """One ABH3 composition: ``a_site`` 12-fold cation, ``b_site`` octahedral cation."""

    a_site: str
    b_site: str

    @property
    def material_id(self) -> str:
        """Formula with the A-site first, e.g. ``KMgH3``."""
        return f"{self.a_site}{self.b_site}H3"


def compositions() -> list[Composition]:
    """The 82 catalog compositions (80 ABH3 + 2 inverse), sorted by material id."""
    comps = [Composition(a, b) for a in A_SITES for b in B_SITES]
    comps += [Composition(a, b) for a, b in INVERSE_PEROVSKITES]
    return sorted(comps, key=lambda c: c.material_id)


def material_ids() -> list[str]:
    """Ids of all catalog compositions (built or not), sorted."""
    return [c.material_id for c in compositions()]


def _composition(material_id: str) -> Composition:
    for comp in compositions():
        if comp.material_id == material_id:
            return comp
    raise C2NPInputError(f"unknown catalog composition {material_id!r}; valid ids: "
                         f"{', '.join(material_ids())}")


def start_lattice_constant_angstrom(comp: Composition, prototype: str) -> float:
    """Starting pseudo-cubic lattice constant (Å) from ionic radii.

    The cubic cell must fit both the B-H octahedron, a = 2 (r_B + r_H), and the A-H
    cuboctahedron, a = sqrt(2) (r_A + r_H) (Goldschmidt's tolerance factor is their
    ratio); it takes the larger. Tilted prototypes exist to shrink the A-site cage, so
    they start from the octahedral value.
    """
    a_oct = 2.0 * (_R_B_6[comp.b_site] + _R_HYDRIDE)
    a_cuboct = float(np.sqrt(2.0)) * (_R_A_12[comp.a_site] + _R_HYDRIDE)
    return max(a_oct, a_cuboct) if prototype == "Pm-3m" else a_oct


def tolerance_factor(comp: Composition) -> float:
    """Goldschmidt tolerance factor t = (r_A + r_H) / (sqrt(2) (r_B + r_H))."""
    return (_R_A_12[comp.a_site] + _R_HYDRIDE) / (float(np.sqrt(2.0)) * (_R_B_6[comp.b_site] + _R_HYDRIDE))


# --- prototypes --------------------------------------------------------------------------
def _cubic_basis(a_site: str, b_site: str) -> tuple[list[str], np.ndarray]:
    """Species and fractional coordinates of the 5-atom cubic cell (B at the origin)."""
    species = [b_site, a_site, "H", "H", "H"]
    frac = np.array([[0.0, 0.0, 0.0], [0.5, 0.5, 0.5],
                     [0.5, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.5]])
    return species, frac


def _tilted_supercell(species: list[str], frac: np.ndarray, a_angstrom: float, prototype: str,
                      *, tilt_deg: float) -> tuple[np.ndarray, list[str], np.ndarray]:
    """2x2x2 supercell of the cubic cell with octahedral tilts of a Glazer pattern.

    Each octahedron at integer position n is turned by omega(n) with components
    +-tilt along the tilted axes: out-of-phase tilts about axis k alternate with every
    step, in-phase ones only with steps perpendicular to k. Each H, shared by the
    octahedra at n and n + e_j, moves by omega(n) x (a/2) e_j (first order; the two
    octahedra agree on it by construction). Returns (lattice (3,3), species, frac (n,3)).
    """
    pattern = _GLAZER[prototype]
    theta = np.radians(tilt_deg)
    lattice = np.eye(3) * (2.0 * a_angstrom)
    out_species: list[str] = []
    out_frac: list[np.ndarray] = []
    for n in np.ndindex(2, 2, 2):
        n_vec = np.array(n, dtype=float)
        omega = np.zeros(3)
        for k, (sign, phase) in enumerate(pattern):
            if sign == 0:
                continue
            steps = sum(n) if phase == "-" else sum(n[j] for j in range(3) if j != k)
            omega[k] = sign * theta * (-1.0) ** steps
        for sp, f in zip(species, frac):
            cart = (n_vec + f) * a_angstrom
            if sp == "H":
                j = int(np.argmax(f))  # the H on the B-B link along axis j
                half = np.zeros(3)
                half[j] = 0.5 * a_angstrom
                cart = cart + np.cross(omega, half)
            out_species.append(sp)
            out_frac.append(cart / (2.0 * a_angstrom))
    return lattice, out_species, np.mod(np.array(out_frac), 1.0)


def build_prototype(comp: Composition, prototype: str, *, a_angstrom: float | None = None,
                    tilt_deg: float = 10.0) -> Any:
    """The starting structure of ``prototype`` for ``comp`` as an ASE ``Atoms``.

    Pm-3m is the 5-atom cell; tilted prototypes are reduced (spglib, symprec 1e-3 Å) to
    their primitive cell: 10 atoms for I4/mcm and R-3c, 20 for Pnma. The space group is
    checked against :data:`PROTOTYPE_SPACEGROUP`.
    """
    import spglib
    from ase import Atoms

    if prototype not in PROTOTYPE_SPACEGROUP:
        raise C2NPInputError(f"unknown prototype {prototype!r}; valid: {', '.join(PROTOTYPES)}")
    a = start_lattice_constant_angstrom(comp, prototype) if a_angstrom is None else float(a_angstrom)
    species, frac = _cubic_basis(comp.a_site, comp.b_site)
    if prototype == "Pm-3m":
        atoms = Atoms(symbols=species, scaled_positions=frac, cell=np.eye(3) * a, pbc=True)
    else:
        lattice, sp, fr = _tilted_supercell(species, frac, a, prototype, tilt_deg=tilt_deg)
        atoms = Atoms(symbols=sp, scaled_positions=fr, cell=lattice, pbc=True)
        prim = spglib.standardize_cell((atoms.cell[:], atoms.get_scaled_positions(), atoms.numbers),
                                       to_primitive=True, no_idealize=False, symprec=1e-3)
        if prim is None:
            raise C2NPError(f"{comp.material_id} {prototype}: spglib could not reduce the prototype")
        lat, pos, nums = prim
        atoms = Atoms(numbers=nums, scaled_positions=pos, cell=lat, pbc=True)
    ds = spglib.get_symmetry_dataset((atoms.cell[:], atoms.get_scaled_positions(), atoms.numbers),
                                     symprec=1e-3)
    expected = PROTOTYPE_SPACEGROUP[prototype]
    if ds is None or int(ds.number) != expected:
        got = None if ds is None else int(ds.number)
        raise C2NPError(f"{comp.material_id} {prototype}: prototype has space group {got}, "
                        f"expected {expected}")
    return atoms


# --- geometry ----------------------------------------------------------------------------
def shortest_distance_angstrom(lattice_angstrom: np.ndarray, frac_coords: np.ndarray) -> float:
    """Shortest distance (Å) between any two atoms of a periodic cell, images included.

    ``lattice_angstrom`` (3, 3) rows, ``frac_coords`` (n, 3). Searches every translation
    that can give a shorter distance than the shortest lattice vector.
    """
    lat = np.asarray(lattice_angstrom, dtype=float)
    frac = np.asarray(frac_coords, dtype=float)
    frac = frac - np.floor(frac)
    cart = frac @ lat
    # bound: any vector with |v| <= d needs |n_i| <= d * |b_i| (b = reciprocal rows / 2pi)
    d_max = float(np.min(np.linalg.norm(lat, axis=1)))
    recip = np.linalg.inv(lat).T
    reach = np.ceil(d_max * np.linalg.norm(recip, axis=1) + 1.0).astype(int)
    ranges = [np.arange(-r, r + 1) for r in reach]
    shifts = np.stack(np.meshgrid(*ranges, indexing="ij"), axis=-1).reshape(-1, 3) @ lat
    diff = cart[:, None, :] - cart[None, :, :]
    best = d_max
    for s in shifts:
        d = np.linalg.norm(diff + s, axis=-1)
        if not np.any(s):
            d = d + np.eye(len(cart)) * 1e9
        best = min(best, float(d.min()))
    return best


def framework_defect(atoms: Any, b_symbol: str, *, bond_ratio: float = 1.35) -> str:
    """Why ``atoms`` is no longer a corner-sharing perovskite framework, or ``""``.

    Every B cation must have exactly 6 H within ``bond_ratio`` x its shortest B-H distance,
    and every H exactly 2 B within ``bond_ratio`` x its shortest H-B distance (in an ideal
    cubic perovskite the next H around B is 2.24 x further; Jahn-Teller elongated
    octahedra stay below 1.2 x).
    """
    from ase.neighborlist import neighbor_list

    symbols = np.array(atoms.get_chemical_symbols())
    b_idx = np.flatnonzero(symbols == b_symbol)
    h_idx = np.flatnonzero(symbols == "H")
    if len(b_idx) == 0 or len(h_idx) != 3 * len(b_idx):
        return f"composition is not {b_symbol}H3 per B"
    i, j, d = neighbor_list("ijd", atoms, 6.0)
    for centre, other, want, name in ((b_idx, "H", 6, f"{b_symbol} has"), (h_idx, b_symbol, 2, "H has")):
        for c in centre:
            dist = d[(i == c) & (symbols[j] == other)]
            if len(dist) == 0:
                return f"{name} no {other} within 6 Å"
            n = int(np.sum(dist <= bond_ratio * dist.min()))
            if n != want:
                return f"left the perovskite framework: {name} {n} {other} neighbours, not {want}"
    return ""


# --- records -----------------------------------------------------------------------------
@dataclass(frozen=True)
class PrototypeResult:
    """Outcome of relaxing one prototype of one composition.

    ``status`` is ``ok``, ``rejected`` (unphysical or not converged; ``reason`` says why)
    or ``error`` (the potential raised). Energies in eV/atom, forces eV/Å, stress GPa.
    """

    prototype: str
    status: str
    reason: str
    n_atoms: int
    energy_per_atom_ev: float | None
    n_steps: int
    converged: bool
    max_force_ev_per_angstrom: float | None
    max_stress_gpa: float | None
    spacegroup_symprec_1e_3: int | None
    volume_ratio: float | None
    shortest_distance_angstrom: float | None
    start_a_angstrom: float
    time_s: float


@dataclass(frozen=True)
class CatalogEntry:
    """Provenance record of one catalog material (one item of ``catalog.json``).

    Lattice parameters are those of the standardized conventional cell (spglib, symprec
    1e-3 Å), which is also the cell written to the CIF. ``status`` is ``ok`` or
    ``failed`` (then ``reason`` says why and no CIF is shipped).
    """

    material_id: str
    formula: str
    a_site: str
    b_site: str
    status: str
    reason: str
    chosen_prototype: str | None
    prototype_energies_ev_per_atom: dict[str, float | None]
    energy_per_atom_ev: float | None
    max_force_ev_per_angstrom: float | None
    max_stress_gpa: float | None
    spacegroup_symprec_1e_3: int | None
    spacegroup_symprec_1e_1: int | None
    international_symprec_1e_3: str | None
    lattice_parameters: dict[str, float] | None
    n_atoms_conventional: int | None
    shortest_distance_angstrom: float | None
    tolerance_factor: float
    potential: str
    potential_version: str
    fmax_ev_per_angstrom: float
    optimizer: str
    max_steps: int
    symmetry_library: str
    time_s: float
    prototypes: tuple[PrototypeResult, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        d = asdict(self)
        d["prototypes"] = [asdict(p) for p in self.prototypes]
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CatalogEntry":
        """Inverse of :meth:`to_dict`."""
        d = dict(data)
        d["prototypes"] = tuple(PrototypeResult(**p) for p in d.get("prototypes", []))
        return cls(**d)


# --- potentials --------------------------------------------------------------------------
@dataclass(frozen=True)
class _Potential:
    name: str
    version: str
    calculator: Any


_POTENTIAL_CACHE: dict[str, _Potential] = {}


def _load_potential(name: str) -> _Potential:
    """Load a potential once per process (weights ship in the package wheels)."""
    if name in _POTENTIAL_CACHE:
        return _POTENTIAL_CACHE[name]
    if name == "chgnet":
        try:
            import chgnet
            from chgnet.model import CHGNet
            from chgnet.model.dynamics import CHGNetCalculator
        except ImportError as exc:
            raise C2NPInputError("potential 'chgnet' needs the chgnet package "
                                 "(pip install 'c2np[catalog]')") from exc
        with contextlib.redirect_stdout(sys.stderr):  # chgnet prints banners; stdout may be JSON
            model = CHGNet.load(verbose=False, use_device="cpu")
            calc = CHGNetCalculator(model=model, use_device="cpu", on_isolated_atoms="ignore")
        version = f"chgnet {chgnet.__version__}, model {getattr(model, 'version', '?')}"
        pot = _Potential("chgnet", version, calc)
    elif name == "sevenn":
        try:
            import sevenn
            from sevenn.calculator import SevenNetCalculator
        except ImportError as exc:
            raise C2NPInputError("potential 'sevenn' needs the sevenn package, which is not "
                                 "installed (pip install sevenn); or use --potential chgnet") from exc
        calc = SevenNetCalculator(model="7net-0", device="cpu")
        pot = _Potential("sevenn", f"sevenn {getattr(sevenn, '__version__', '?')}, model 7net-0", calc)
    else:
        raise C2NPInputError(f"unknown potential {name!r}; valid: {', '.join(POTENTIALS)}")
    _POTENTIAL_CACHE[name] = pot
    return pot


# --- relaxation --------------------------------------------------------------------------
def relax_prototype(atoms: Any, calculator: Any, *, prototype: str,
                    fmax_ev_per_angstrom: float = 0.01, max_steps: int = 1000,
                    optimizer: str = "FIRE", b_symbol: str | None = None) -> tuple[PrototypeResult, Any]:
    """Relax positions and cell of ``atoms`` keeping its symmetry.

    ASE ``FixSymmetry`` (symprec 1e-3 Å) + ``FrechetCellFilter``, FIRE or BFGS, to
    ``fmax_ev_per_angstrom`` (forces and the filter's cell "forces"), at most
    ``max_steps``. Returns the record and the relaxed ``Atoms``; a relaxation that does
    not converge or ends unphysical is ``rejected`` with the reason; so is one that leaves
    the perovskite framework (checked when ``b_symbol``, the octahedral cation, is given).
    """
    import spglib
    from ase.constraints import FixSymmetry
    from ase.filters import FrechetCellFilter
    from ase.optimize import BFGS, FIRE

    opt_cls = {"FIRE": FIRE, "BFGS": BFGS}.get(optimizer.upper())
    if opt_cls is None:
        raise C2NPInputError(f"unknown optimizer {optimizer!r}; valid: FIRE, BFGS")
    start = time.perf_counter()
    work = atoms.copy()
    v0 = float(work.get_volume())
    a0 = float(np.cbrt(v0 / (len(work) / 5.0)))
    work.calc = calculator
    work.set_constraint(FixSymmetry(work, symprec=1e-3))
    opt = opt_cls(FrechetCellFilter(work, exp_cell_factor=1.0), logfile=None)
    converged = False
    error = ""
    try:
        with warnings.catch_warnings():
            # chgnet converts Atoms to pymatgen on every call and says that FixSymmetry does
            # not carry over; the constraint acts in ASE, where the relaxation runs
            warnings.filterwarnings("ignore", message="Only FixAtoms and FixCartesian",
                                    category=UserWarning)
            converged = bool(opt.run(fmax=fmax_ev_per_angstrom, steps=max_steps))
        energy = float(work.get_potential_energy()) / len(work)
        forces = np.asarray(work.get_forces(apply_constraint=False))
        stress = np.asarray(work.get_stress(voigt=False, apply_constraint=False)) * EV_PER_A3_TO_GPA
    except Exception as exc:  # the potential failing is recorded, never hidden
        error = f"{type(exc).__name__}: {exc}"
    n_steps = int(opt.nsteps)
    elapsed = time.perf_counter() - start
    if error:
        return PrototypeResult(prototype, "error", error, len(work), None, n_steps, False, None, None,
                               None, None, None, a0, elapsed), work
    work.set_constraint()
    vol_ratio = float(work.get_volume()) / v0
    dmin = shortest_distance_angstrom(work.cell[:], work.get_scaled_positions(wrap=False))
    ds = spglib.get_symmetry_dataset((work.cell[:], work.get_scaled_positions(), work.numbers),
                                     symprec=1e-3)
    sg = None if ds is None else int(ds.number)
    fmax_found = float(np.max(np.linalg.norm(forces, axis=1)))
    reasons = []
    if not np.isfinite(energy) or not np.all(np.isfinite(forces)):
        reasons.append("energy or forces not finite")
    if not converged:
        reasons.append(f"not converged to fmax {fmax_ev_per_angstrom} eV/Å within {max_steps} steps")
    if dmin < MIN_DISTANCE_ANGSTROM:
        reasons.append(f"atoms {dmin:.3f} Å apart (< {MIN_DISTANCE_ANGSTROM} Å)")
    if vol_ratio > MAX_VOLUME_RATIO or vol_ratio < 1.0 / MAX_VOLUME_RATIO:
        reasons.append(f"volume changed by a factor {vol_ratio:.2f} (limit {MAX_VOLUME_RATIO:g})")
    if b_symbol is not None and dmin >= MIN_DISTANCE_ANGSTROM:
        defect = framework_defect(work, b_symbol)
        if defect:
            reasons.append(defect)
    status = "rejected" if reasons else "ok"
    result = PrototypeResult(prototype, status, "; ".join(reasons), len(work), energy, n_steps, converged,
                             fmax_found, float(np.max(np.abs(stress))), sg, vol_ratio, dmin, a0, elapsed)
    return result, work


def _choose(results: Sequence[PrototypeResult]) -> PrototypeResult | None:
    """Lowest energy per atom among ``ok`` results; ties (within
    :data:`ENERGY_TIE_EV_PER_ATOM`) go to the earlier (higher-symmetry) prototype."""
    ok = [r for r in results if r.status == "ok" and r.energy_per_atom_ev is not None]
    if not ok:
        return None
    e_min = min(r.energy_per_atom_ev for r in ok)  # type: ignore[type-var]
    for name in PROTOTYPES:
        for r in ok:
            if r.prototype == name and r.energy_per_atom_ev <= e_min + ENERGY_TIE_EV_PER_ATOM:  # type: ignore[operator]
                return r
    raise AssertionError("unreachable")


def relax_material(material_id: str, *, potential: str = "chgnet",
                   prototypes: Sequence[str] = PROTOTYPES, fmax_ev_per_angstrom: float = 0.01,
                   max_steps: int = 1000, optimizer: str = "FIRE",
                   on_prototype_done: Any = None) -> tuple[CatalogEntry, UnitCell | None]:
    """Relax every prototype of one composition and keep the lowest in energy per atom.

    Returns the provenance record and the standardized conventional relaxed cell
    (``None`` when every prototype failed). ``on_prototype_done(result)`` is called after
    each prototype (for progress bars).
    """
    import spglib

    comp = _composition(material_id)
    pot = _load_potential(potential)
    start = time.perf_counter()
    results: list[PrototypeResult] = []
    relaxed: dict[str, Any] = {}
    for name in prototypes:
        try:
            atoms = build_prototype(comp, name)
        except C2NPError as exc:
            res = PrototypeResult(name, "error", str(exc), 0, None, 0, False, None, None, None, None,
                                  None, start_lattice_constant_angstrom(comp, name), 0.0)
        else:
            res, relaxed[name] = relax_prototype(atoms, pot.calculator, prototype=name,
                                                 fmax_ev_per_angstrom=fmax_ev_per_angstrom,
                                                 max_steps=max_steps, optimizer=optimizer,
                                                 b_symbol=comp.b_site)
        results.append(res)
        if on_prototype_done is not None:
            on_prototype_done(res)
    chosen = _choose(results)
    common = dict(
        material_id=material_id, formula=material_id, a_site=comp.a_site, b_site=comp.b_site,
        prototype_energies_ev_per_atom={r.prototype: r.energy_per_atom_ev for r in results},
        tolerance_factor=tolerance_factor(comp), potential=pot.name, potential_version=pot.version,
        fmax_ev_per_angstrom=fmax_ev_per_angstrom, optimizer=optimizer.upper(), max_steps=max_steps,
        symmetry_library=f"spglib {spglib.__version__}", prototypes=tuple(results),
    )
    if chosen is None:
        reason = "no prototype relaxed to a physical minimum: " + "; ".join(
            f"{r.prototype}: {r.reason}" for r in results)
        entry = CatalogEntry(status="failed", reason=reason, chosen_prototype=None, energy_per_atom_ev=None,
                             max_force_ev_per_angstrom=None, max_stress_gpa=None,
                             spacegroup_symprec_1e_3=None, spacegroup_symprec_1e_1=None,
                             international_symprec_1e_3=None, lattice_parameters=None,
                             n_atoms_conventional=None, shortest_distance_angstrom=None,
                             time_s=time.perf_counter() - start, **common)
        return entry, None
    raw = UnitCell.from_ase(relaxed[chosen.prototype], material_id)
    std = standardize(raw, symprec_angstrom=1e-3)
    loose = standardize(raw, symprec_angstrom=1e-1)
    cell = std.to_unit_cell(material_id)
    entry = CatalogEntry(
        status="ok", reason="", chosen_prototype=chosen.prototype,
        energy_per_atom_ev=chosen.energy_per_atom_ev,
        max_force_ev_per_angstrom=chosen.max_force_ev_per_angstrom, max_stress_gpa=chosen.max_stress_gpa,
        spacegroup_symprec_1e_3=std.spacegroup, spacegroup_symprec_1e_1=loose.spacegroup,
        international_symprec_1e_3=std.international,
        lattice_parameters=dict(zip(("a", "b", "c", "alpha", "beta", "gamma"), std.lattice_params)),
        n_atoms_conventional=cell.n_atoms,
        shortest_distance_angstrom=shortest_distance_angstrom(cell.lattice_angstrom, cell.frac_coords),
        time_s=time.perf_counter() - start, **common)
    return entry, cell


# --- the catalog file --------------------------------------------------------------------
def _read_catalog_json(path: Path, *, source: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise C2NPInputError(f"{source}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    if not isinstance(data, dict) or "materials" not in data or "failures" not in data:
        raise C2NPInputError(f"{source}: not a c2np catalog file (needs 'materials' and 'failures')")
    return data


def _catalog_document(entries: Iterable[CatalogEntry], *, potential: str, fmax: float,
                      started: str) -> dict[str, Any]:
    entries = sorted(entries, key=lambda e: e.material_id)
    done = {e.material_id for e in entries}
    ok = [e.to_dict() for e in entries if e.status == "ok"]
    failed = [e.to_dict() for e in entries if e.status != "ok"]
    not_built = [{"material_id": m, "reason": "not built (build not run or interrupted)"}
                 for m in material_ids() if m not in done]
    return {
        "schema_version": SCHEMA_VERSION,
        "description": "c2np perovskite hydride catalog: ABH3 relaxed with a universal potential",
        "potential": potential,
        "fmax_ev_per_angstrom": fmax,
        "prototypes": {p: PROTOTYPE_SPACEGROUP[p] for p in PROTOTYPES},
        "energy_tie_ev_per_atom": ENERGY_TIE_EV_PER_ATOM,
        "min_distance_angstrom": MIN_DISTANCE_ANGSTROM,
        "max_volume_ratio": MAX_VOLUME_RATIO,
        "build_started_utc": started,
        "n_materials": len(ok),
        "n_failures": len(failed),
        "n_not_built": len(not_built),
        "materials": ok,
        "failures": failed,
        "not_built": not_built,
    }


def _done_entries(out: Path, *, potential: str, fmax: float, prototypes: Sequence[str] | None,
                  started: str) -> tuple[dict[str, CatalogEntry], str]:
    """Entries already recorded in ``out/catalog.json`` that a build can keep (all of them
    when ``prototypes`` is None)."""
    cat_path = out / "catalog.json"
    done: dict[str, CatalogEntry] = {}
    if not cat_path.exists():
        return done, started
    data = _read_catalog_json(cat_path, source=str(cat_path))
    if data.get("materials") or data.get("failures"):
        if data.get("potential") != potential or float(data.get("fmax_ev_per_angstrom", -1)) != fmax:
            raise C2NPInputError(
                f"{cat_path}: holds a build with potential {data.get('potential')!r} and fmax "
                f"{data.get('fmax_ev_per_angstrom')}; use another --out for potential {potential!r}, "
                f"fmax {fmax}")
    started = str(data.get("build_started_utc", started))
    for rec in list(data["materials"]) + list(data["failures"]):
        entry = CatalogEntry.from_dict(rec)
        if prototypes is None:
            done[entry.material_id] = entry
            continue
        if entry.status == "ok" and not (out / f"{entry.material_id}.cif").exists():
            continue  # CIF lost: rebuild it
        if entry.prototypes and tuple(p.prototype for p in entry.prototypes) != tuple(prototypes):
            continue  # built from other prototypes: redo
        done[entry.material_id] = entry
    return done, started


class _build_lock:
    """Exclusive lock (``fcntl.flock``) around reading and rewriting ``catalog.json``, so
    that several build processes can share one output folder. The lock file lives in the
    temp folder, keyed by the output path, so nothing extra lands in the catalog."""

    def __init__(self, out: Path) -> None:
        import hashlib

        key = hashlib.sha1(str(out.resolve()).encode()).hexdigest()[:16]
        self.path = Path(tempfile.gettempdir()) / f"c2np-catalog-{key}.lock"
        self.fh: Any = None

    def __enter__(self) -> "_build_lock":
        import fcntl

        self.fh = open(self.path, "a+")
        fcntl.flock(self.fh.fileno(), fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        import fcntl

        fcntl.flock(self.fh.fileno(), fcntl.LOCK_UN)
        self.fh.close()


def build_catalog(out_dir: str | os.PathLike[str], potential: str = "chgnet",
                  only: Sequence[str] | None = None, fmax: float = 0.01, progress: bool = True,
                  *, prototypes: Sequence[str] = PROTOTYPES, max_steps: int = 1000,
                  optimizer: str = "FIRE", num_threads: int | None = 1,
                  workers: int = 1) -> list[CatalogEntry]:
    """Relax the catalog (or the ids in ``only``) into ``out_dir``; resumable.

    Writes ``{ID}.cif`` (standardized conventional cell) per material and rewrites
    ``catalog.json`` after each material, each atomically. Materials already recorded in
    ``out_dir/catalog.json`` (as built or failed, with the same potential and fmax) are
    skipped. A failing material is recorded with its reason and the build goes on.
    Several processes may build into the same folder at once (e.g. with ``only`` lists in
    different orders): ``catalog.json`` is re-read and merged under a file lock.
    ``prototypes`` restricts the prototypes tried (tests; the catalog uses all four).
    ``workers > 1`` relaxes that many materials at once in spawned processes (each with
    ``num_threads`` torch threads), sharing the folder as above.
    Returns the entries of this call's materials, done now or before.
    """
    out = Path(out_dir)
    ids = material_ids() if only is None else list(dict.fromkeys(only))
    valid = set(material_ids())
    unknown = [m for m in ids if m not in valid]
    if unknown:
        raise C2NPInputError(f"unknown catalog ids {unknown}; valid ids: {', '.join(material_ids())}")
    if potential not in POTENTIALS:
        raise C2NPInputError(f"unknown potential {potential!r}; valid: {', '.join(POTENTIALS)}")
    if not fmax > 0:
        raise C2NPInputError(f"fmax must be > 0 eV/Å, got {fmax}")
    out.mkdir(parents=True, exist_ok=True)
    cat_path = out / "catalog.json"
    done: dict[str, CatalogEntry] = {}
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with _build_lock(out):
        done, started = _done_entries(out, potential=potential, fmax=fmax, prototypes=prototypes,
                                      started=started)
    todo = [m for m in ids if m not in done]
    if workers < 1:
        raise C2NPInputError(f"workers must be >= 1, got {workers}")
    if workers > 1 and len(todo) > 1:
        return _build_in_processes(out, ids, todo, workers, started, progress=progress,
                                   potential=potential, fmax=fmax, prototypes=tuple(prototypes),
                                   max_steps=max_steps, optimizer=optimizer, num_threads=num_threads)
    if todo:
        import torch

        if num_threads is not None:
            torch.set_num_threads(int(num_threads))
        _load_potential(potential)
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo) * len(prototypes), desc="catalog", unit="relax")
    try:
        for mid in todo:
            with _build_lock(out):  # another process sharing the folder may have done it
                others, _ = _done_entries(out, potential=potential, fmax=fmax, prototypes=prototypes,
                                          started=started)
            if mid in others:
                done[mid] = others[mid]
                if bar is not None:
                    bar.update(len(prototypes))
                continue
            if bar is not None:
                bar.set_postfix_str(mid)
            try:
                entry, cell = relax_material(mid, potential=potential, prototypes=prototypes,
                                             fmax_ev_per_angstrom=fmax,
                                             max_steps=max_steps, optimizer=optimizer,
                                             on_prototype_done=(lambda _r: bar.update(1)) if bar else None)
            except Exception as exc:  # recorded as a failure; the build goes on
                comp = _composition(mid)
                entry = CatalogEntry(mid, mid, comp.a_site, comp.b_site, "failed",
                                     f"{type(exc).__name__}: {exc}", None, {}, None, None, None, None,
                                     None, None, None, None, None, tolerance_factor(comp), potential, "",
                                     fmax, optimizer.upper(), max_steps, "", 0.0, ())
                cell = None
            if cell is not None:
                write_cif(cell, out / f"{mid}.cif")
            done[mid] = entry
            with _build_lock(out):  # merge with what other processes recorded meanwhile
                merged, _ = _done_entries(out, potential=potential, fmax=fmax, prototypes=None,
                                          started=started)
                merged[mid] = entry
                write_text(cat_path, json.dumps(_catalog_document(
                    merged.values(), potential=potential, fmax=fmax, started=started), indent=1) + "\n")
    finally:
        if bar is not None:
            bar.close()
    if not cat_path.exists():
        write_text(cat_path, json.dumps(_catalog_document(done.values(), potential=potential,
                                                                  fmax=fmax, started=started), indent=1) + "\n")
    return [done[m] for m in ids]


_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _build_one(job: tuple[str, str, dict[str, Any]]) -> str:
    """Worker of :func:`_build_in_processes`: build one material into the shared folder."""
    out, mid, kwargs = job
    build_catalog(out, only=[mid], progress=False, workers=1, **kwargs)
    return mid


def _build_in_processes(out: Path, ids: list[str], todo: list[str], workers: int, started: str,
                        *, progress: bool, **kwargs: Any) -> list[CatalogEntry]:
    """:func:`build_catalog` of ``todo`` over ``workers`` spawned processes, one material
    per task; every worker merges its result into ``out/catalog.json`` under the lock."""
    import multiprocessing as mp

    cat_path = out / "catalog.json"
    with _build_lock(out):  # one build start time for every worker
        if not cat_path.exists():
            write_text(cat_path, json.dumps(_catalog_document(
                [], potential=kwargs["potential"], fmax=kwargs["fmax"], started=started), indent=1) + "\n")
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc=f"catalog ({workers} workers)", unit="material")
    jobs = [(str(out), mid, kwargs) for mid in todo]
    # Spawned workers read these at import: without them each worker's BLAS/OpenMP pools
    # start one thread per CPU, and N workers oversubscribe the machine (measured: 2
    # workers on 2 cores ran at about half speed).
    threads = str(kwargs.get("num_threads") or 1)
    saved = {k: os.environ.get(k) for k in _THREAD_ENV}
    os.environ.update({k: threads for k in _THREAD_ENV})
    try:
        with mp.get_context("spawn").Pool(min(workers, len(todo))) as pool:
            for mid in pool.imap_unordered(_build_one, jobs, chunksize=1):
                if bar is not None:
                    bar.set_postfix_str(mid)
                    bar.update(1)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if bar is not None:
            bar.close()
    with _build_lock(out):
        done, _ = _done_entries(out, potential=kwargs["potential"], fmax=kwargs["fmax"],
                                prototypes=None, started=started)
    return [done[m] for m in ids]


# --- the shipped catalog -----------------------------------------------------------------
def catalog_data_dir() -> Any:
    """The package data folder of the shipped catalog (an importlib Traversable)."""
    from importlib.resources import files

    return files("c2np") / "data" / "catalog"


def _shipped_document() -> dict[str, Any]:
    res = catalog_data_dir() / "catalog.json"
    if not res.is_file():
        raise C2NPInputError("the shipped catalog is missing (c2np/data/catalog/catalog.json); "
                             "run `c2np catalog build` or reinstall c2np")
    try:
        return json.loads(res.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise C2NPInputError(f"c2np/data/catalog/catalog.json: not valid JSON (line {exc.lineno}: "
                             f"{exc.msg})") from exc


def catalog_entries() -> list[CatalogEntry]:
    """Provenance records of the shipped materials (status ``ok``), sorted by id."""
    doc = _shipped_document()
    return sorted((CatalogEntry.from_dict(r) for r in doc["materials"]), key=lambda e: e.material_id)


def catalog_failures() -> list[dict[str, Any]]:
    """Failed and not-built compositions of the shipped catalog, with reasons."""
    doc = _shipped_document()
    return list(doc["failures"]) + list(doc.get("not_built", []))


def _shipped_cell(material_id: str) -> UnitCell:
    res = catalog_data_dir() / f"{material_id}.cif"
    if not res.is_file():
        raise C2NPInputError(f"c2np/data/catalog/{material_id}.cif: listed in catalog.json but missing")
    return read_cif_text(res.read_text(encoding="utf-8"), source=f"c2np/data/catalog/{material_id}.cif",
                         material_id=material_id)


def get_cell(material_id: str) -> UnitCell:
    """The shipped relaxed unit cell of ``material_id``; unknown ids raise
    :class:`C2NPInputError` naming the valid ones."""
    ids = [e.material_id for e in catalog_entries()]
    if material_id not in ids:
        raise C2NPInputError(f"unknown catalog material {material_id!r}; valid ids: {', '.join(ids)}")
    return _shipped_cell(material_id)


def load_catalog() -> list[UnitCell]:
    """Every shipped catalog cell, sorted by material id."""
    return [_shipped_cell(e.material_id) for e in catalog_entries()]


#: A small fixed set spanning cubic, tetragonal, trigonal and orthorhombic perovskites.
_DEMO_CANDIDATES: tuple[str, ...] = ("KMgH3", "NaMgH3", "CsCaH3", "SrLiH3", "RbCaH3", "KCaH3",
                                     "NaCaH3", "KZnH3", "BaLiH3", "CsMgH3")


def default_demo_materials(n: int = 4) -> list[str]:
    """A small fixed list of ``n`` shipped ids covering as many space groups as possible
    (for a five-minute demo). Deterministic: well-known compounds first, then by id, each
    pass taking only space groups not yet covered; then filling up in the same order."""
    entries = {e.material_id: e for e in catalog_entries()}
    order = [m for m in _DEMO_CANDIDATES if m in entries] + sorted(m for m in entries if m not in _DEMO_CANDIDATES)
    picked: list[str] = []
    seen: set[int | None] = set()
    for mid in order:
        sg = entries[mid].spacegroup_symprec_1e_3
        if len(picked) < n and sg not in seen:
            picked.append(mid)
            seen.add(sg)
    for mid in order:
        if len(picked) < n and mid not in picked:
            picked.append(mid)
    return picked
