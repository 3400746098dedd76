"""A rotation-invariant, scale-normalised descriptor of a particle (task-2 input features).

Used by the nearest-descriptor memorisation baseline (:mod:`c2np.baselines`) and as the
conditioning of the task-2 crystal generators (:mod:`c2np.models.inverse.generator`). It reads the
particle only (species and positions), never a cell.

* **Species slots.** The most abundant species is slot 0; the other species are ranked by
  their median nearest distance to slot 0 (shortest first: for ABH3 hydrides the B cation,
  then the A cation). At most :data:`N_SLOTS` slots; further species share the last slot.
* **Scale** ``s`` (Å): the median nearest distance from slot-1 atoms to slot-0 atoms (for a
  perovskite the B-H bond, about a/2); the median keeps it stable under positional noise.
* **Histograms.** Around the :data:`N_CENTRES` atoms nearest the centroid, the distances to
  all neighbours, per unordered slot pair, in units of ``s``, binned to the nearest of
  :data:`N_BINS` bin centres ``k * R_MAX_SCALED / N_BINS`` (k < N_BINS; centred bins keep
  lattice distances such as exactly ``s`` off bin edges), smoothed (1/4, 1/2, 1/4), each
  normalised by the number of centre atoms of the pair's first slot.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from c2np.particle import Particle

__all__ = ["N_SLOTS", "N_BINS", "R_MAX_SCALED", "N_CENTRES", "NOISE_MIN_ATOMS", "ParticleDescriptor", "describe",
           "position_noise_angstrom", "slot_pairs"]

N_SLOTS = 3
N_BINS = 64
R_MAX_SCALED = 4.0
N_CENTRES = 600
NOISE_MIN_ATOMS = 8  # elements with fewer atoms do not enter the noise estimate


def slot_pairs() -> list[tuple[int, int]]:
    """The unordered slot pairs (i <= j), in histogram order."""
    return [(i, j) for i in range(N_SLOTS) for j in range(i, N_SLOTS)]


@dataclass(frozen=True, eq=False)
class ParticleDescriptor:
    """Descriptor of one particle.

    Attributes:
        scale_angstrom: s (Å), see the module docstring.
        histograms: (n_pairs, N_BINS) float32 slot-pair distance histograms (units of s).
        slot_numbers: (N_SLOTS,) atomic number of each slot (0 = empty).
        slot_fractions: (N_SLOTS,) fraction of the atoms in each slot.
        numbers: (n_species,) the species present, and ``slot_of`` their slot.
    """

    scale_angstrom: float
    histograms: np.ndarray
    slot_numbers: np.ndarray
    slot_fractions: np.ndarray
    numbers: np.ndarray
    slot_of: np.ndarray

    @property
    def vector(self) -> np.ndarray:
        """(n_pairs * N_BINS + N_SLOTS + 1,) float32: histograms, slot fractions, log s."""
        return np.concatenate([self.histograms.ravel(), self.slot_fractions,
                               [np.log(self.scale_angstrom)]]).astype(np.float32)


def _nearest(tree: cKDTree, points: np.ndarray) -> np.ndarray:
    d, _ = tree.query(points, k=2)
    return d[:, 1] if np.allclose(d[:, 0], 0.0) else d[:, 0]


def describe(particle: Particle) -> ParticleDescriptor:
    """The descriptor of ``particle`` (any frame; only distances are used)."""
    z = np.asarray(particle.numbers)
    pos = np.asarray(particle.positions_angstrom, dtype=np.float64)
    species, counts = np.unique(z, return_counts=True)
    order = np.lexsort((species, -counts))
    major = species[order[0]]
    others = species[order[1:]]
    radial = np.linalg.norm(pos - pos.mean(axis=0), axis=1)
    by_radius = np.argsort(np.round(radial, 6), kind="stable")   # ties: by index, frame-independent
    inner = by_radius[: 4 * N_CENTRES]          # slot ranking and scale: the interior atoms
    zi, pi = z[inner], pos[inner]
    major_tree = cKDTree(pi[zi == major]) if np.any(zi == major) else cKDTree(pos[z == major])
    z_all, pos_all = z, pos
    z, pos = (zi, pi) if np.any(zi == major) and all(np.any(zi == sp) for sp in others) else (z, pos)
    if len(others):
        near = []
        for sp in others:
            d, _ = major_tree.query(pos[z == sp], k=1)
            near.append(float(np.median(d)))
        others = others[np.argsort(near, kind="stable")]
        first = pos[z == others[0]]
        scale = float(np.median(major_tree.query(first, k=1)[0]))
    else:
        scale = float(np.median(_nearest(major_tree, pos))) if len(pos) > 1 else 1.0
    scale = max(scale, 1e-3)
    ranked = np.concatenate([[major], others])
    slot_of = np.minimum(np.arange(len(ranked)), N_SLOTS - 1)
    slot_numbers = np.zeros(N_SLOTS, dtype=np.int64)
    slot_fractions = np.zeros(N_SLOTS, dtype=np.float32)
    for sp, sl in zip(ranked, slot_of):
        if slot_numbers[sl] == 0:
            slot_numbers[sl] = sp
        slot_fractions[sl] += float(np.sum(z_all == sp)) / len(z_all)

    r_max = R_MAX_SCALED * scale
    centres_all = by_radius[:N_CENTRES]
    reach = radial[centres_all].max() + r_max + 1e-9 if len(centres_all) else 0.0
    crop = by_radius[radial[by_radius] <= reach]      # centres first, then their neighbours
    z, pos = z_all[crop], pos_all[crop]
    centres = np.arange(min(N_CENTRES, len(crop)))
    slot_atom = np.zeros(len(z), dtype=np.int64)
    for sp, sl in zip(ranked, slot_of):
        slot_atom[z == sp] = sl
    tree = cKDTree(pos)
    neigh = tree.query_ball_point(pos[centres], r_max)
    ci = np.repeat(centres, [len(n) for n in neigh])
    cj = np.concatenate([np.asarray(n, dtype=np.int64) for n in neigh]) if len(ci) else np.zeros(0, np.int64)
    keep = ci != cj
    ci, cj = ci[keep], cj[keep]
    dist = np.linalg.norm(pos[ci] - pos[cj], axis=1) / scale
    si, sj = slot_atom[ci], slot_atom[cj]
    lo, hi = np.minimum(si, sj), np.maximum(si, sj)
    pairs = slot_pairs()
    table = np.zeros((N_SLOTS, N_SLOTS), dtype=np.int64)
    for k, (a, b) in enumerate(pairs):
        table[a, b] = k
    pk = table[lo, hi]
    b = np.rint(dist / R_MAX_SCALED * N_BINS).astype(np.int64)   # bins centred on k * width
    inside = b < N_BINS
    hist = np.zeros((len(pairs), N_BINS))
    np.add.at(hist, (pk[inside], b[inside]), 1.0)
    kernel = np.array([0.25, 0.5, 0.25])
    hist = np.stack([np.convolve(h, kernel, mode="same") for h in hist])
    n_centre_slot = np.bincount(slot_atom[centres], minlength=N_SLOTS).astype(np.float64)
    for k, (a, _) in enumerate(pairs):
        hist[k] /= max(n_centre_slot[a], 1.0)
    return ParticleDescriptor(scale, hist.astype(np.float32), slot_numbers, slot_fractions,
                              ranked.astype(np.int64), slot_of.astype(np.int64))


def position_noise_angstrom(particle: Particle) -> float:
    """An estimate of the positional noise of ``particle`` (Å), from the particle alone.

    Each atom's nearest-neighbour distance (any species); per element with at least
    :data:`NOISE_MIN_ATOMS` atoms, the scaled median absolute deviation (1.4826 MAD) of its
    atoms' distances; the smallest over those elements (none: over all atoms). In a particle
    carved from a crystal an element's nearest distances take a few exact values and the
    estimate is 0 (up to rounding); Gaussian noise of σ per coordinate gives about 0.8 σ
    (docs/decisions/0035-inverse-margin-from-noise.md). 0 for fewer than 2 atoms."""
    z = np.asarray(particle.numbers)
    pos = np.asarray(particle.positions_angstrom, dtype=np.float64)
    if len(pos) < 2:
        return 0.0
    d = cKDTree(pos).query(pos, k=2)[0][:, 1]
    spreads = []
    for sp in np.unique(z):
        de = d[z == sp]
        if len(de) >= NOISE_MIN_ATOMS:
            spreads.append(float(np.median(np.abs(de - np.median(de)))))
    if not spreads:
        spreads = [float(np.median(np.abs(d - np.median(d))))]
    return 1.4826 * min(spreads)
