"""The catalog compositions: perovskite hydrides ABH3 and their ionic radii.

A in {Li, Na, K, Rb, Cs} x B in {Be, Mg, Ca, Sr, Ba, Al, Sc, Ti, V, Cr, Mn, Fe, Co, Ni, Cu,
Zn} (80) plus the inverse perovskites SrLiH3 and BaLiH3 (alkaline earth on the A site, Li on
the octahedral B site). Material ids are the formula with the A-site cation first, e.g.
``KMgH3``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from c2np.errors import C2NPInputError

__all__ = [
    "A_SITES",
    "B_SITES",
    "INVERSE_PEROVSKITES",
    "Composition",
    "compositions",
    "material_ids",
    "composition",
    "start_lattice_constant_angstrom",
    "tolerance_factor",
]

A_SITES: tuple[str, ...] = ("Li", "Na", "K", "Rb", "Cs")
B_SITES: tuple[str, ...] = ("Be", "Mg", "Ca", "Sr", "Ba", "Al", "Sc", "Ti", "V", "Cr", "Mn",
                            "Fe", "Co", "Ni", "Cu", "Zn")
#: Inverse perovskites: (A site, B site). The alkaline earth takes the 12-fold A site.
INVERSE_PEROVSKITES: tuple[tuple[str, str], ...] = (("Sr", "Li"), ("Ba", "Li"))

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


def composition(material_id: str) -> Composition:
    """The composition of a catalog id; unknown ids raise :class:`C2NPInputError` naming
    the valid ones."""
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
    a_cuboct = math.sqrt(2.0) * (_R_A_12[comp.a_site] + _R_HYDRIDE)
    return max(a_oct, a_cuboct) if prototype == "Pm-3m" else a_oct


def tolerance_factor(comp: Composition) -> float:
    """Goldschmidt tolerance factor t = (r_A + r_H) / (sqrt(2) (r_B + r_H))."""
    return (_R_A_12[comp.a_site] + _R_HYDRIDE) / (math.sqrt(2.0) * (_R_B_6[comp.b_site] + _R_HYDRIDE))
