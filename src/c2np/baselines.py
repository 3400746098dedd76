"""Reference baselines that need no training (contract §9), as models of the task API.

Every baseline is fitted on a task (:class:`~c2np.tasks.ForwardTask` /
:class:`~c2np.tasks.InverseTask`) through its training examples only, and then predicts
one query at a time; none of them opens a store.

Task 1 (:class:`~c2np.tasks.ForwardQuery` -> :class:`~c2np.particle.Particle`): the
analytic carve (the ceiling; a carve-based baseline), a uniform random ball with the right
density and composition (the floor), and nearest-training-sample memorisation.
Task 2 (:class:`~c2np.tasks.InverseQuery` -> :class:`~c2np.predictions.InversePrediction`):
the crystallographic solver (:mod:`c2np.solver`), composition lookup (memorisation) and the
majority class.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from c2np.carving import carve, rotate_positions
from c2np.errors import C2NPInputError
from c2np.executor import Context, Executor, LocalExecutor
from c2np.executor import same as _same
from c2np.metrics import InverseTarget
from c2np.particle import Particle
from c2np.particle_descriptor import ParticleDescriptor, describe
from c2np.predictions import InversePrediction
from c2np.solver import solve
from c2np.tasks import ForwardQuery, ForwardTask, InverseQuery, InverseTask

__all__ = ["analytic_carve", "random_ball", "Memorisation", "MajorityClass", "CompositionLookup",
           "DescriptorNeighbour", "crystallographic_solver", "FORWARD_BASELINES", "INVERSE_BASELINES",
           "HELDOUT_BASELINES", "NEIGHBOUR_NOISE_ANGSTROM", "predict"]

#: Noise (Å) of the extra training copies of the noise-augmented descriptor neighbour.
NEIGHBOUR_NOISE_ANGSTROM: tuple[float, ...] = (0.02, 0.05)

ForwardModel = Callable[[ForwardQuery], "Particle | None"]  # None: no answer (a counted failure)
InverseModel = Callable[[InverseQuery], "InversePrediction | None"]


# --- task 1 ------------------------------------------------------------------------------
def analytic_carve(query: ForwardQuery) -> Particle:
    """The ceiling: carve the sphere from the unit cell exactly."""
    return carve(query.cell, query.radius_angstrom, centre_frac=query.centre_frac,
                 quaternion=query.quaternion).particle


def _stable_seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def random_ball(query: ForwardQuery, *, seed: int = 0) -> Particle:
    """The floor: round(density x 4/3 pi R^3) atoms uniform in the ball, element counts in the
    cell's proportions (largest remainder). Seeded per sample from ``seed`` and the sample id."""
    rng = np.random.default_rng([seed, _stable_seed(query.sample_id)])
    volume = 4.0 / 3.0 * np.pi * query.radius_angstrom ** 3
    n = int(round(query.cell.number_density_per_angstrom3 * volume))
    comp = query.cell.composition()
    zs = np.array(sorted(comp))
    exact = np.array([comp[z] for z in zs]) * n
    counts = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - counts))[: n - counts.sum()]:
        counts[i] += 1
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    radius = query.radius_angstrom * rng.random(n) ** (1.0 / 3.0)
    return Particle(np.repeat(zs, counts), direction * radius[:, None])


def _unrotate(positions_angstrom: np.ndarray, quaternion: np.ndarray) -> np.ndarray:
    q = np.asarray(quaternion, dtype=np.float64)
    return rotate_positions(positions_angstrom, np.array([-q[0], -q[1], -q[2], q[3]]))


class Memorisation:
    """Nearest-training-sample memorisation: the training particle of the same material at
    the nearest train radius (ties: the larger), rotated by the requested rotation, cropped
    to R when larger and returned as is when smaller. A material without training samples
    (a held-out material under protocol ``strict``) has no answer: ``None``, which the
    harness scores as a failure."""

    def __init__(self, table: Mapping[str, Mapping[int, Particle]]) -> None:
        self.table = {m: dict(v) for m, v in table.items()}

    @classmethod
    def fit(cls, task: ForwardTask) -> Memorisation:
        """One training particle per (material, R) of the task's training examples, stored
        in the unrotated frame."""
        table: dict[str, dict[int, Particle]] = {}
        for q, part in task.training_examples(rotations_per_group=1):
            table.setdefault(q.cell.material_id, {})[int(round(q.radius_angstrom))] = Particle(
                part.numbers, _unrotate(part.positions_angstrom, q.quaternion))
        return cls(table)

    def __call__(self, query: ForwardQuery) -> Particle | None:
        mat = query.cell.material_id
        if mat not in self.table:
            return None
        radii = np.array(sorted(self.table[mat]))
        gap = np.abs(radii - query.radius_angstrom)
        r_train = int(radii[np.flatnonzero(gap == gap.min()).max()])
        base = self.table[mat][r_train]
        pos = rotate_positions(base.positions_angstrom, query.quaternion)
        keep = (np.linalg.norm(pos, axis=1) <= query.radius_angstrom + 1e-6 if r_train > query.radius_angstrom
                else np.ones(len(pos), dtype=bool))
        return Particle(base.numbers[keep], pos[keep])


