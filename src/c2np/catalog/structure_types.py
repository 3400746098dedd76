"""Perovskite-related hydride structure types beyond the four ABH3 tilt variants.

Each type is built from its own prototype (ideal coordinates, lattice from bond lengths) and
reduced to its primitive cell; :func:`build_structure_type` checks the prototype's space group.

- hexagonal perovskite polytypes ABH3 (``2H`` BaNiO3-type, ``4H``, ``6H``: P6_3/mmc; ``9R``:
  R-3m), stacked close-packed AH3 layers with B in the all-H octahedra between them, built
  from their Jagodzinski (h/c) sequence (``ccc`` gives the cubic perovskite);
- Ruddlesden-Popper ``RP1`` A2BH4 (K2NiF4-type, I4/mmm) and ``RP2`` A3B2H7 (Sr3Ti2O7-type,
  I4/mmm);
- ``K2PtCl6`` A2BH6 (Fm-3m, the Mg2FeH6 family: isolated BH6 octahedra);
- double perovskites A2BB'H6 with rock-salt order of B and B' (``elpasolite`` Fm-3m, K2LiAlH6)
  and its Glazer tilt variants ``DP-I4/m`` (a0a0c-), ``DP-R-3`` (a-a-a-), ``DP-P21/n``
  (a-b+a-, the cryolite tilt).

The species of a material fill the type's roles: ``A`` (the large cation), ``B`` (the
octahedral cation) and ``B2`` (the second octahedral cation of a double perovskite).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from c2np.errors import C2NPError, C2NPInputError

__all__ = ["StructureType", "STRUCTURE_TYPES", "structure_type", "build_structure_type",
           "polytype_layers", "bond_length_angstrom"]

#: Hydride radius (Å) of the ABH3 catalog (2 (r_Mg + r_H) reproduces a(KMgH3)).
_R_HYDRIDE = 1.30
#: Shannon radii (Å): large cation (12-fold; Mg and Li 8-fold) and octahedral cation (6-fold).
_R_LARGE: dict[str, float] = {"Li": 1.25, "Na": 1.39, "K": 1.64, "Rb": 1.72, "Cs": 1.88, "Mg": 0.89,
                              "Ca": 1.34, "Sr": 1.44, "Ba": 1.61, "Eu": 1.35}
_R_OCT: dict[str, float] = {"Li": 0.76, "Na": 1.02, "Be": 0.45, "Mg": 0.72, "Ca": 1.00, "Sr": 1.18,
                            "Al": 0.535, "Ga": 0.62, "In": 0.80, "Sc": 0.745, "Y": 0.90, "Mn": 0.83,
                            "Fe": 0.78, "Co": 0.745, "Ni": 0.69, "Zn": 0.74}
#: M-H bond lengths (Å) of the covalent complex hydrides (FeH6 4-, RuH6 4-, PtH6 2-, ...),
#: from Mg2FeH6, Mg2RuH6, Mg2OsH6, K2PtH6 and K2PdH6-type structures.
_COMPLEX_BOND: dict[str, float] = {"Fe": 1.56, "Ru": 1.67, "Os": 1.68, "Pt": 1.64, "Pd": 1.62,
                                   "Ir": 1.67, "Rh": 1.65, "Co": 1.52}


def bond_length_angstrom(species: str, *, role: str) -> float:
    """Starting cation-H distance (Å): ``role`` ``oct`` (octahedral, ionic radii), ``large``
    (12-fold site) or ``complex`` (covalent complex-hydride bond)."""
    table = {"oct": _R_OCT, "large": _R_LARGE}.get(role)
    if role == "complex":
        if species not in _COMPLEX_BOND:
            raise C2NPInputError(f"no complex-hydride bond length for {species!r}")
        return _COMPLEX_BOND[species]
    if table is None or species not in table:
        raise C2NPInputError(f"no {role} radius for {species!r}")
    return table[species] + _R_HYDRIDE


def _pseudocubic_a(a: str, b: str) -> float:
    """Pseudo-cubic perovskite constant (Å): the larger of 2 d(B-H) and sqrt(2) d(A-H)."""
    return max(2.0 * bond_length_angstrom(b, role="oct"), math.sqrt(2.0) * bond_length_angstrom(a, role="large"))


# ----------------------------------------------------------------------------- polytypes

_SHIFT = {"A": np.array([0.0, 0.0]), "B": np.array([1.0 / 3, 2.0 / 3]), "C": np.array([2.0 / 3, 1.0 / 3])}


def polytype_layers(jagodzinski: str) -> str:
    """Stacking letters (A/B/C) of the close-packed layers of an h/c sequence.

    A layer is ``h`` when its two neighbours have the same letter, ``c`` otherwise. Raises
    :class:`C2NPInputError` when the sequence does not close on itself (e.g. ``hc`` alone).
    """
    seq = jagodzinski.lower()
    if not seq or set(seq) - {"h", "c"}:
        raise C2NPInputError(f"not a Jagodzinski sequence of h and c: {jagodzinski!r}")
    letters = ["A", "B"]
    for k in range(1, len(seq) + 1):
        prev, cur = letters[k - 1], letters[k]
        third = ({"A", "B", "C"} - {prev, cur}).pop()
        letters.append(prev if seq[k % len(seq)] == "h" else third)
    n = len(seq)
    if letters[n] != letters[0] or letters[n + 1] != letters[1]:
        raise C2NPInputError(f"the stacking {jagodzinski!r} does not repeat after {n} layers")
    return "".join(letters[:n])


def _hexagonal_polytype(jagodzinski: str, species: Mapping[str, str]) -> tuple[np.ndarray, list[str], np.ndarray]:
    """ABH3 polytype: close-packed AH3 layers stacked by ``jagodzinski``, one B per layer
    pair in the octahedron of six H between them. Returns (lattice, species, frac)."""
    letters = polytype_layers(jagodzinski)
    n = len(letters)
    a_c = _pseudocubic_a(species["A"], species["B"])
    a_h, layer = math.sqrt(2.0) * a_c, a_c / math.sqrt(3.0)
    lattice = np.array([[a_h, 0.0, 0.0], [-a_h / 2, a_h * math.sqrt(3.0) / 2, 0.0], [0.0, 0.0, n * layer]])
    sub = [np.array(v) for v in ((0.0, 0.0), (0.5, 0.0), (0.0, 0.5), (0.5, 0.5))]

    def hole_ok(l1: int, l2: int, a_pos: list[int], hole: np.ndarray) -> bool:
        """True when the six nearest sites of layers l1, l2 around ``hole`` are all H."""
        for lay in (l1, l2):
            pts = np.array([_SHIFT[letters[lay % n]] / 2 + s for s in sub])
            d = pts - hole
            d -= np.round(d)
            cart = d @ lattice[:2, :2]
            near = np.argsort(np.linalg.norm(cart, axis=1))[:3]
            if a_pos[lay % n] in near:
                return False
        return True

    def holes(l1: int, l2: int, a_pos: list[int]) -> list[np.ndarray]:
        third = ({"A", "B", "C"} - {letters[l1 % n], letters[l2 % n]}).pop()
        return [_SHIFT[third] / 2 + s for s in sub if hole_ok(l1, l2, a_pos, _SHIFT[third] / 2 + s)]

    def extend(a_pos: list[int]) -> list[int] | None:
        """Depth-first: A-site choices layer by layer, each layer pair with one B hole."""
        if len(a_pos) == n:
            return a_pos if len(holes(n - 1, n, a_pos)) == 1 else None
        for choice in range(4):
            trial = [*a_pos, choice]
            if len(holes(len(a_pos) - 1, len(a_pos), trial)) == 1:
                done = extend(trial)
                if done is not None:
                    return done
        return None

    found_pos = extend([0])
    if found_pos is None:
        raise C2NPError(f"no A-site arrangement leaves one all-H octahedron per layer pair in {jagodzinski!r}")
    a_pos = found_pos
    found = [holes(k, k + 1, a_pos) for k in range(n)]
    out_sp: list[str] = []
    out_fr: list[np.ndarray] = []
    for k in range(n):
        base = _SHIFT[letters[k]] / 2
        for i, s in enumerate(sub):
            out_sp.append(species["A"] if i == a_pos[k] else "H")
            out_fr.append(np.array([*(base + s), k / n]))
        out_sp.append(species["B"])
        out_fr.append(np.array([*found[k][0], (k + 0.5) / n]))
    return lattice, out_sp, np.mod(np.array(out_fr), 1.0)


# ----------------------------------------------------------------------------- layered and cubic types

def _ruddlesden_popper(n_layers: int, species: Mapping[str, str]) -> tuple[np.ndarray, list[str], np.ndarray]:
    """A_{n+1}B_nH_{3n+1} (I4/mmm) for n = 1 (K2NiF4) or 2 (Sr3Ti2O7): perovskite slabs of
    ``n_layers`` octahedra between rock-salt AH layers; the body-centred conventional cell."""
    a = _pseudocubic_a(species["A"], species["B"])
    gap = 0.65 * a  # rock-salt layer: c/a = 3.3 for K2NiF4, 5.3 for Sr3Ti2O7
    c = 2.0 * (n_layers * a + gap)
    half = (n_layers * a) / 2.0  # half-height of a slab from its centre to its apical H plane
    pts: list[tuple[str, tuple[float, float, float]]] = []
    for centre in (np.array([0.0, 0.0, 0.0]), np.array([0.5, 0.5, 0.5])):
        off = centre[:2]
        z0 = centre[2] * c
        for k in range(n_layers):
            zb = z0 - half + a / 2 + k * a  # B plane heights
            pts += [(species["B"], (*off, zb)), ("H", (off[0] + 0.5, off[1], zb)), ("H", (off[0], off[1] + 0.5, zb))]
        for k in range(n_layers + 1):  # apical / shared H and A of each AH plane
            zh = z0 - half + k * a
            pts.append(("H", (*off, zh)))
            if 0 < k < n_layers:
                pts.append((species["A"], (off[0] + 0.5, off[1] + 0.5, zh)))
        for zh in (z0 - half, z0 + half):  # the rock-salt A above/below the apical H
            pts.append((species["A"], (off[0] + 0.5, off[1] + 0.5, zh)))
    lattice = np.diag([a, a, c])
    sp = [p[0] for p in pts]
    fr = np.array([[x, y, z / c] for _, (x, y, z) in pts])
    return lattice, sp, np.mod(fr, 1.0)


def _k2ptcl6(species: Mapping[str, str]) -> tuple[np.ndarray, list[str], np.ndarray]:
    """A2BH6 (Fm-3m): isolated BH6 octahedra on the fcc sites, A in the tetrahedral holes.
    ``a`` solves d(A-H) = a sqrt((1/4 - x)^2 + 1/8) with x = d(B-H) / a."""
    d_bh = bond_length_angstrom(species["B"], role="complex")
    d_ah = bond_length_angstrom(species["A"], role="large")
    # (a/4 - d_bh)^2 + a^2/8 = d_ah^2  ->  (3/16) a^2 - (d_bh/2) a + d_bh^2 - d_ah^2 = 0
    qa, qb, qc = 3.0 / 16.0, -d_bh / 2.0, d_bh ** 2 - d_ah ** 2
    a = (-qb + math.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa)
    x = d_bh / a
    fcc = [np.array(v) for v in ((0, 0, 0), (0, 0.5, 0.5), (0.5, 0, 0.5), (0.5, 0.5, 0))]
    sp: list[str] = []
    fr: list[np.ndarray] = []
    for t in fcc:
        sp.append(species["B"])
        fr.append(t)
        for axis, sign in itertools.product(range(3), (1.0, -1.0)):
            v = np.zeros(3)
            v[axis] = sign * x
            sp.append("H")
            fr.append(t + v)
        for q in (0.25, 0.75):
            sp.append(species["A"])
            fr.append(t + q)
    return np.eye(3) * a, sp, np.mod(np.array(fr), 1.0)


def _double_perovskite(glazer: str | None, species: Mapping[str, str]) -> tuple[np.ndarray, list[str], np.ndarray]:
    """A2BB'H6: the 2x2x2 perovskite supercell (tilted by the Glazer ``glazer`` prototype of
    :mod:`c2np.catalog.prototypes`, or untilted) with B and B' in rock-salt order."""
    from c2np.catalog.prototypes import _cubic_basis, _tilted_supercell

    a = max(bond_length_angstrom(species["B"], role="oct") + bond_length_angstrom(species["B2"], role="oct"),
            math.sqrt(2.0) * bond_length_angstrom(species["A"], role="large"))
    base_sp, base_fr = _cubic_basis(species["A"], "X")
    lat, sp, fr = _tilted_supercell(base_sp, base_fr, a, glazer or "I4/mcm",
                                    tilt_deg=0.0 if glazer is None else 10.0)
    out = list(sp)
    for i, s in enumerate(sp):
        if s == "X":
            parity = int(round(float(np.sum(np.floor(fr[i] * 2.0 + 1e-6)))))
            out[i] = species["B"] if parity % 2 == 0 else species["B2"]
    return lat, out, fr


