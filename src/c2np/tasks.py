"""The model-facing task API (contract §12): queries without targets in, a scored
:class:`~c2np.evaluation.results.Results` record out.

>>> from c2np.tasks import ForwardTask
>>> task = ForwardTask.open("data.h5", split="ood", subset="eval")      # doctest: +SKIP
>>> preds = {q.sample_id: my_model(q) for q in task.queries()}          # doctest: +SKIP
>>> task.evaluate(preds).write("results.json")                          # doctest: +SKIP

* :class:`ForwardQuery` carries exactly the task-1 inputs of contract §6 (sample id, unit cell,
  radius, rotation, centre) and nothing derived from the target particle.
* :class:`InverseQuery` carries an opaque sample id and the particle only: a task-2 model
  cannot reach the cell, the lattice, the material's name, the radius or the rotation
  through it. The task maps opaque ids back to store rows when it scores.
* Which rows are evaluated (:func:`select_rows`), the task-2 target of a material
  (:func:`inverse_target`) and the training / validation examples a fitted model may learn
  from (under protocol ``strict`` never a held-out material or validation radius) are
  decided here, once.
* ``evaluate`` uses the same harness and failure rule as ``c2np evaluate``.

See docs/tutorials/benchmark-your-model.md.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from c2np.carving import carve
from c2np.categories import ModelCategory
from c2np.cells import UnitCell, standardize
from c2np.errors import C2NPInputError, C2NPNoAnswerError
from c2np.evaluation.harness import EvalStore, score_forward, score_inverse
from c2np.evaluation.results import Results
from c2np.executor import Executor
from c2np.metrics import F1_TOLERANCES_ANGSTROM, InverseTarget
from c2np.particle import Particle
from c2np.prediction_objects import forward_predictions, inverse_predictions
from c2np.sealed import DEV_SPLIT, HELDOUT_SPLITS, heldout_parts
from c2np.splits import SPLITS, RecipeTable

__all__ = ["EVAL_ROTATIONS_PER_GROUP", "EVAL_SEED", "SUBSETS", "EVAL_SPLITS", "TASK_NAMES",
           "select_rows", "training_material_rows", "example_rows", "inverse_target", "opaque_sample_id",
           "ForwardQuery",
           "InverseQuery", "ForwardTask", "InverseTask", "open_task", "evaluate_task"]

EVAL_ROTATIONS_PER_GROUP = 8
EVAL_SEED = 20260119
SUBSETS: tuple[str, ...] = ("eval", "full")
EVAL_SPLITS: tuple[str, ...] = (*SPLITS, "test", *HELDOUT_SPLITS)
TASK_NAMES: tuple[str, ...] = ("forward", "inverse")


# ----------------------------------------------------------------------------------------
# Which rows
# ----------------------------------------------------------------------------------------
def _split_mask(recipes: RecipeTable, split: str) -> np.ndarray:
    if split == "test":
        return recipes.mask("id") | recipes.mask("ood")
    if split in HELDOUT_SPLITS:
        if not recipes.heldout_materials:
            raise C2NPInputError(f"protocol {recipes.protocol!r} has no held-out materials "
                                 f"(split {split!r} exists in protocol 'strict')")
        held = set(heldout_parts(recipes.heldout_materials).materials(split))
        if not held:
            raise C2NPNoAnswerError(
                f"split {split!r}: every held-out material of this store ({len(recipes.heldout_materials)}) is a "
                f"development material ({DEV_SPLIT}), so no sealed test rows exist and no sealed number can be "
                "reported; a store needs held-out materials that development has not looked at")
        idx = [i for i, m in enumerate(recipes.materials) if m in held]
        return np.isin(recipes.material_index, idx)
    if split not in SPLITS:
        raise C2NPInputError(f"unknown split {split!r}; choose one of {list(EVAL_SPLITS)}")
    return recipes.mask(split)


def select_rows(recipes: RecipeTable, split: str, subset: str = "eval", *,
                per_group: int = EVAL_ROTATIONS_PER_GROUP, seed: int = EVAL_SEED) -> np.ndarray:
    """Sorted row indices of ``split`` (one of SPLITS, ``test`` = id ∪ ood, ``heldout`` = all
    rows of the held-out materials, ``heldout-dev`` / ``heldout-test`` their development and
    sealed test parts, :mod:`c2np.sealed`) restricted to ``subset``.

    ``eval``: in every (material, R) group of the split, ``per_group`` rotations drawn
    without replacement from the group's rotation indices k >= 1 (the identity ``rot_0`` is
    never drawn) by ``numpy.random.default_rng([seed, R]).choice(sorted(k), per_group)``;
    all of them when the group has fewer. Materials sharing an orientation set (protocol
    ``paper``) therefore get the same rotation indices. ``full``: every row.
    """
    if subset not in SUBSETS:
        raise C2NPInputError(f"unknown subset {subset!r}; choose one of {list(SUBSETS)}")
    if int(per_group) < 1:
        raise C2NPInputError(f"rotations per (material, R) must be >= 1, got {per_group}")
    rows = np.flatnonzero(_split_mask(recipes, split))
    if subset == "full" or len(rows) == 0:
        return rows
    mat = recipes.material_index[rows]
    rad = recipes.radius_angstrom[rows]
    rot = recipes.rotation_index[rows]
    order = np.lexsort((rot, rad, mat))
    rows, mat, rad, rot = rows[order], mat[order], rad[order], rot[order]
    keys = mat.astype(np.int64) * 100_000 + rad
    bounds = np.flatnonzero(np.diff(keys)) + 1
    chosen: list[np.ndarray] = []
    for a, b in zip(np.r_[0, bounds], np.r_[bounds, len(rows)]):
        g_rows, g_rot = rows[a:b], rot[a:b]
        cand = g_rot > 0
        g_rows, g_rot = g_rows[cand], g_rot[cand]
        if len(g_rot) <= per_group:
            chosen.append(g_rows)
            continue
        rng = np.random.default_rng([int(seed), int(rad[a])])
        pick = rng.choice(len(g_rot), size=per_group, replace=False)
        chosen.append(g_rows[pick])
    return np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=np.int64)


def training_material_rows(recipes: RecipeTable, *, per_group: int = EVAL_ROTATIONS_PER_GROUP,
                           seed: int = EVAL_SEED) -> np.ndarray:
    """Sorted eval-subset rows (as :func:`select_rows`: ``per_group`` rotations k >= 1 per
    (material, R), at every radius of every split) of the materials that are **not** held out
    (protocol ``strict``): particles the held-out benchmark never scores, for choosing an
    inference setting without looking at the held-out rows. The rotation ``rot_0`` that
    ``example_rows(rotations_per_group=1)`` gives a model to fit is never among them."""
    held = [i for i, m in enumerate(recipes.materials) if m in set(recipes.heldout_materials)]
    if not held:
        raise C2NPInputError(f"protocol {recipes.protocol!r} has no held-out materials, so no rows "
                             "are outside the held-out benchmark (use protocol 'strict')")
    rows = [select_rows(recipes, s, "eval", per_group=per_group, seed=seed) for s in SPLITS]
    out = np.concatenate(rows)
    return np.sort(out[~np.isin(recipes.material_index[out], held)])


def example_rows(recipes: RecipeTable, split: str = "train", *,
                 rotations_per_group: int | None = None) -> np.ndarray:
    """Sorted rows a fitted model may learn from: ``split`` (``train`` or ``val``) without
    the held-out materials of the protocol (``strict``); validation radii are split ``val``
    already, never ``train``. ``rotations_per_group`` keeps the lowest rotation indices of
    every (material, R) group (the identity first where present)."""
    if split not in ("train", "val"):
        raise C2NPInputError(f"training examples come from 'train' or 'val', not {split!r}")
    rows = np.flatnonzero(recipes.mask(split))
    held = [i for i, m in enumerate(recipes.materials) if m in set(recipes.heldout_materials)]
    if held:
        rows = rows[~np.isin(recipes.material_index[rows], held)]
    if rotations_per_group is not None and len(rows):
        if rotations_per_group < 1:
            raise C2NPInputError(f"rotations_per_group must be >= 1, got {rotations_per_group}")
        order = np.lexsort((recipes.rotation_index[rows], recipes.radius_angstrom[rows],
                            recipes.material_index[rows]))
        rows = rows[order]
        keys = recipes.material_index[rows].astype(np.int64) * 100_000 + recipes.radius_angstrom[rows]
        starts = np.r_[0, np.flatnonzero(np.diff(keys)) + 1]
        rank = np.arange(len(rows)) - np.repeat(starts, np.diff(np.r_[starts, len(rows)]))
        rows = np.sort(rows[rank < rotations_per_group])
    return rows


# ----------------------------------------------------------------------------------------
# Targets and ids
# ----------------------------------------------------------------------------------------
_TARGETS: dict[tuple[Any, ...], InverseTarget] = {}


def inverse_target(cell: UnitCell, *, symprec_angstrom: float = 1e-3) -> InverseTarget:
    """Task-2 target of a unit cell (contract §2): lattice parameters and space group of
    ``c2np.cells.standardize(cell, symprec_angstrom=1e-3)`` (cached per cell content)."""
    key = (cell.material_id, cell.lattice_angstrom.tobytes(), cell.frac_coords.tobytes(),
           cell.numbers.tobytes(), float(symprec_angstrom))
    if key not in _TARGETS:
        s = standardize(cell, symprec_angstrom=symprec_angstrom)
        _TARGETS[key] = InverseTarget(s.parameters, int(s.spacegroup))
    return _TARGETS[key]


def opaque_sample_id(fingerprint: str, sample_id: str) -> str:
    """The id a task-2 model sees for a sample: ``"s"`` + 20 hex digits of
    SHA-256(``c2np-inverse``, dataset fingerprint, sample id). Stable for a dataset, and
    names neither the material nor the radius nor the rotation. It is not a secret against
    a program that reads the store itself (nothing is); it keeps the query clean."""
    digest = hashlib.sha256(f"c2np-inverse\0{fingerprint}\0{sample_id}".encode()).hexdigest()
    return "s" + digest[:20]


# ----------------------------------------------------------------------------------------
# Queries
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ForwardQuery:
    """What a task-1 model may see for one sample (contract §6): never the target particle or
    its atom count.

    Attributes:
        sample_id: the sample's id (``{material}/R{r}/rot_{k}``).
        cell: the material's unit cell.
        radius_angstrom: sphere radius (Å).
        quaternion: (4,) scalar-last rotation (read-only).
        centre_frac: (3,) carving centre in fractional coordinates of the cell.
    """

    sample_id: str
    cell: UnitCell
    radius_angstrom: float
    quaternion: np.ndarray
    centre_frac: tuple[float, float, float]

    def __post_init__(self) -> None:
        q = np.array(self.quaternion, dtype=np.float64, copy=True).reshape(4)
        q.setflags(write=False)
        object.__setattr__(self, "quaternion", q)


@dataclass(frozen=True, eq=False)
class InverseQuery:
    """What a task-2 model may see for one sample: an opaque id and the particle (species
    and centred positions, canonical order). Nothing else.

    Attributes:
        sample_id: opaque id (:func:`opaque_sample_id`); hand predictions back under it.
        particle: the nanoparticle.
    """

    sample_id: str
    particle: Particle


def _forward_query(store: EvalStore, row: int) -> ForwardQuery:
    t = store.recipes
    mat = t.materials[int(t.material_index[row])]
    return ForwardQuery(t.sample_id(int(row)), store.cells[mat], float(t.radius_angstrom[row]),
                        t.quaternion[row], tuple(float(x) for x in t.centre_frac))  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------
# Tasks
# ----------------------------------------------------------------------------------------
def _open_store(path: str | os.PathLike[str]) -> Any:
    from c2np.store import DatasetStore

    return DatasetStore.open(path)


def _require_intact(store: EvalStore, executor: Executor | None = None) -> None:
    """A store read from a file is checked against its fingerprint before it is scored
    (:func:`c2np.store.require_intact`, its base particles re-carved by ``executor``); a
    tampered or damaged one is refused."""
    from c2np.store import DatasetStore, require_intact

    if isinstance(store, DatasetStore):
        require_intact(store, executor=executor)


class _Task:
    """Shared part of :class:`ForwardTask` and :class:`InverseTask`."""

    name = ""

    def __init__(self, store: EvalStore, split: str, subset: str = "eval", *,
                 protocol: str | None = None, per_group: int = EVAL_ROTATIONS_PER_GROUP,
                 executor: Executor | None = None) -> None:
        if protocol is not None and protocol != store.recipes.protocol:
            raise C2NPInputError(f"{getattr(store, 'path', 'store')}: store has protocol "
                                 f"{store.recipes.protocol!r}, expected {protocol!r}")
        _require_intact(store, executor)
        self._store = store
        self.split = split
        self.subset = subset
        self.protocol = store.recipes.protocol
        self.fingerprint = store.fingerprint
        self.per_group = int(per_group)
        self._rows = select_rows(store.recipes, split, subset, per_group=self.per_group)
        if len(self._rows) == 0:
            raise C2NPInputError(f"split {split!r} has no samples in this store")

    @classmethod
    def open(cls, store_path: str | os.PathLike[str], split: str, subset: str = "eval", *,
             protocol: str | None = None, **kwargs: Any) -> Any:
        """The task on the dataset store at ``store_path``; ``protocol``, when given, must be
        the store's (else :class:`C2NPInputError`)."""
        return cls(_open_store(store_path), split, subset, protocol=protocol, **kwargs)

    def __len__(self) -> int:
        return int(len(self._rows))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(protocol={self.protocol!r}, split={self.split!r}, "
                f"subset={self.subset!r}, n={len(self)})")

    @property
    def heldout_materials(self) -> tuple[str, ...]:
        """Materials of the store held out of training (protocol ``strict``; empty otherwise)."""
        return tuple(self._store.recipes.heldout_materials)

    @property
    def subset_definition(self) -> dict[str, Any]:
        """How the evaluated rows were chosen (recorded in the results)."""
        if self.subset == "eval":
            return {"rotations_per_material_radius": self.per_group, "seed": EVAL_SEED,
                    "identity_excluded": True}
        return {"all_rows": True}

    def _example_rows(self, split: str, rotations_per_group: int | None) -> np.ndarray:
        rows = example_rows(self._store.recipes, split, rotations_per_group=rotations_per_group)
        if len(rows) == 0:
            raise C2NPInputError(f"protocol {self.protocol!r}: this store has no {split!r} samples "
                                 "a model may learn from")
        return rows


