"""Relaxation of one material of a structure type, with the topology check.

The material's prototype (:func:`~c2np.catalog.structure_types.build_structure_type`) is
relaxed exactly as the ABH3 prototypes are (:func:`~c2np.catalog.relaxation.relax_prototype`:
CHGNet, ``FixSymmetry`` + ``FrechetCellFilter``, FIRE to fmax 0.01 eV/Å, the same physical
checks) and then refused when it left its structure type
(:func:`~c2np.catalog.topology.topology_defect`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from c2np.catalog.families import typed_composition
from c2np.catalog.records import CatalogEntry, PrototypeResult
from c2np.catalog.relaxation import load_potential, relax_prototype, shortest_distance_angstrom
from c2np.catalog.structure_types import STRUCTURE_TYPES, bond_length_angstrom, build_structure_type
from c2np.catalog.topology import topology_defect
from c2np.cells import UnitCell, standardize

__all__ = ["relax_typed_material", "typed_tolerance_factor", "with_polymorph_energies",
           "reduced_formula"]


def typed_tolerance_factor(structure_type: str, roles: dict[str, str]) -> float:
    """d(A-H) / (sqrt(2) mean d(B-H)) from the starting bond lengths (the Goldschmidt factor
    of the perovskite block; covalent M-H bonds for the K2PtCl6 type)."""
    role = "complex" if structure_type == "K2PtCl6" else "oct"
    octs = [bond_length_angstrom(roles[r], role=role) for r in STRUCTURE_TYPES[structure_type].octahedral_roles]
    return bond_length_angstrom(roles["A"], role="large") / (math.sqrt(2.0) * sum(octs) / len(octs))


def relax_typed_material(material_id: str, *, potential: str = "chgnet", fmax_ev_per_angstrom: float = 0.01,
                         max_steps: int = 1000, optimizer: str = "FIRE") -> tuple[CatalogEntry, UnitCell | None]:
    """Relax one structure-type material; the record and its standardized conventional cell
    (``None`` when the relaxation was refused)."""
    import spglib

    comp = typed_composition(material_id)
    st = STRUCTURE_TYPES[comp.structure_type]
    roles = comp.roles
    pot = load_potential(potential)
    start = time.perf_counter()
    atoms = build_structure_type(comp.structure_type, roles)
    res, relaxed = relax_prototype(atoms, pot.calculator, prototype=st.name,
                                   fmax_ev_per_angstrom=fmax_ev_per_angstrom, max_steps=max_steps,
                                   optimizer=optimizer)
    if res.status == "ok":
        octahedral = [roles[r] for r in st.octahedral_roles]
        defect = topology_defect(atoms, relaxed, octahedral, spacegroup=st.spacegroup,
                                 relaxed_spacegroup=res.spacegroup_symprec_1e_3)
        if defect:
            res = dataclasses.replace(res, status="rejected", reason=f"left the {st.name} type: {defect}")
    common: dict[str, Any] = dict(
        material_id=material_id, formula=comp.formula, a_site=roles["A"], b_site=roles["B"],
        prototype_energies_ev_per_atom={st.name: res.energy_per_atom_ev},
        tolerance_factor=typed_tolerance_factor(st.name, roles), potential=pot.name,
        potential_version=pot.version, fmax_ev_per_angstrom=fmax_ev_per_angstrom,
        optimizer=optimizer.upper(), max_steps=max_steps, symmetry_library=f"spglib {spglib.__version__}",
        prototypes=(res,), structure_type=st.name, prototype_compound=st.prototype, species=roles,
    )
    if res.status != "ok":
        entry = CatalogEntry(status="failed", reason=f"{st.name}: {res.reason}", chosen_prototype=None,
                             energy_per_atom_ev=None, max_force_ev_per_angstrom=None, max_stress_gpa=None,
                             spacegroup_symprec_1e_3=None, spacegroup_symprec_1e_1=None,
                             international_symprec_1e_3=None, lattice_parameters=None,
                             n_atoms_conventional=None, shortest_distance_angstrom=None,
                             time_s=time.perf_counter() - start, **common)
        return entry, None
    raw = UnitCell.from_ase(relaxed, material_id)
    std = standardize(raw, symprec_angstrom=1e-3)
    loose = standardize(raw, symprec_angstrom=1e-1)
    cell = std.to_unit_cell(material_id)
    entry = CatalogEntry(
        status="ok", reason="", chosen_prototype=st.name, energy_per_atom_ev=res.energy_per_atom_ev,
        max_force_ev_per_angstrom=res.max_force_ev_per_angstrom, max_stress_gpa=res.max_stress_gpa,
        spacegroup_symprec_1e_3=std.spacegroup, spacegroup_symprec_1e_1=loose.spacegroup,
        international_symprec_1e_3=std.international,
        lattice_parameters=dict(zip(("a", "b", "c", "alpha", "beta", "gamma"), std.lattice_params)),
        n_atoms_conventional=cell.n_atoms,
        shortest_distance_angstrom=shortest_distance_angstrom(cell.lattice_angstrom, cell.frac_coords),
        time_s=time.perf_counter() - start, **common)
    return entry, cell


def reduced_formula(formula: str) -> str:
    """The reduced formula (element order of the formula), e.g. ``Cs2Mg2H6`` -> ``CsMgH3``."""
    import re
    from math import gcd

    parts = [(el, int(n) if n else 1) for el, n in re.findall(r"([A-Z][a-z]?)(\d*)", formula)]
    g = 0
    for _, n in parts:
        g = gcd(g, n)
    return "".join(f"{el}{n // g if n // g > 1 else ''}" for el, n in parts)


def with_polymorph_energies(entries: Iterable[CatalogEntry]) -> list[CatalogEntry]:
    """``entries`` with ``energy_above_polymorph_ev_per_atom`` set on the built ones: the
    energy per atom above the lowest built material of the same reduced formula (eV/atom);
    the structure type is filled in for records that predate it."""
    entries = list(entries)
    lowest: dict[str, float] = defaultdict(lambda: math.inf)
    for e in entries:
        if e.status == "ok" and e.energy_per_atom_ev is not None:
            key = reduced_formula(e.formula)
            lowest[key] = min(lowest[key], e.energy_per_atom_ev)
    out = []
    for e in entries:
        if e.status != "ok" or e.energy_per_atom_ev is None:
            out.append(e)
            continue
        out.append(dataclasses.replace(
            e, structure_type=e.structure_type_name,
            prototype_compound=e.prototype_compound or "CaTiO3 (perovskite)",
            energy_above_polymorph_ev_per_atom=e.energy_per_atom_ev - lowest[reduced_formula(e.formula)]))
    return out


def prototype_result_of(entry: CatalogEntry) -> PrototypeResult | None:
    """The relaxation record of the chosen prototype, if any."""
    return next((p for p in entry.prototypes if p.prototype == entry.chosen_prototype), None)
