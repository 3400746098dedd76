"""Textbook crystal prototypes built from Wyckoff positions (for tests, benchmarks, demos).

Each prototype is generated with :func:`ase.spacegroup.crystal` from its space group, its
lattice parameters (Å, degrees; room-temperature literature values, rounded) and the
fractional coordinates of its asymmetric unit. They cover the seven crystal families the
inverse solver must handle beyond the perovskite catalog: cubic metals, rock salt, fluorite,
hexagonal metals, wurtzite, rutile, corundum, A7 arsenic, and perovskites (cubic and
GdFeO3-type tilted, strongly and barely).
"""

from __future__ import annotations

from dataclasses import dataclass

from c2np.cells import UnitCell
from c2np.errors import C2NPInputError

__all__ = ["Prototype", "TEXTBOOK_PROTOTYPES", "prototype_cell", "prototype_names"]


@dataclass(frozen=True)
class Prototype:
    """A crystal given by its space group and asymmetric unit.

    Attributes:
        name: material id, e.g. ``"NaCl-rocksalt"``.
        spacegroup: international number (ITA standard setting; R groups hexagonal axes).
        symbols: element of each Wyckoff site.
        basis_frac: fractional coordinates of each Wyckoff site.
        cellpar: (a, b, c, alpha, beta, gamma) in Å and degrees.
    """

    name: str
    spacegroup: int
    symbols: tuple[str, ...]
    basis_frac: tuple[tuple[float, float, float], ...]
    cellpar: tuple[float, float, float, float, float, float]


def _cub(a: float) -> tuple[float, float, float, float, float, float]:
    return (a, a, a, 90.0, 90.0, 90.0)


def _hex(a: float, c: float) -> tuple[float, float, float, float, float, float]:
    return (a, a, c, 90.0, 90.0, 120.0)


TEXTBOOK_PROTOTYPES: tuple[Prototype, ...] = (
    Prototype("Cu-fcc", 225, ("Cu",), ((0, 0, 0),), _cub(3.615)),
    Prototype("Fe-bcc", 229, ("Fe",), ((0, 0, 0),), _cub(2.866)),
    Prototype("Mg-hcp", 194, ("Mg",), ((1 / 3, 2 / 3, 0.25),), _hex(3.209, 5.211)),
    Prototype("NaCl-rocksalt", 225, ("Na", "Cl"), ((0, 0, 0), (0.5, 0.5, 0.5)), _cub(5.640)),
    Prototype("CaF2-fluorite", 225, ("Ca", "F"), ((0, 0, 0), (0.25, 0.25, 0.25)), _cub(5.463)),
    Prototype("ZnO-wurtzite", 186, ("Zn", "O"), ((1 / 3, 2 / 3, 0.0), (1 / 3, 2 / 3, 0.3819)),
              _hex(3.250, 5.207)),
    Prototype("TiO2-rutile", 136, ("Ti", "O"), ((0, 0, 0), (0.3049, 0.3049, 0.0)),
              (4.594, 4.594, 2.959, 90.0, 90.0, 90.0)),
    Prototype("Al2O3-corundum", 167, ("Al", "O"), ((0, 0, 0.35216), (0.30624, 0.0, 0.25)),
              _hex(4.759, 12.991)),
    Prototype("As-A7", 166, ("As",), ((0, 0, 0.2271),), _hex(3.760, 10.548)),
    Prototype("KMgH3-cubic", 221, ("K", "Mg", "H"), ((0.5, 0.5, 0.5), (0, 0, 0), (0.5, 0, 0)),
              _cub(4.023)),
    # GdFeO3-type a-b+a- tilts (Pnma, CaTiO3 coordinates) with NaMgH3-like lattice lengths.
    Prototype("NaMgH3-Pnma", 62, ("Na", "Mg", "H", "H"),
              ((0.0486, 0.25, 0.9897), (0.0, 0.0, 0.5), (0.4758, 0.25, 0.0906),
               (0.2888, 0.0372, 0.7108)),
              (5.463, 7.702, 5.411, 90.0, 90.0, 90.0)),
    # The same tilt pattern at 4 % of the amplitude: atoms within ~0.01 Å of the P4/mbm-like
    # aristotype positions, like several relaxed catalog hydrides (pseudo-symmetry test).
    Prototype("CsMgH3-Pnma-pseudo", 62, ("Cs", "Mg", "H", "H"),
              ((0.04 * 0.0486, 0.25, 1.0 - 0.04 * 0.0103), (0.0, 0.0, 0.5),
               (0.5 - 0.04 * 0.0242, 0.25, 0.04 * 0.0906),
               (0.25 + 0.04 * 0.0388, 0.04 * 0.0372, 0.75 - 0.04 * 0.0392)),
              (6.125, 8.338, 6.125, 90.0, 90.0, 90.0)),
)


def prototype_names() -> list[str]:
    """Names of the built-in prototypes."""
    return [p.name for p in TEXTBOOK_PROTOTYPES]


def prototype_cell(name: str) -> UnitCell:
    """The conventional :class:`UnitCell` of a built-in prototype (ASE's frame)."""
    from ase.spacegroup import crystal

    for proto in TEXTBOOK_PROTOTYPES:
        if proto.name == name:
            atoms = crystal(list(proto.symbols), basis=[list(b) for b in proto.basis_frac],
                            spacegroup=proto.spacegroup, cellpar=list(proto.cellpar),
                            primitive_cell=False)
            return UnitCell.from_ase(atoms, proto.name)
    raise C2NPInputError(f"unknown prototype {name!r}; known: {', '.join(prototype_names())}")
