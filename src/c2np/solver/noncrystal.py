"""What a particle that has no lattice is: five-fold twinned (icosahedral, decahedral) or
amorphous, from the common-neighbour signature of its bonded pairs.

A bonded pair (atoms closer than ``BOND_FACTOR`` x the median nearest-neighbour distance)
whose common neighbours are five atoms forming a closed ring (the "555" signature of common
neighbour analysis) sits on a five-fold axis. In a five-fold twinned particle these pairs
line up along straight axes: one for a decahedron, six through the centre for an icosahedron.
In an amorphous cluster they are scattered, and most pairs have neither the four (fcc, hcp)
nor six (bcc) common neighbours of a crystal. The solver asks only when it found no lattice
or a doubtful one, so crystals whose own structure has such pairs (Frank-Kasper phases) are
not judged by it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BOND_FACTOR", "NonCrystal", "classify_noncrystal"]

#: Atoms closer than this times the median nearest-neighbour distance are bonded.
BOND_FACTOR = 1.2
#: Two five-fold pairs lie on one axis when their directions differ by less than this (deg)
#: and the line through one passes within ``AXIS_OFFSET_FRACTION`` x the bond length of the other.
AXIS_ANGLE_DEG = 12.0
AXIS_OFFSET_FRACTION = 0.35
#: An axis is a chain of at least this many five-fold pairs.
MIN_AXIS_PAIRS = 2
#: Below this share of pairs with a crystalline environment (4 or 6 common neighbours) and
#: without five-fold axes, the particle is amorphous.
MAX_AMORPHOUS_CRYSTALLINE_SHARE = 0.5


@dataclass(frozen=True)
class NonCrystal:
    """What the particle is, when it is not one crystal.

    Attributes:
        kind: "icosahedral", "decahedral" or "amorphous".
        description: what was seen, e.g. "five-fold twinned, icosahedral (6 five-fold axes)".
        n_fivefold_axes: straight chains of five-fold (555) pairs.
        fivefold_pair_share: share of bonded pairs with the 555 signature.
        crystalline_pair_share: share of bonded pairs with 4 or 6 common neighbours.
    """

    kind: str
    description: str
    n_fivefold_axes: int
    fivefold_pair_share: float
    crystalline_pair_share: float


def _bonds(positions: np.ndarray) -> tuple[np.ndarray, float]:
    from scipy.spatial import cKDTree

    tree = cKDTree(positions)
    d, _ = tree.query(positions, k=2)
    bond = BOND_FACTOR * float(np.median(d[:, 1]))
    pairs = tree.query_pairs(bond, output_type="ndarray")
    return pairs, bond


def _axes(positions: np.ndarray, pairs: np.ndarray, bond: float) -> int:
    """Straight chains (at least ``MIN_AXIS_PAIRS`` pairs) among the (k, 2) five-fold pairs."""
    if len(pairs) == 0:
        return 0
    a, b = positions[pairs[:, 0]], positions[pairs[:, 1]]
    u = (b - a) / np.linalg.norm(b - a, axis=1)[:, None]
    mid = 0.5 * (a + b)
    cos_max = np.cos(np.radians(AXIS_ANGLE_DEG))
    same_dir = np.abs(u @ u.T) >= cos_max
    dm = mid[None, :, :] - mid[:, None, :]
    off = dm - np.einsum("ijk,ik->ij", dm, u)[:, :, None] * u[:, None, :]
    on_line = np.linalg.norm(off, axis=2) <= AXIS_OFFSET_FRACTION * bond
    link = same_dir & on_line
    from scipy.sparse.csgraph import connected_components

    _, labels = connected_components(link, directed=False)
    sizes = np.bincount(labels)
    return int(np.sum(sizes >= MIN_AXIS_PAIRS))


def classify_noncrystal(positions_angstrom: np.ndarray, *, lattice_found: bool) -> NonCrystal | None:
    """Five-fold twinned or amorphous, or None (no evidence against a crystal).

    ``positions_angstrom``: (n, 3) in Å. ``lattice_found``: the solver found a lattice (then
    only five-fold axes count: a crystal with a poor fit is not called amorphous)."""
    pos = np.asarray(positions_angstrom, dtype=float)
    if len(pos) < 13:
        return None
    pairs, bond = _bonds(pos)
    if len(pairs) == 0:
        return None
    from scipy.sparse import coo_matrix

    n = len(pos)
    adj = coo_matrix((np.ones(2 * len(pairs)), (np.r_[pairs[:, 0], pairs[:, 1]], np.r_[pairs[:, 1], pairs[:, 0]])),
                     shape=(n, n)).tocsr()
    common = np.asarray(adj[pairs[:, 0]].multiply(adj[pairs[:, 1]]).sum(axis=1)).ravel()
    # interior pairs only: a surface pair misses neighbours outside the particle
    coord = np.asarray(adj.sum(axis=1)).ravel()
    full = np.median(coord[coord >= np.percentile(coord, 75)])
    interior = (coord[pairs[:, 0]] >= full) & (coord[pairs[:, 1]] >= full)
    five = np.zeros(len(pairs), dtype=bool)
    for k in np.flatnonzero(common == 5):
        i, j = pairs[k]
        ring = np.flatnonzero(adj[i].multiply(adj[j]).toarray().ravel())
        # five common neighbours bonded in a ring: each has exactly two ring neighbours
        sub = adj[ring][:, ring].toarray()
        five[k] = bool(np.all(sub.sum(axis=1) == 2))
    n_axes = _axes(pos, pairs[five], bond)
    judged = interior if interior.sum() >= 10 else np.ones(len(pairs), dtype=bool)
    five_share = float(np.mean(five[judged]))
    cryst_share = float(np.mean(np.isin(common[judged], (4, 6))))
    scattered = five.sum() > 0 and n_axes == 0
    if n_axes >= 4:
        return NonCrystal("icosahedral", f"five-fold twinned, icosahedral ({n_axes} five-fold axes)",
                          n_axes, five_share, cryst_share)
    if n_axes >= 1 and cryst_share >= MAX_AMORPHOUS_CRYSTALLINE_SHARE:
        return NonCrystal("decahedral", f"five-fold twinned, decahedral ({n_axes} five-fold axis)",
                          n_axes, five_share, cryst_share)
    if not lattice_found and (cryst_share < MAX_AMORPHOUS_CRYSTALLINE_SHARE or scattered and five_share > 0.05):
        return NonCrystal("amorphous", f"amorphous (only {cryst_share:.0%} of the neighbour pairs have a "
                          f"crystal's environment, no lattice)", n_axes, five_share, cryst_share)
    return None