class ForwardTask(_Task):
    """Task 1 (cell + R + rotation -> particle) on one split / subset of a store."""

    name = "forward"

    def queries(self) -> Iterator[ForwardQuery]:
        """The evaluated samples' inputs, in row order."""
        for row in self._rows:
            yield _forward_query(self._store, int(row))

    def training_examples(self, *, rotations_per_group: int | None = None
                          ) -> Iterator[tuple[ForwardQuery, Particle]]:
        """(query, target particle) of the samples a model may fit (:func:`example_rows`,
        split ``train``)."""
        for row in self._example_rows("train", rotations_per_group):
            yield _forward_query(self._store, int(row)), self._store.particle(int(row))

    def validation_examples(self, *, rotations_per_group: int | None = None
                            ) -> Iterator[tuple[ForwardQuery, Particle]]:
        """(query, target particle) of the validation split (model selection only)."""
        for row in self._example_rows("val", rotations_per_group):
            yield _forward_query(self._store, int(row)), self._store.particle(int(row))

    def evaluate(self, predictions: str | os.PathLike[str] | Mapping[str, Any], *,
                 model: str = "model", category: ModelCategory | None = None,
                 tolerances_angstrom: Sequence[float] = F1_TOLERANCES_ANGSTROM,
                 n_resamples: int = 1000, seed: int = 0, progress: bool = False,
                 workers: int = 1, executor: Executor | None = None,
                 shard: tuple[int, int] | None = None) -> Any:
        """Score ``{sample_id: Particle}`` or a predictions file (.extxyz / .h5) on the
        evaluated rows (the harness of ``c2np evaluate``); ``executor`` (else ``workers``
        local processes) runs the scoring (:mod:`c2np.executor`). ``shard = (i, n)``:
        only shard i of n, returned as a :class:`~c2np.evaluation.shards.PartialResults`
        (else a :class:`Results`). In-memory values may also be ``ase.Atoms`` or pymatgen
        ``Molecule`` / ``Structure`` (:mod:`c2np.prediction_objects`)."""
        if isinstance(predictions, Mapping):
            predictions = forward_predictions(predictions)
        return score_forward(self._store, self._rows, predictions, id_index=_store_ids(self._store),
                             split=self.split, subset=self.subset,
                             subset_definition=self.subset_definition, model=model, category=category,
                             tolerances_angstrom=tolerances_angstrom, n_resamples=n_resamples,
                             seed=seed, progress=progress, workers=workers, executor=executor,
                             shard=shard)


