"""The catalog materials of the structure types beyond the ABH3 tilt variants.

Each material is one composition in one structure type (:mod:`c2np.catalog.structure_types`),
with cations of plausible oxidation states for the type:

- polytypes ABH3 (2H, 4H, 6H, 9R): A+ in {K, Rb, Cs} (large: hexagonal stacking needs a
  tolerance factor above 1), B2+ in {Be, Mg, Mn, Fe, Co, Ni, Zn};
- Ruddlesden-Popper A2BH4 and A3B2H7: A+ alkali, B2+ as above (K2MgH4, Rb2MgH4, K3Mg2H7 exist);
- K2PtCl6-type A2BH6: A2+ alkaline earth with the 18-electron complexes [FeH6]4-, [RuH6]4-,
  [OsH6]4- (Mg2FeH6, Ca2RuH6, Ba2OsH6 exist) and A+ alkali with [PtH6]2-, [PdH6]2- (K2PtH6);
- double perovskites A2BB'H6: A+ alkali, B+ in {Li, Na}, B'3+ in {Al, Ga, Sc, In, Y} (K2LiAlH6,
  Na2LiAlH6 exist); the tilt variant is chosen by the tolerance factor (:func:`double_perovskite_type`).

Material ids are the formula (``K2MgH4``); a formula that two catalog materials share (a
polytype of an ABH3 composition) takes the type after a dash (``CsMgH3-2H``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from c2np.catalog.structure_types import STRUCTURE_TYPES, bond_length_angstrom
from c2np.errors import C2NPInputError

__all__ = ["TypedComposition", "typed_compositions", "typed_material_ids", "typed_composition",
           "double_perovskite_type", "double_perovskite_tolerance"]

_POLY_A = ("K", "Rb", "Cs")
_POLY_B = ("Be", "Mg", "Mn", "Fe", "Co", "Ni", "Zn")
_RP_B = ("Mg", "Ca", "Mn", "Fe", "Co", "Ni", "Zn")
_COMPLEX_AE = (("Mg", "Ca", "Sr", "Ba"), ("Fe", "Ru", "Os"))
_COMPLEX_ALKALI = (("Na", "K", "Rb", "Cs"), ("Pt", "Pd"))
_DP_A, _DP_B, _DP_B2 = ("Na", "K", "Rb", "Cs"), ("Li", "Na"), ("Al", "Ga", "Sc", "In", "Y")


@dataclass(frozen=True)
class TypedComposition:
    """One composition in one structure type: ``species`` maps the type's roles (``A``,
    ``B``, ``B2``) to elements; ``material_id`` is unique in the catalog."""

    material_id: str
    structure_type: str
    species: tuple[tuple[str, str], ...]

    @property
    def roles(self) -> dict[str, str]:
        """Role -> element."""
        return dict(self.species)

    @property
    def formula(self) -> str:
        """The chemical formula, e.g. ``Rb2MgH4``."""
        return STRUCTURE_TYPES[self.structure_type].formula_of(self.roles)


def double_perovskite_tolerance(a: str, b: str, b2: str) -> float:
    """Goldschmidt factor of A2BB'H6 with the mean octahedral bond: d(A-H) / (sqrt(2) d(B-H))."""
    d_oct = 0.5 * (bond_length_angstrom(b, role="oct") + bond_length_angstrom(b2, role="oct"))
    return bond_length_angstrom(a, role="large") / (math.sqrt(2.0) * d_oct)


def double_perovskite_type(a: str, b: str, b2: str) -> str:
    """The tilt variant a crystallographer would start A2BB'H6 from, by tolerance factor t
    (on the radii of this module, cubic KMgH3 has t = 1.03 and orthorhombic NaMgH3 0.94):
    untilted (Fm-3m) for t >= 1.02, a0a0c- (I4/m) for 0.98 <= t < 1.02, a-a-a- (R-3) for
    0.95 <= t < 0.98, the cryolite tilt a-b+a- (P2_1/n) below."""
    t = double_perovskite_tolerance(a, b, b2)
    if t >= 1.02:
        return "DP-Fm-3m"
    if t >= 0.98:
        return "DP-I4/m"
    if t >= 0.95:
        return "DP-R-3"
    return "DP-P21/n"


def _raw() -> list[tuple[str, dict[str, str]]]:
    out: list[tuple[str, dict[str, str]]] = []
    polytypes: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
        ("2H", _POLY_A, _POLY_B), ("4H", ("Rb", "Cs"), ("Be", "Mg", "Mn", "Co", "Ni", "Zn")),
        ("6H", ("Rb", "Cs"), ("Mg", "Mn", "Ni", "Zn")), ("9R", ("Rb", "Cs"), ("Mg", "Co", "Ni", "Zn")))
    for name, a_sites, b_sites in polytypes:
        out += [(name, {"A": a, "B": b}) for a in a_sites for b in b_sites]
    out += [("RP1", {"A": a, "B": b}) for a in ("Na", "K", "Rb", "Cs") for b in _RP_B]
    out += [("RP2", {"A": a, "B": b}) for a in ("K", "Rb", "Cs") for b in ("Mg", "Mn", "Co", "Ni", "Zn")]
    complexes: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (_COMPLEX_AE, _COMPLEX_ALKALI)
    for a_sites, b_sites in complexes:
        out += [("K2PtCl6", {"A": a, "B": b}) for a in a_sites for b in b_sites]
    out += [(double_perovskite_type(a, b, b2), {"A": a, "B": b, "B2": b2})
            for a in _DP_A for b in _DP_B for b2 in _DP_B2 if a != b]
    return out


@lru_cache(maxsize=1)
def typed_compositions() -> tuple[TypedComposition, ...]:
    """Every material of the extra structure types, sorted by id."""
    from c2np.catalog.hydrides import material_ids

    taken = {m: 1 for m in material_ids()}
    raw = [(name, roles, STRUCTURE_TYPES[name].formula_of(roles)) for name, roles in _raw()]
    for _, _, formula in raw:
        taken[formula] = taken.get(formula, 0) + 1
    comps = [TypedComposition(formula if taken[formula] == 1 else f"{formula}-{name}", name,
                              tuple(sorted(roles.items()))) for name, roles, formula in raw]
    return tuple(sorted(comps, key=lambda c: c.material_id))


def typed_material_ids() -> list[str]:
    """Ids of the materials of the extra structure types, sorted."""
    return [c.material_id for c in typed_compositions()]


def typed_composition(material_id: str) -> TypedComposition:
    """The typed composition of ``material_id``; unknown ids raise :class:`C2NPInputError`."""
    for comp in typed_compositions():
        if comp.material_id == material_id:
            return comp
    raise C2NPInputError(f"unknown structure-type material {material_id!r}")