# ----------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class StructureType:
    """One structure type: ``name`` (its id), ``prototype`` (the archetype compound),
    ``spacegroup`` (number), the formula pattern over the roles, the octahedral roles (whose
    H coordination the topology check keeps) and the builder of the ideal cell."""

    name: str
    prototype: str
    spacegroup: int
    formula: tuple[tuple[str, int], ...]
    octahedral_roles: tuple[str, ...]
    builder: Callable[[Mapping[str, str]], tuple[np.ndarray, list[str], np.ndarray]]
    description: str

    def formula_of(self, species: Mapping[str, str]) -> str:
        """Chemical formula of ``species`` filling the roles, e.g. ``K2MgH4``."""
        return "".join(f"{species[r] if r != 'H' else 'H'}{n if n > 1 else ''}" for r, n in self.formula)


def _poly(seq: str) -> Callable[[Mapping[str, str]], tuple[np.ndarray, list[str], np.ndarray]]:
    return lambda sp: _hexagonal_polytype(seq, sp)


def _dp(glazer: str | None) -> Callable[[Mapping[str, str]], tuple[np.ndarray, list[str], np.ndarray]]:
    return lambda sp: _double_perovskite(glazer, sp)


_ABH3 = (("A", 1), ("B", 1), ("H", 3))
_DP = (("A", 2), ("B", 1), ("B2", 1), ("H", 6))

