"""Reference baselines that need no training (SPEC §9).

Task 1 (cell + R + rotation -> particle): the analytic carve (the ceiling), a uniform random
ball with the right density and composition (the floor), and nearest-training-sample
memorisation. Task 2 (particle -> lattice + space group): majority class, composition
lookup (memorisation), and the crystallographic solver (:mod:`c2np.solver`).

A task-1 baseline sees only the recipe (material's unit cell, R, quaternion, centre) and,
for memorisation, *training* samples — never the target particle or its atom count.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from c2np.carving import carve, rotate_positions
from c2np.particle import Particle
from c2np.cells import UnitCell, standardize
from c2np.errors import C2NPInputError
from c2np.splits import SPLITS, sample_id
from c2np.store import DatasetStore

__all__ = ["ForwardQuery", "InversePrediction", "forward_queries", "analytic_carve", "random_ball",
           "memorisation", "majority_class", "composition_lookup", "crystallographic_solver",
           "FORWARD_BASELINES", "INVERSE_BASELINES", "training_materials"]


@dataclass(frozen=True, eq=False)
class ForwardQuery:
    """What a task-1 model may see for one sample: never the target particle.

    Attributes:
        sample_id: the sample's id.
        cell: the material's unit cell.
        radius_angstrom: sphere radius (Å).
        quaternion: (4,) scalar-last rotation.
        centre_frac: (3,) carving centre in fractional coordinates.
    """

    sample_id: str
    cell: UnitCell
    radius_angstrom: float
    quaternion: np.ndarray
    centre_frac: tuple[float, float, float]


@dataclass(frozen=True)
class InversePrediction:
    """A task-2 prediction: standardized conventional lattice (Å, °) and space group."""

    sample_id: str
    a: float
    b: float
    c: float
    alpha: float
    beta: float
    gamma: float
    spacegroup: int

    def as_row(self) -> dict[str, float | int | str]:
        """The CSV row (``sample_id,a,b,c,alpha,beta,gamma,spacegroup``)."""
        return {"sample_id": self.sample_id, "a": self.a, "b": self.b, "c": self.c, "alpha": self.alpha,
                "beta": self.beta, "gamma": self.gamma, "spacegroup": self.spacegroup}


def forward_queries(store: DatasetStore, rows: Iterable[int]) -> list[ForwardQuery]:
    """The task-1 inputs of ``rows``: recipe fields and the unit cell, nothing of the target."""
    t = store.recipes
    out = []
    for row in rows:
        mat = t.materials[int(t.material_index[row])]
        out.append(ForwardQuery(sample_id(mat, t.radius_angstrom[row], t.rotation_index[row]),
                                store.cells[mat], float(t.radius_angstrom[row]), t.quaternion[row].copy(),
                                t.centre_frac))
    return out


# --- task 1 ------------------------------------------------------------------------------
def analytic_carve(store: DatasetStore, queries: Sequence[ForwardQuery]) -> dict[str, Particle]:
    """The ceiling: carve the sphere from the unit cell exactly."""
    return {q.sample_id: carve(q.cell, q.radius_angstrom, centre_frac=q.centre_frac,
                               quaternion=q.quaternion).particle for q in queries}


def _stable_seed(text: str) -> int:
    import hashlib

    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def random_ball(store: DatasetStore, queries: Sequence[ForwardQuery], *, seed: int = 0) -> dict[str, Particle]:
    """The floor: round(density x 4/3 pi R^3) atoms uniform in the ball, element counts in the
    cell's proportions (largest remainder). Seeded per sample from ``seed`` and the sample id."""
    out = {}
    for q in queries:
        rng = np.random.default_rng([seed, _stable_seed(q.sample_id)])
        volume = 4.0 / 3.0 * np.pi * q.radius_angstrom ** 3
        n = int(round(q.cell.number_density_per_angstrom3 * volume))
        comp = q.cell.composition()
        zs = np.array(sorted(comp))
        exact = np.array([comp[z] for z in zs]) * n
        counts = np.floor(exact).astype(int)
        for i in np.argsort(-(exact - counts))[: n - counts.sum()]:
            counts[i] += 1
        direction = rng.normal(size=(n, 3))
        direction /= np.linalg.norm(direction, axis=1, keepdims=True)
        radius = q.radius_angstrom * rng.random(n) ** (1.0 / 3.0)
        out[q.sample_id] = Particle(np.repeat(zs, counts), direction * radius[:, None])
    return out


def _train_radii(store: DatasetStore, material: str) -> np.ndarray:
    t = store.recipes
    m = t.mask("train", material=material)
    return np.unique(t.radius_angstrom[m])


