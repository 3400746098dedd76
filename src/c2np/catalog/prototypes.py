"""The four perovskite prototypes every catalog composition is started from.

The cubic aristotype Pm-3m and three octahedrally tilted ones made from a 2x2x2 cubic
supercell by a Glazer tilt pattern: a-b+a- (Pnma), a-a-a- (R-3c) and a0a0c- (I4/mcm).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from c2np.catalog.hydrides import Composition, start_lattice_constant_angstrom
from c2np.errors import C2NPError, C2NPInputError

__all__ = ["PROTOTYPES", "PROTOTYPE_SPACEGROUP", "build_prototype"]

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