STRUCTURE_TYPES: dict[str, StructureType] = {t.name: t for t in (
    StructureType("2H", "BaNiO3", 194, _ABH3, ("B",), _poly("hh"),
                  "hexagonal perovskite, chains of face-sharing octahedra"),
    StructureType("4H", "SrMnO3 (4H)", 194, _ABH3, ("B",), _poly("hchc"),
                  "hexagonal perovskite, face-sharing pairs linked by corners"),
    StructureType("6H", "BaTiO3 (6H)", 194, _ABH3, ("B",), _poly("hcchcc"),
                  "hexagonal perovskite, face-sharing pairs and corner-sharing single octahedra"),
    StructureType("9R", "BaRuO3 (9R)", 166, _ABH3, ("B",), _poly("hhchhchhc"),
                  "rhombohedral perovskite polytype, face-sharing trimers linked by corners"),
    StructureType("RP1", "K2NiF4", 139, (("A", 2), ("B", 1), ("H", 4)), ("B",), lambda sp: _ruddlesden_popper(1, sp),
                  "Ruddlesden-Popper n=1: single perovskite layers between rock-salt layers"),
    StructureType("RP2", "Sr3Ti2O7", 139, (("A", 3), ("B", 2), ("H", 7)), ("B",), lambda sp: _ruddlesden_popper(2, sp),
                  "Ruddlesden-Popper n=2: perovskite double layers between rock-salt layers"),
    StructureType("K2PtCl6", "K2PtCl6 (Mg2FeH6)", 225, (("A", 2), ("B", 1), ("H", 6)), ("B",), _k2ptcl6,
                  "isolated BH6 octahedra, A in the tetrahedral holes (vacancy-ordered double perovskite)"),
    StructureType("DP-Fm-3m", "K2LiAlH6 (elpasolite)", 225, _DP, ("B", "B2"), _dp(None),
                  "rock-salt ordered double perovskite, untilted"),
    StructureType("DP-I4/m", "double perovskite a0a0c-", 87, _DP, ("B", "B2"), _dp("I4/mcm"),
                  "rock-salt ordered double perovskite, a0a0c- tilts"),
    StructureType("DP-R-3", "double perovskite a-a-a-", 148, _DP, ("B", "B2"), _dp("R-3c"),
                  "rock-salt ordered double perovskite, a-a-a- tilts"),
    StructureType("DP-P21/n", "Na3AlF6 (cryolite)", 14, _DP, ("B", "B2"), _dp("Pnma"),
                  "rock-salt ordered double perovskite, a-b+a- tilts (cryolite)"),
)}


