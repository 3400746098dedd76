"""Relaxation of one composition with a universal potential, and the physical checks.

Each prototype is relaxed (positions and cell) with CHGNet (default) or SevenNet under
ASE's ``FixSymmetry`` constraint and a ``FrechetCellFilter``; the prototype of lowest
energy per atom is kept. Unphysical, non-converged or framework-breaking relaxations are
rejected with the reason recorded. The potentials (and ASE, spglib) are imported only
inside the functions that need them.
"""

from __future__ import annotations

import contextlib
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from c2np.catalog.hydrides import (
    composition,
    start_lattice_constant_angstrom,
    tolerance_factor,
)
from c2np.catalog.prototypes import PROTOTYPES, build_prototype
from c2np.catalog.records import CatalogEntry, PrototypeResult
from c2np.cells import UnitCell, standardize
from c2np.errors import C2NPError, C2NPInputError

__all__ = [
    "POTENTIALS",
    "MIN_DISTANCE_ANGSTROM",
    "MAX_VOLUME_RATIO",
    "ENERGY_TIE_EV_PER_ATOM",
    "Potential",
    "load_potential",
    "shortest_distance_angstrom",
    "framework_defect",
    "relax_prototype",
    "choose_prototype",
    "relax_material",
]

#: Shortest interatomic distance below which a result is unphysical (Å).
MIN_DISTANCE_ANGSTROM = 0.6
#: Largest allowed volume change factor relative to the starting prototype.
MAX_VOLUME_RATIO = 3.0
#: Energy ties (eV/atom) are broken in favour of the higher-symmetry prototype.
ENERGY_TIE_EV_PER_ATOM = 2e-4
EV_PER_A3_TO_GPA = 160.21766208
POTENTIALS: tuple[str, ...] = ("chgnet", "sevenn")


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


@dataclass(frozen=True)
class Potential:
    """A loaded potential: its name, version string and ASE calculator."""

    name: str
    version: str
    calculator: Any


_POTENTIAL_CACHE: dict[str, Potential] = {}


def load_potential(name: str) -> Potential:
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
        pot = Potential("chgnet", version, calc)
    elif name == "sevenn":
        try:
            import sevenn
            from sevenn.calculator import SevenNetCalculator
        except ImportError as exc:
            raise C2NPInputError("potential 'sevenn' needs the sevenn package, which is not "
                                 "installed (pip install sevenn); or use --potential chgnet") from exc
        calc = SevenNetCalculator(model="7net-0", device="cpu")
        pot = Potential("sevenn", f"sevenn {getattr(sevenn, '__version__', '?')}, model 7net-0", calc)
    else:
        raise C2NPInputError(f"unknown potential {name!r}; valid: {', '.join(POTENTIALS)}")
    _POTENTIAL_CACHE[name] = pot
    return pot


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


def choose_prototype(results: Sequence[PrototypeResult]) -> PrototypeResult | None:
    """Lowest energy per atom among ``ok`` results; ties (within
    :data:`ENERGY_TIE_EV_PER_ATOM`) go to the earlier (higher-symmetry) prototype."""
    ok = [r for r in results if r.status == "ok" and r.energy_per_atom_ev is not None]
    if not ok:
        return None
    e_min = min(r.energy_per_atom_ev for r in ok)  # type: ignore[type-var]
    ties = [r for r in ok if r.energy_per_atom_ev <= e_min + ENERGY_TIE_EV_PER_ATOM]  # type: ignore[operator]
    rank = {name: i for i, name in enumerate(PROTOTYPES)}
    return min(ties, key=lambda r: rank.get(r.prototype, len(rank)))


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

    comp = composition(material_id)
    pot = load_potential(potential)
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
    chosen = choose_prototype(results)
    common: dict[str, Any] = dict(
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