# --- task 2 ------------------------------------------------------------------------------
def _composition_of(numbers: np.ndarray) -> dict[int, float]:
    zs, counts = np.unique(numbers, return_counts=True)
    return {int(z): c / counts.sum() for z, c in zip(zs, counts)}


def _prediction(target: InverseTarget) -> InversePrediction:
    return InversePrediction(target.parameters, int(target.spacegroup))


def _training_targets(task: InverseTask, what: str) -> list[tuple[InverseQuery, InverseTarget]]:
    examples = list(task.training_examples(rotations_per_group=1))
    if not examples:
        raise C2NPInputError(f"{what}: the task has no training examples")
    return examples


class MajorityClass:
    """The most common space group and the mean lattice of the training examples (one per
    (material, R)), for every sample."""

    def __init__(self, prediction: InversePrediction) -> None:
        self.prediction = prediction

    @classmethod
    def fit(cls, task: InverseTask) -> MajorityClass:
        """Count space groups and average lattice parameters over the training examples."""
        targets = [t for _, t in _training_targets(task, "majority class")]
        sg = Counter(int(t.spacegroup) for t in targets).most_common(1)[0][0]
        mean = np.mean([t.params for t in targets], axis=0)
        return cls(InversePrediction.from_values(mean, sg))

    def __call__(self, query: InverseQuery) -> InversePrediction:
        return self.prediction


class CompositionLookup:
    """Memorisation for task 2: the target of the training example whose particle has the
    same element set and the closest composition; else the largest element overlap
    (Jaccard), ties by composition distance, then by the first example. Sees only the
    particle's species."""

    def __init__(self, entries: Iterable[tuple[Mapping[int, float], InverseTarget]]) -> None:
        self.entries = [(dict(c), t) for c, t in entries]

    @classmethod
    def fit(cls, task: InverseTask) -> CompositionLookup:
        """Composition and target of one training example per (material, R)."""
        return cls((_composition_of(q.particle.numbers), t)
                   for q, t in _training_targets(task, "composition lookup"))

    def __call__(self, query: InverseQuery) -> InversePrediction:
        comp = _composition_of(query.particle.numbers)

        def score(entry: tuple[dict[int, float], InverseTarget]) -> tuple[float, float]:
            ref = entry[0]
            a, b = set(comp), set(ref)
            jac = len(a & b) / len(a | b)
            tv = 0.5 * sum(abs(comp.get(z, 0.0) - ref.get(z, 0.0)) for z in a | b)
            return (-jac, tv)

        return _prediction(min(self.entries, key=score)[1])