def memorisation(store: DatasetStore, queries: Sequence[ForwardQuery]) -> dict[str, Particle]:
    """Nearest-training-sample memorisation: the training particle of the same material at
    the nearest train radius (ties: the larger), rotated by the requested rotation, cropped
    to R when larger and returned as is when smaller."""
    out = {}
    cache: dict[str, np.ndarray] = {}
    for q in queries:
        mat = q.cell.material_id
        if mat not in cache:
            cache[mat] = _train_radii(store, mat)
        radii = cache[mat]
        if len(radii) == 0:
            raise C2NPInputError(f"memorisation: material {mat!r} has no training samples in {store.path}")
        gap = np.abs(radii - q.radius_angstrom)
        r_train = int(radii[np.flatnonzero(gap == gap.min()).max()])
        base = store.base_particle(mat, r_train)
        pos = rotate_positions(base.positions_angstrom.astype(np.float64), q.quaternion)
        keep = np.linalg.norm(pos, axis=1) <= q.radius_angstrom + 1e-6 if r_train > q.radius_angstrom \
            else np.ones(len(pos), dtype=bool)
        out[q.sample_id] = Particle(base.numbers[keep], pos[keep])
    return out


# --- task 2 ------------------------------------------------------------------------------
def training_materials(store: DatasetStore) -> list[str]:
    """Materials a task-2 model may learn from: those with training samples, minus the
    held-out materials of the strict protocol."""
    t = store.recipes
    train_mi = set(t.material_index[t.split == SPLITS.index("train")].tolist())
    held = set(t.heldout_materials)
    return [m for i, m in enumerate(t.materials) if i in train_mi and m not in held]


def _targets(store: DatasetStore, materials: Sequence[str]) -> dict[str, tuple]:
    out = {}
    for m in materials:
        s = standardize(store.cells[m])
        out[m] = (*s.lattice_params, s.spacegroup)
    return out


def majority_class(store: DatasetStore, rows: Sequence[int]) -> list[InversePrediction]:
    """Most common space group and the mean lattice of the training materials, for every sample."""
    mats = training_materials(store)
    if not mats:
        raise C2NPInputError(f"majority class: {store.path} has no training materials")
    targets = _targets(store, mats)
    sg = Counter(v[6] for v in targets.values()).most_common(1)[0][0]
    mean = np.mean([v[:6] for v in targets.values()], axis=0)
    ids = store.recipes.sample_ids()
    return [InversePrediction(ids[r], *map(float, mean), int(sg)) for r in rows]


def _composition_of(numbers: np.ndarray) -> dict[int, float]:
    zs, counts = np.unique(numbers, return_counts=True)
    return {int(z): c / counts.sum() for z, c in zip(zs, counts)}


def composition_lookup(store: DatasetStore, rows: Sequence[int]) -> list[InversePrediction]:
    """Memorisation for task 2: the training material with the same element set and the
    closest composition; else the one with the largest element overlap (Jaccard), ties by
    composition distance. Sees only the particle's species."""
    mats = training_materials(store)
    if not mats:
        raise C2NPInputError(f"composition lookup: {store.path} has no training materials")
    targets = _targets(store, mats)
    comps = {m: store.cells[m].composition() for m in mats}
    ids = store.recipes.sample_ids()
    out = []
    for r in rows:
        nums, _ = store.particle_arrays(int(r))
        comp = _composition_of(nums)

        def score(m: str) -> tuple[float, float]:
            a, b = set(comp), set(comps[m])
            jac = len(a & b) / len(a | b)
            tv = 0.5 * sum(abs(comp.get(z, 0.0) - comps[m].get(z, 0.0)) for z in a | b)
            return (-jac, tv)

        best = min(sorted(mats), key=score)
        out.append(InversePrediction(ids[r], *map(float, targets[best][:6]), int(targets[best][6])))
    return out


def crystallographic_solver(store: DatasetStore, rows: Sequence[int]) -> list[InversePrediction]:
    """The crystallographic solver on each particle (:func:`c2np.solver.solve`). A particle the
    solver cannot handle gets no prediction (the harness counts it as a failure)."""
    from c2np.solver import solve

    ids = store.recipes.sample_ids()
    out = []
    for r in rows:
        nums, pos = store.particle_arrays(int(r))
        try:
            res = solve(nums, pos)
        except C2NPInputError:
            continue  # missing prediction -> scored as a failure by the harness
        out.append(InversePrediction(ids[r], *res.lattice_params, int(res.spacegroup)))
    return out


FORWARD_BASELINES: dict[str, Callable[[DatasetStore, Sequence[ForwardQuery]], dict[str, Particle]]] = {
    "analytic-carve": analytic_carve,
    "random-ball": random_ball,
    "memorisation": memorisation,
}
INVERSE_BASELINES: dict[str, Callable[[DatasetStore, Sequence[int]], list[InversePrediction]]] = {
    "solver": crystallographic_solver,
    "composition-lookup": composition_lookup,
    "majority-class": majority_class,
}