class InverseTask(_Task):
    """Task 2 (particle -> lattice parameters + space group) on one split / subset of a store.

    Queries carry opaque ids; ``evaluate`` accepts predictions under those ids or under the
    store's own sample ids (files written by ``c2np predict``), never both for one sample.
    """

    name = "inverse"

    def __init__(self, store: EvalStore, split: str, subset: str = "eval", *,
                 protocol: str | None = None, symprec_angstrom: float = 1e-3,
                 per_group: int = EVAL_ROTATIONS_PER_GROUP, executor: Executor | None = None) -> None:
        super().__init__(store, split, subset, protocol=protocol, per_group=per_group,
                         executor=executor)
        self.symprec_angstrom = float(symprec_angstrom)
        self._opaque: dict[str, int] | None = None

    def _opaque_ids(self) -> dict[str, int]:
        if self._opaque is None:
            ids = self._store.recipes.sample_ids()
            self._opaque = {opaque_sample_id(self.fingerprint, sid): i for i, sid in enumerate(ids)}
            if len(self._opaque) != len(ids):
                raise C2NPInputError("opaque sample ids collide in this store (report this)")
        return self._opaque

    def _query(self, row: int) -> InverseQuery:
        sid = self._store.recipes.sample_id(row)
        return InverseQuery(opaque_sample_id(self.fingerprint, sid), self._store.particle(row))

    def _target(self, row: int) -> InverseTarget:
        t = self._store.recipes
        return inverse_target(self._store.cells[t.materials[int(t.material_index[row])]],
                              symprec_angstrom=self.symprec_angstrom)

    def queries(self) -> Iterator[InverseQuery]:
        """The evaluated samples as (opaque id, particle), in row order; particles are read
        one at a time."""
        for row in self._rows:
            yield self._query(int(row))

    def perturbed_queries(self, *, noise_angstrom: float = 0.0, random_centre: bool = False,
                          seed: int = 0) -> Iterator[InverseQuery]:
        """The evaluated samples under a perturbation (robustness), same opaque ids and row
        order as :meth:`queries`; deterministic for a ``seed``.

        ``random_centre``: the particle is re-carved from the material's cell about a
        centre drawn uniformly in the unit cell (same R and rotation). ``noise_angstrom``:
        isotropic Gaussian noise of that standard deviation (Å) added to every coordinate.
        Both draw from ``numpy.random.default_rng([seed, row])``, so a sample's perturbation
        does not depend on which other rows are evaluated."""
        if not np.isfinite(noise_angstrom) or noise_angstrom < 0:
            raise C2NPInputError(f"noise_angstrom must be >= 0 Å, got {noise_angstrom!r}")
        t = self._store.recipes
        for row in self._rows:
            rng = np.random.default_rng([int(seed), int(row)])
            if random_centre:
                cell = self._store.cells[t.materials[int(t.material_index[row])]]
                part = carve(cell, float(t.radius_angstrom[row]), centre_frac=rng.random(3),
                             quaternion=t.quaternion[row]).particle
            else:
                part = self._store.particle(int(row))
            pos = part.positions_angstrom
            if noise_angstrom > 0:
                pos = pos + rng.normal(scale=noise_angstrom, size=pos.shape)
            yield InverseQuery(opaque_sample_id(self.fingerprint, t.sample_id(int(row))),
                               Particle(part.numbers, pos))

    def training_examples(self, *, rotations_per_group: int | None = None
                          ) -> Iterator[tuple[InverseQuery, InverseTarget]]:
        """(query, target) of the samples a model may fit (:func:`example_rows`, split
        ``train``; under ``strict`` never a held-out material)."""
        for row in self._example_rows("train", rotations_per_group):
            yield self._query(int(row)), self._target(int(row))

    def validation_examples(self, *, rotations_per_group: int | None = None
                            ) -> Iterator[tuple[InverseQuery, InverseTarget]]:
        """(query, target) of the validation split (model selection only)."""
        for row in self._example_rows("val", rotations_per_group):
            yield self._query(int(row)), self._target(int(row))

    def evaluate(self, predictions: str | os.PathLike[str] | Mapping[str, Any], *,
                 model: str = "model", category: ModelCategory | None = None,
                 length_tol_angstrom: float = 0.5, angle_tol_deg: float = 0.5,
                 length_rel_tol: float = 0.01, n_resamples: int = 1000, seed: int = 0,
                 progress: bool = False, workers: int = 1, executor: Executor | None = None) -> Results:
        """Score ``{sample_id: (a, b, c, alpha, beta, gamma, spacegroup)}`` (or
        :class:`~c2np.predictions.InversePrediction` values, or mappings) or a CSV file on
        the evaluated rows (the harness of ``c2np evaluate``); ``executor`` (else ``workers``
        local processes) computes the metrics (:mod:`c2np.executor`). A value may also be a
        predicted crystal, ``ase.Atoms`` with a cell or a pymatgen ``Structure``: its
        standardized cell is scored (:mod:`c2np.prediction_objects`)."""
        if isinstance(predictions, Mapping):
            predictions = inverse_predictions(predictions, symprec_angstrom=self.symprec_angstrom)
        t = self._store.recipes
        mats = {t.materials[int(m)] for m in np.unique(t.material_index[self._rows])}
        targets = {m: inverse_target(self._store.cells[m], symprec_angstrom=self.symprec_angstrom)
                   for m in sorted(mats)}
        id_index = {**_store_ids(self._store), **self._opaque_ids()}
        return score_inverse(self._store, self._rows, predictions, id_index=id_index, targets=targets,
                             split=self.split, subset=self.subset,
                             subset_definition=self.subset_definition, model=model, category=category,
                             length_tol_angstrom=length_tol_angstrom, angle_tol_deg=angle_tol_deg,
                             length_rel_tol=length_rel_tol, symprec_angstrom=self.symprec_angstrom,
                             n_resamples=n_resamples, seed=seed, progress=progress,
                             workers=workers, executor=executor)