class DescriptorNeighbour:
    """Memorisation by particle descriptor (the strong task-2 floor): the training example
    whose :func:`c2np.particle_descriptor.describe` histograms are nearest (Euclidean; among
    examples with the same number of species when there are any), its space group, and its
    lattice lengths scaled by the ratio of the descriptor scales ``s_query / s_train`` (the
    nearest-neighbour distance ratio); angles as the neighbour's. Sees only the particle."""

    def __init__(self, entries: Iterable[tuple[ParticleDescriptor, InverseTarget]]) -> None:
        self.entries = list(entries)
        if not self.entries:
            raise C2NPInputError("descriptor neighbour: no training examples")
        self._hist = np.stack([d.histograms.ravel() for d, _ in self.entries])
        self._n_species = np.array([len(d.numbers) for d, _ in self.entries])

    @classmethod
    def fit(cls, task: InverseTask, *, noise_angstrom: Iterable[float] = (), seed: int = 0
            ) -> DescriptorNeighbour:
        """Descriptor and target of one training example per (material, R); with
        ``noise_angstrom``, also one copy of each training particle per listed sigma (Å) with
        isotropic Gaussian noise on every coordinate (``numpy.random.default_rng([seed, i])``
        for the i-th training example), so that noisy queries have noisy neighbours."""
        sigmas = [float(x) for x in noise_angstrom]
        if any(not np.isfinite(x) or x <= 0 for x in sigmas):
            raise C2NPInputError(f"descriptor neighbour: noise_angstrom must be > 0 Å, got {sigmas}")
        entries = []
        for i, (q, t) in enumerate(_training_targets(task, "descriptor neighbour")):
            entries.append((describe(q.particle), t))
            rng = np.random.default_rng([int(seed), i])
            pos = q.particle.positions_angstrom
            for sigma in sigmas:
                noisy = Particle(q.particle.numbers, pos + rng.normal(scale=sigma, size=pos.shape))
                entries.append((describe(noisy), t))
        return cls(entries)

    @classmethod
    def fit_noisy(cls, task: InverseTask) -> DescriptorNeighbour:
        """:meth:`fit` with noisy copies at 0.02 and 0.05 Å (the held-out robustness floor)."""
        return cls.fit(task, noise_angstrom=NEIGHBOUR_NOISE_ANGSTROM)

    def __call__(self, query: InverseQuery) -> InversePrediction:
        return self.from_descriptor(describe(query.particle))

    def from_descriptor(self, d: ParticleDescriptor) -> InversePrediction:
        """The prediction for a particle given by its descriptor."""
        dist = np.linalg.norm(self._hist - d.histograms.ravel()[None, :], axis=1)
        same = self._n_species == len(d.numbers)
        if np.any(same):
            dist = np.where(same, dist, np.inf)
        ref, target = self.entries[int(np.argmin(dist))]
        ratio = d.scale_angstrom / ref.scale_angstrom
        p = np.asarray(target.params, dtype=np.float64)
        return InversePrediction.from_values(np.r_[p[:3] * ratio, p[3:]], int(target.spacegroup))


def crystallographic_solver(query: InverseQuery) -> InversePrediction | None:
    """The crystallographic solver on the particle (:func:`c2np.solver.solve`). A particle the
    solver cannot handle gets no prediction (the harness counts it as a failure)."""
    try:
        res = solve(query.particle.numbers, query.particle.positions_angstrom)
    except C2NPInputError:
        return None
    return InversePrediction(res.lattice, int(res.spacegroup))


def _no_fit(model: Callable[..., Any]) -> Callable[[Any], Callable[..., Any]]:
    return lambda task: model


#: name -> fit(task) -> model(query) -> prediction
FORWARD_BASELINES: dict[str, Callable[[ForwardTask], ForwardModel]] = {
    "analytic-carve": _no_fit(analytic_carve),
    "random-ball": _no_fit(random_ball),
    "memorisation": Memorisation.fit,
}
INVERSE_BASELINES: dict[str, Callable[[InverseTask], InverseModel]] = {
    "solver": _no_fit(crystallographic_solver),
    "composition-lookup": CompositionLookup.fit,
    "majority-class": MajorityClass.fit,
}
#: Task-2 memorisation floors for held-out materials (protocol strict), beside INVERSE_BASELINES;
#: c2np benchmark writes them as submissions on a store with held-out materials.
HELDOUT_BASELINES: dict[str, Callable[[InverseTask], InverseModel]] = {
    "descriptor-neighbour": DescriptorNeighbour.fit,
    "descriptor-neighbour-noisy": DescriptorNeighbour.fit_noisy,
}


def _answer(model: Callable[[Any], Any], query: Any) -> Any:
    return model(query)


def predict(task: ForwardTask | InverseTask, model: Callable[[Any], Any], *,
            executor: Executor | None = None, chunk: int = 16) -> dict[str, Any]:
    """``{sample_id: prediction}`` of ``model`` over the task's queries (a query the model
    answers with None is left out: the harness scores it as a missing prediction), in
    query order. ``executor`` (:mod:`c2np.executor`; default: this process) runs the
    queries in chunks of ``chunk``; on Dask ``model`` is sent to the workers, so it must
    pickle (a module-level function or a fitted model object)."""
    queries: list[ForwardQuery | InverseQuery] = list(task.queries())
    ex = executor if executor is not None else LocalExecutor(1)
    out: dict[str, Any] = {}
    k = 0
    for part in ex.map(_answer, queries, context=Context(_same, (model,), value=model), chunk=chunk):
        for pred in part:
            if pred is not None:
                out[queries[k].sample_id] = pred
            k += 1
    return out