def structure_type(name: str) -> StructureType:
    """The structure type called ``name``; unknown names raise :class:`C2NPInputError`."""
    if name not in STRUCTURE_TYPES:
        raise C2NPInputError(f"unknown structure type {name!r}; valid: {', '.join(STRUCTURE_TYPES)}")
    return STRUCTURE_TYPES[name]


def build_structure_type(name: str, species: Mapping[str, str], *, symprec_angstrom: float = 1e-3) -> Any:
    """The ideal prototype cell of type ``name`` filled with ``species`` (role -> element),
    reduced to its primitive cell, as ASE ``Atoms``; its space group (spglib,
    ``symprec_angstrom``) must be the type's."""
    import spglib
    from ase import Atoms

    st = structure_type(name)
    lattice, sp, frac = st.builder(species)
    atoms = Atoms(symbols=sp, scaled_positions=frac, cell=lattice, pbc=True)
    prim = spglib.standardize_cell((atoms.cell[:], atoms.get_scaled_positions(), atoms.numbers),
                                   to_primitive=True, no_idealize=False, symprec=symprec_angstrom)
    if prim is None:
        raise C2NPError(f"{name}: spglib could not reduce the prototype")
    lat, pos, nums = prim
    atoms = Atoms(numbers=nums, scaled_positions=pos, cell=lat, pbc=True)
    ds = spglib.get_symmetry_dataset((atoms.cell[:], atoms.get_scaled_positions(), atoms.numbers),
                                     symprec=symprec_angstrom)
    got = None if ds is None else int(ds.number)
    if got != st.spacegroup:
        raise C2NPError(f"{st.formula_of(species)} {name}: prototype has space group {got}, expected {st.spacegroup}")
    return atoms