def _store_ids(store: EvalStore) -> dict[str, int]:
    return {sid: i for i, sid in enumerate(store.recipes.sample_ids())}


_TASKS: dict[str, type[_Task]] = {"forward": ForwardTask, "inverse": InverseTask}


def open_task(name: str, store: EvalStore, split: str, subset: str = "eval", *,
              protocol: str | None = None, per_group: int = EVAL_ROTATIONS_PER_GROUP,
              executor: Executor | None = None) -> ForwardTask | InverseTask:
    """:class:`ForwardTask` (``"forward"``) or :class:`InverseTask` (``"inverse"``) on an
    open store; ``per_group`` rotations per (material, R) in the ``eval`` subset
    (:func:`select_rows`); ``executor`` re-carves the store's base particles for its check."""
    if name not in _TASKS:
        raise C2NPInputError(f"task must be one of {list(TASK_NAMES)}, got {name!r}")
    return _TASKS[name](store, split, subset, protocol=protocol,  # type: ignore[return-value]
                        per_group=per_group, executor=executor)


def evaluate_task(name: str, store: EvalStore, predictions: str | os.PathLike[str] | Mapping[str, Any],
                  split: str, subset: str = "eval", *, model: str = "model",
                  category: ModelCategory | None = None, n_resamples: int = 1000,
                  seed: int = 0, progress: bool = False, workers: int = 1,
                  per_group: int = EVAL_ROTATIONS_PER_GROUP, executor: Executor | None = None) -> Results:
    """Score predictions of task ``name`` with default tolerances (``c2np evaluate``, the
    benchmark) on the ``subset`` rows (``per_group`` rotations per (material, R) for
    ``eval``); ``workers`` / ``executor`` run the scoring of either task; ``category`` (what
    the model knows, :mod:`c2np.categories`) is recorded in the results."""
    task = open_task(name, store, split, subset, per_group=per_group, executor=executor)
    if isinstance(task, ForwardTask):
        return task.evaluate(predictions, model=model, category=category, n_resamples=n_resamples, seed=seed,
                             progress=progress, workers=workers, executor=executor)
    return task.evaluate(predictions, model=model, category=category, n_resamples=n_resamples, seed=seed,
                         progress=progress, workers=workers, executor=executor)

