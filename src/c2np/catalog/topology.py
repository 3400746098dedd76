"""The topology check of a relaxed structure type: same symmetry, similar volume, same bonds.

A relaxation keeps a structure type only when

1. the relaxed cell's space group (spglib, symprec 1e-3 Å) is the prototype's;
2. its volume is within ``MAX_VOLUME_CHANGE`` (35 %) of the prototype's;
3. its coordination signature is the prototype's: every octahedral cation keeps its number
   of H neighbours, and every H its number of neighbours of each octahedral species
   (:func:`coordination_signature`).

The relaxation runs under ``FixSymmetry``, so (1) catches a cell that gained symmetry (e.g.
an octahedron that became a different polyhedron on a special position); (2) a collapse or
an explosion; (3) bonds that broke or formed (octahedra turning edge- or face-sharing,
an H leaving its octahedron).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["MAX_VOLUME_CHANGE", "BOND_RATIO", "coordination_signature", "topology_defect"]

#: Largest allowed relative volume change of a relaxation (|V / V0 - 1|).
MAX_VOLUME_CHANGE = 0.35
#: A neighbour is bonded when within this factor of the shortest distance to its species.
BOND_RATIO = 1.35


def coordination_signature(atoms: Any, octahedral: Sequence[str], *,
                           bond_ratio: float = BOND_RATIO) -> tuple[tuple[str, str, int, int], ...]:
    """Sorted (centre symbol, neighbour symbol, bonded count, number of such atoms).

    Octahedral cations count the H within ``bond_ratio`` x their shortest cation-H
    distance; each H counts, per octahedral species, the cations within ``bond_ratio`` x
    its shortest distance to that species (an H of a face-sharing pair of octahedra has 2,
    an apical H of a Ruddlesden-Popper slab 1). Compare signatures of one cell only
    (before and after its relaxation): the counts of atoms scale with the cell.
    """
    from collections import Counter

    from ase.neighborlist import neighbor_list

    symbols = np.array(atoms.get_chemical_symbols())
    i, j, d = neighbor_list("ijd", atoms, 6.0)
    found: Counter[tuple[str, str, int]] = Counter()
    for c in range(len(atoms)):
        sym = str(symbols[c])
        others = ["H"] if sym in octahedral else (list(octahedral) if sym == "H" else [])
        for other in others:
            dist = d[(i == c) & (symbols[j] == other)]
            n = 0 if len(dist) == 0 else int(np.sum(dist <= bond_ratio * dist.min()))
            found[(sym, other, n)] += 1
    return tuple(sorted((*k, v) for k, v in found.items()))


def topology_defect(start: Any, relaxed: Any, octahedral: Sequence[str], *, spacegroup: int,
                    relaxed_spacegroup: int | None, max_volume_change: float = MAX_VOLUME_CHANGE,
                    bond_ratio: float = BOND_RATIO) -> str:
    """Why ``relaxed`` is no longer the structure type of ``start`` (ASE ``Atoms``), or ``""``."""
    reasons = []
    if relaxed_spacegroup != spacegroup:
        reasons.append(f"space group changed from {spacegroup} to {relaxed_spacegroup}")
    change = float(relaxed.get_volume()) / float(start.get_volume()) - 1.0
    if abs(change) > max_volume_change:
        reasons.append(f"volume changed by {100 * change:+.0f} % (limit ±{100 * max_volume_change:.0f} %)")
    before = coordination_signature(start, octahedral, bond_ratio=bond_ratio)
    after = coordination_signature(relaxed, octahedral, bond_ratio=bond_ratio)
    if before != after:
        diff = sorted(set(after) - set(before))
        reasons.append("coordination changed: " + ", ".join(f"{k} {c} with {n} {o}" for c, o, n, k in diff[:3]))
    return "; ".join(reasons)
