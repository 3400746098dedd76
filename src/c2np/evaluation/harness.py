"""The scoring loop: predictions against the reference of every evaluated row, with the
failure rule, in worker processes for task 1, assembled into a :class:`Results` record.

The harness is told which rows to score, how sample ids map to rows and (task 2) the
target of each material by :mod:`c2np.tasks`; it reads the reference particles from the
store and never decides what a model may see. Ids of the store outside the evaluated rows
are ignored (counted); unknown ids, two entries for one sample, and unreadable files raise
:class:`C2NPInputError`; an evaluated sample without a usable prediction is a failure,
scored at every metric's penalty value (contract §8, §10).
"""

from __future__ import annotations

import functools
import os
import queue
import sys
import threading
import time
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from c2np.categories import UNSTATED, ModelCategory
from c2np.errors import C2NPInputError
from c2np.evaluation.aggregate import aggregate, aggregate_groups
from c2np.evaluation.results import RESULTS_SCHEMA, Results, versions
from c2np.evaluation.shards import PartialResults, shard_positions
from c2np.executor import Context, Executor, LocalExecutor, same
from c2np.fileio import file_sha256
from c2np.kernel_cache import compile_notice
from c2np.limits import check as check_limit
from c2np.metrics import (
    F1_TOLERANCES_ANGSTROM,
    PRIMARY,
    InverseTarget,
    MetricInfo,
    ReferenceSummary,
    Scores,
    forward_failure,
    forward_metric_info,
    forward_metrics,
    inverse_failure,
    inverse_metric_info,
    inverse_metrics,
)
from c2np.particle import Particle
from c2np.predictions import forward_format, inverse_values, iter_forward_predictions, read_inverse_predictions
from c2np.splits import SPLITS, RecipeTable

__all__ = ["EvalStore", "score_forward", "score_inverse", "BATCH", "RowInfo", "assemble_forward",
           "compile_metric_kernels"]

#: Task-1 samples read ahead per worker (and task-2 predictions sent to a worker at a time).
BATCH = 32
#: Task-1 samples sent to a worker process at a time (a worker that is done takes the next);
#: 8 = one (material, R) group of the eval subset, so a group's reference summary is
#: usually computed by one worker only.
CHUNK = 8


class EvalStore(Protocol):
    """What the harness needs from a dataset store (``c2np.store.DatasetStore`` has it)."""

    @property
    def recipes(self) -> RecipeTable:
        """The recipe table."""

    @property
    def cells(self) -> Mapping[str, Any]:
        """Material id -> unit cell."""

    @property
    def fingerprint(self) -> str:
        """The dataset fingerprint (recorded in results; keys the opaque task-2 ids)."""

    def particle(self, row: int) -> Particle:
        """The reference particle of sample ``row`` (rotated, centred)."""

    def base_particle(self, material: str, radius_angstrom: int) -> Particle:
        """The unrotated (material, R) particle."""


def _progress(total: int, desc: str, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="sample", disable=not enabled, file=sys.stderr)


class _Resolver:
    """Maps each entry of a predictions source to its evaluated position, enforcing the id
    rules (unknown id, duplicate sample, outside the evaluated rows)."""

    def __init__(self, rows: np.ndarray, id_index: Mapping[str, int], label: str) -> None:
        self.wanted = {int(r): k for k, r in enumerate(rows)}
        self.id_index = id_index
        self.label = label
        self.seen: dict[int, str] = {}
        self.n_entries = 0
        self.n_ignored = 0

    def position(self, place: str, sid: str) -> int | None:
        """Position of ``sid`` among the evaluated rows; None when it is outside them."""
        row = self.id_index.get(sid)
        if row is None:
            raise C2NPInputError(f"{self.label}: {place}: unknown sample id {sid!r} (not in the store)")
        if row in self.seen:
            raise C2NPInputError(f"{self.label}: {place}: duplicate sample id {sid!r} (first at "
                                 f"{self.seen[row]})")
        self.seen[row] = place
        self.n_entries += 1
        k = self.wanted.get(row)
        if k is None:
            self.n_ignored += 1
        return k


# --- task 1 ------------------------------------------------------------------------------
class _ForwardScorer:
    """Scores one task-1 sample against the store; caches reference summaries per
    (material, R)."""

    def __init__(self, store: EvalStore, tolerances_angstrom: tuple[float, ...]) -> None:
        self.store = store
        self.tol = tolerances_angstrom
        self.summaries: dict[tuple[int, int], ReferenceSummary] = {}

    def summary(self, row: int) -> ReferenceSummary:
        t = self.store.recipes
        key = (int(t.material_index[row]), int(t.radius_angstrom[row]))
        if key not in self.summaries:
            base = self.store.base_particle(t.materials[key[0]], key[1])
            self.summaries[key] = ReferenceSummary.from_particle(
                base.numbers, base.positions_angstrom, radius_angstrom=float(key[1]))
        return self.summaries[key]

    def score(self, row: int, numbers: np.ndarray, positions: np.ndarray) -> Scores:
        ref = self.store.particle(int(row))
        return forward_metrics(numbers, positions, ref.numbers, ref.positions_angstrom,
                               reference=self.summary(int(row)), tolerances_angstrom=self.tol)


def _open_forward_scorer(store_path: str, tolerances_angstrom: tuple[float, ...]) -> _ForwardScorer:
    """Worker side: a scorer over the store file (spawned and Dask workers)."""
    from c2np.store import DatasetStore

    return _ForwardScorer(DatasetStore.open(store_path), tolerances_angstrom)


def _score_item(scorer: _ForwardScorer, item: tuple[int, int, np.ndarray, np.ndarray]
                ) -> tuple[int, Scores]:
    k, row, numbers, positions = item
    return k, scorer.score(row, numbers, positions)


#: the kernel modules of the scoring (:func:`compile_metric_kernels`)
METRIC_KERNEL_MODULES: tuple[str, ...] = ("c2np.assignment._auction_kernels", "c2np.assignment._grid_kernels",
                                          "c2np.assignment._tree_kernels", "c2np.metrics._pair_kernels")


def kernel_cache_is_warm() -> bool:
    """True when numba's on-disk cache holds the compiled scoring kernels (index files of the
    kernel modules of ``c2np.assignment`` and ``c2np.metrics``, beside them or under
    ``NUMBA_CACHE_DIR``), so that the first scoring loads them instead of compiling."""
    from c2np.kernel_cache import cache_is_warm

    return cache_is_warm(*METRIC_KERNEL_MODULES)


@functools.cache
def compile_metric_kernels() -> None:
    """Compile, or load from numba's cache, the machine code of the compiled kernels of
    :func:`~c2np.metrics.forward_metrics`, once per process: scores six synthetic
    predictions (noisy, with far outliers, shifted, a random ball, collapsed, collapsed with
    10 % more atoms; each
    writable and read-only) of a 12 Å cubic ABH3 ball (a = 4 Å; a read-only reference, as
    the store's). Called
    before the workers are forked, so that they inherit the code: a cold cache is compiled
    once instead of once per worker (about 20 CPU s each), a warm one loaded once
    (docs/decisions/0032-compile-kernels-before-workers.md). No result depends on it."""
    from c2np.carving import carve
    from c2np.cells import UnitCell

    cell = UnitCell("ABH3", np.eye(3) * 4.0, np.array([19, 12, 1, 1, 1]),
                    np.array([[0.5, 0.5, 0.5], [0, 0, 0], [0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5]]))
    ref = carve(cell, 12.0).particle
    zg, xg = ref.numbers, ref.positions_angstrom
    summary = ReferenceSummary.from_particle(zg, xg, radius_angstrom=12.0)
    rng = np.random.default_rng(0)
    n = len(zg)
    keep = rng.random(n) >= 0.02
    ball = rng.normal(size=(n, 3))
    ball *= (12.0 * rng.random(n) ** (1.0 / 3.0) / np.linalg.norm(ball, axis=1))[:, None]
    far = xg[keep] + rng.normal(scale=0.05, size=(int(keep.sum()), 3))
    far[::10] *= 3.0  # every 10th atom far outside: rows without partners nearby
    # collapsed with 10 % more atoms: the reference is the smaller set, far from the other
    more = np.concatenate([zg, zg[: n // 10]])
    cases = [(zg[keep], xg[keep] + rng.normal(scale=0.05, size=(int(keep.sum()), 3))),
             (zg[keep], far), (zg, xg + 1.5), (zg, ball), (zg, rng.uniform(-0.5, 0.5, size=(n, 3))),
             (more, rng.uniform(-0.5, 0.5, size=(len(more), 3)))]
    for zp, xp in cases:  # a file's predictions are writable, a Particle's read-only
        forward_metrics(zp, xp, zg, xg, reference=summary)
        forward_metrics(zp, Particle(zp, xp).positions_angstrom, zg, xg, reference=summary)


def scorer_context(store: EvalStore, tolerances_angstrom: tuple[float, ...]) -> Context:
    """The task-1 scorer as an executor context: built here (in-process and forked
    workers share it), rebuilt from the store's file elsewhere (spawned, Dask)."""
    scorer = _ForwardScorer(store, tolerances_angstrom)
    path = getattr(store, "path", None)
    if path is None:
        return Context(None, (), value=scorer)
    return Context(_open_forward_scorer, (str(path), tolerances_angstrom), value=scorer)


def score_forward(store: EvalStore, rows: np.ndarray,
                  predictions: str | os.PathLike[str] | Mapping[str, Particle], *,
                  id_index: Mapping[str, int], split: str, subset: str,
                  subset_definition: Mapping[str, Any], model: str = "model",
                  category: ModelCategory | None = None,
                  tolerances_angstrom: Sequence[float] = F1_TOLERANCES_ANGSTROM,
                  n_resamples: int = 1000, seed: int = 0, progress: bool = False,
                  workers: int = 1, executor: Executor | None = None,
                  shard: tuple[int, int] | None = None) -> Results | PartialResults:
    """Score task-1 predictions (a file or ``{sample_id: Particle}``) on store ``rows``.

    ``shard = (i, n)``: score only shard i of n (:func:`~c2np.evaluation.shards.shard_positions`)
    and return its :class:`~c2np.evaluation.shards.PartialResults`; ``c2np merge-results``
    combines the n parts into the results of one run.

    ``id_index`` maps every accepted sample id to its store row. Samples are scored by
    ``executor`` (default: a :class:`~c2np.executor.LocalExecutor` of ``workers``
    processes) in batches of :data:`BATCH`; the file is read and validated in this
    process. Results do not depend on the executor."""
    t0 = time.perf_counter()
    if len(rows) == 0:
        raise C2NPInputError(f"split {split!r} has no samples in this store")
    tol = tuple(float(x) for x in tolerances_angstrom)
    ctx = scorer_context(store, tol)
    scorer: _ForwardScorer = ctx.value
    if isinstance(predictions, Mapping):
        meta: dict[str, Any] = {"path": None, "sha256": None, "format": "in-memory"}
        source: Iterable[tuple[str, str, Any, Any]] = (
            (f"entry {k}", sid, part.numbers, part.positions_angstrom)
            for k, (sid, part) in enumerate(predictions.items()))
        label = "predictions"
    else:
        p = Path(predictions)
        if not p.is_file():
            raise C2NPInputError(f"{p}: no such predictions file")
        meta = {"path": str(p), "sha256": file_sha256(p), "format": forward_format(p)}
        source = iter_forward_predictions(p)
        label = str(p)
    resolve = _Resolver(rows, id_index, label)
    scores: list[Scores | None] = [None] * len(rows)
    mine = np.ones(len(rows), dtype=bool)
    if shard is not None:
        mine[:] = False
        mine[shard_positions(len(rows), *shard)] = True
    if executor is None:
        if workers < 1:
            raise C2NPInputError(f"workers must be >= 1, got {workers}")
        check_limit("workers", workers, what="evaluation workers")
    ex = executor if executor is not None else LocalExecutor(workers)
    parallel = ex.workers > 1 or ex.kind != "local"
    bar = _progress(len(rows), "evaluate forward", progress)

    def entries() -> Generator[tuple[int, int, np.ndarray, np.ndarray], None, None]:
        """The evaluated samples of the source, checked by ``resolve``. Started by the
        executor after its workers exist (no fork happens while the reader thread runs):
        with workers, the file is read ahead while they score."""
        items: Iterator[tuple[str, str, Any, Any]] = iter(source)
        if parallel:
            items = _ReadAhead(items, depth=2 * BATCH * max(ex.workers, 1))
        try:
            for place, sid, numbers, positions in items:
                k = resolve.position(place, sid)
                if k is None or not mine[k]:
                    continue
                yield k, int(rows[k]), np.asarray(numbers), np.asarray(positions)
        finally:
            if isinstance(items, _ReadAhead):
                items.close()

    if ex.kind == "local":  # forked workers inherit the machine code: compiled once
        notice = compile_notice("scoring kernels", "about a minute", *METRIC_KERNEL_MODULES) if progress else None
        if notice:
            print(notice, file=sys.stderr, flush=True)
        compile_metric_kernels()
    todo = entries()
    try:
        # small chunks, taken by whichever worker is free: no worker waits at a batch's end
        chunk = (CHUNK if ex.kind == "local" else BATCH) if parallel else 1
        for part in ex.map_unordered(_score_item, todo, context=ctx, chunk=chunk):
            for k, sc in part:
                scores[k] = sc
            bar.update(len(part))
        for k, row in enumerate(rows):
            if scores[k] is None and mine[k]:
                scores[k] = forward_failure("missing prediction", scorer.summary(int(row)),
                                            tolerances_angstrom=tol)
                bar.update(1)
    finally:
        todo.close()
        bar.close()
        if executor is None:
            ex.close()
    meta.update({"n_entries": resolve.n_entries, "n_ignored_outside_subset": resolve.n_ignored})
    info = RowInfo.of(store, rows)
    run = {"task": "forward", "model": model, "category": category_record(category), "split": split, "subset": subset,
           "subset_definition": dict(subset_definition), "predictions": meta,
           "tolerances": forward_tolerances(tol), "n_resamples": n_resamples, "seed": seed}
    if shard is not None:
        pos = np.flatnonzero(mine)
        return PartialResults.of(run, shard, len(rows), info, pos, [scores[k] for k in pos],
                                 seconds=time.perf_counter() - t0)
    return assemble_forward(run, info, [s for s in scores if s is not None],
                            seconds=time.perf_counter() - t0)


class _ReadAhead:
    """Iterate ``items`` (a predictions reader) while a background thread reads up to
    ``depth`` entries ahead, so that parsing the file overlaps the workers' scoring; the
    entries and any error of the reader arrive in order, the error raised here."""

    _END = object()

    def __init__(self, items: Iterator[Any], *, depth: int) -> None:
        self._queue: queue.Queue[tuple[BaseException | None, Any]] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(items,), daemon=True,
                                        name="c2np-read-ahead")
        self._thread.start()

    def _put(self, entry: tuple[BaseException | None, Any]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _read(self, items: Iterator[Any]) -> None:
        try:
            for item in items:
                if not self._put((None, item)):
                    return
            self._put((None, self._END))
        except BaseException as exc:  # handed to the consumer, raised there
            self._put((exc, None))

    def __iter__(self) -> _ReadAhead:
        return self

    def __next__(self) -> Any:
        err, item = self._queue.get()
        if err is not None:
            self.close()
            raise err
        if item is self._END:
            self.close()
            raise StopIteration
        return item

    def close(self) -> None:
        """Stop the reader (it finishes the entry it is reading) and wait for it."""
        self._stop.set()
        self._thread.join()


def forward_tolerances(tol: Sequence[float]) -> dict[str, Any]:
    """The ``tolerances`` entry of task-1 results, including the matched RMSD's far rule (an
    element certified at least ``matched_rmsd_far_rmsd_angstrom`` off may stop with its value
    within ``matched_rmsd_far_rel_gap`` of its bound, in RMSD)."""
    from c2np.assignment import FAR_REL_GAP, FAR_RMSD_ANGSTROM

    return {"f1_tolerances_angstrom": [float(t) for t in tol],
            "pair_distance_r_max_angstrom": 10.0, "pair_distance_bins": 128,
            "matching": "same element, distance strictly below tolerance",
            "matched_rmsd_far_rmsd_angstrom": float(FAR_RMSD_ANGSTROM),
            "matched_rmsd_far_rel_gap": float(FAR_REL_GAP)}


def assemble_forward(run: Mapping[str, Any], info: RowInfo, scores: list[Scores], *,
                     seconds: float) -> Results:
    """Task-1 results of ``scores`` (row order) for the run described by ``run`` (task,
    model, split, subset, subset_definition, predictions, tolerances, n_resamples, seed)."""
    tol = tuple(run["tolerances"]["f1_tolerances_angstrom"])
    bounds = matched_rmsd_bounds(info.sample_ids, scores)
    return assemble(task="forward", model=run["model"], category=run.get("category"),
                    split=run["split"], subset=run["subset"],
                    subset_definition=run["subset_definition"], scores=scores,
                    info=forward_metric_info(tol), predictions_meta=dict(run["predictions"]),
                    tolerances=dict(run["tolerances"]), n_resamples=int(run["n_resamples"]),
                    seed=int(run["seed"]), row_info=info,
                    extra={"matched_rmsd_uncertified": len(bounds),
                           "matched_rmsd_max_gap_angstrom": max((b["gap_angstrom"] for b in bounds), default=0.0),
                           "matched_rmsd_bounds": bounds,
                           "headline": PRIMARY["forward"].value},
                    seconds=seconds)


def matched_rmsd_bounds(sample_ids: Sequence[str], scores: Sequence[Scores]
                        ) -> list[dict[str, Any]]:
    """The successes whose matched RMSD is not certified optimal: ``sample_id``, the value
    reported (that of a valid pairing, an upper bound), its certified lower bound and the
    gap, in Å (docs/explanation/metrics.md, "Matched RMSD")."""
    out = []
    for sid, s in zip(sample_ids, scores):
        if s.ok and not s.details.get("matched_rmsd_certified", True):
            out.append({"sample_id": sid,
                        "matched_rmsd_angstrom": float(s.values["matched_rmsd"]),
                        "lower_bound_angstrom": float(s.details["matched_rmsd_lower_bound"]),
                        "gap_angstrom": float(s.details["matched_rmsd_gap"])})
    return out


# --- task 2 ------------------------------------------------------------------------------
def _inverse_source(predictions: str | os.PathLike[str] | Mapping[str, Any]
                    ) -> tuple[dict[str, Any], str, list[tuple[str, str, np.ndarray, float]]]:
    if isinstance(predictions, Mapping):
        entries = []
        for sid, value in predictions.items():
            try:
                params, sg = inverse_values(value)
            except (KeyError, TypeError, ValueError) as exc:
                raise C2NPInputError(f"predictions: entry {sid!r}: needs numeric a, b, c, alpha, beta, "
                                     f"gamma, spacegroup ({type(exc).__name__}: {exc})") from exc
            entries.append((f"entry {sid!r}", str(sid), params, sg))
        return {"path": None, "sha256": None, "format": "in-memory"}, "predictions", entries
    p = Path(predictions)
    raw = read_inverse_predictions(p)
    entries = [(f"line {r.line}", sid, r.params, r.spacegroup) for sid, r in raw.items()]
    return {"path": str(p), "sha256": file_sha256(p), "format": "csv"}, str(p), entries


def _score_inverse_item(tol: tuple[float, float, float],
                        item: tuple[int, np.ndarray, float, InverseTarget]) -> tuple[int, Scores]:
    """Worker side: task-2 metrics of one prediction (``tol``: length Å, angle °, relative)."""
    k, params, sg, target = item
    return k, inverse_metrics(params, sg, target, length_tol_angstrom=tol[0], angle_tol_deg=tol[1],
                              length_rel_tol=tol[2])


def score_inverse(store: EvalStore, rows: np.ndarray,
                  predictions: str | os.PathLike[str] | Mapping[str, Any], *,
                  id_index: Mapping[str, int], targets: Mapping[str, InverseTarget], split: str,
                  subset: str, subset_definition: Mapping[str, Any], model: str = "model",
                  category: ModelCategory | None = None, length_tol_angstrom: float = 0.5, angle_tol_deg: float = 0.5,
                  length_rel_tol: float = 0.01, symprec_angstrom: float = 1e-3,
                  n_resamples: int = 1000, seed: int = 0, progress: bool = False,
                  workers: int = 1, executor: Executor | None = None) -> Results:
    """Score task-2 predictions (a CSV file, or ``{sample_id: prediction}`` in any form
    :func:`c2np.predictions.inverse_values` takes) on store ``rows`` against ``targets``
    (material -> :class:`InverseTarget`); id rules as :func:`score_forward`. The metrics of
    the predicted samples are computed by ``executor`` (default: a
    :class:`~c2np.executor.LocalExecutor` of ``workers`` processes), in chunks of
    :data:`BATCH`; results do not depend on it."""
    t0 = time.perf_counter()
    if len(rows) == 0:
        raise C2NPInputError(f"split {split!r} has no samples in this store")
    t = store.recipes
    meta, label, entries = _inverse_source(predictions)
    resolve = _Resolver(rows, id_index, label)
    parsed: dict[int, tuple[np.ndarray, float]] = {}
    for place, sid, params, sg in entries:
        k = resolve.position(place, sid)
        if k is not None:
            parsed[k] = (params, sg)
    scores: list[Scores | None] = [None] * len(rows)
    used: dict[str, InverseTarget] = {}
    true_sg = np.zeros(len(rows), dtype=np.int64)
    confusion: dict[str, dict[str, int]] = {}
    items: list[tuple[int, np.ndarray, float, InverseTarget]] = []
    for k, row in enumerate(rows):
        mat = t.materials[int(t.material_index[row])]
        target = used.setdefault(mat, targets[mat])
        true_sg[k] = int(target.spacegroup)
        cell = confusion.setdefault(str(int(target.spacegroup)), {})
        pred_key = "missing" if k not in parsed else _sg_key(parsed[k][1])
        cell[pred_key] = cell.get(pred_key, 0) + 1
        if k not in parsed:
            scores[k] = inverse_failure("missing prediction", target)
        else:
            items.append((k, parsed[k][0], parsed[k][1], target))
    if executor is None:
        if workers < 1:
            raise C2NPInputError(f"workers must be >= 1, got {workers}")
        check_limit("workers", workers, what="evaluation workers")
    ex = executor if executor is not None else LocalExecutor(workers)
    tol = (float(length_tol_angstrom), float(angle_tol_deg), float(length_rel_tol))
    with _progress(len(rows), "evaluate inverse", progress) as bar:
        bar.update(len(rows) - len(items))
        try:
            for part in ex.map(_score_inverse_item, items, context=Context(same, (tol,), value=tol),
                               chunk=BATCH):
                for k, sc in part:
                    scores[k] = sc
                bar.update(len(part))
        finally:
            if executor is None:
                ex.close()
    meta.update({"n_entries": resolve.n_entries, "n_ignored_outside_subset": resolve.n_ignored})
    return assemble(task="inverse", model=model, category=category_record(category), store=store,
                    split=split, subset=subset,
                    subset_definition=subset_definition, rows=rows,
                    scores=[s for s in scores if s is not None], info=inverse_metric_info(), predictions_meta=meta,
                    tolerances={"joint_paper": {"length_angstrom": length_tol_angstrom,
                                                "angle_deg": angle_tol_deg},
                                "joint_strict": {"length_relative": length_rel_tol,
                                                 "angle_deg": angle_tol_deg},
                                "target_symprec_angstrom": symprec_angstrom},
                    n_resamples=n_resamples, seed=seed,
                    extra={"headline": PRIMARY["inverse"].value,
                           "targets": {m: v.to_dict() for m, v in used.items()},
                           "spacegroup_confusion": confusion,
                           "structure_types_in_training": _training_structure_types(t)},
                    seconds=time.perf_counter() - t0,
                    groups={"per_spacegroup": (true_sg, "spacegroup"),
                            "per_structure_type": (_structure_types(t, rows), "structure_type")})


def _training_structure_types(recipes: RecipeTable) -> list[str]:
    """Structure types of the store's materials that are not held out (what training sees)."""
    from c2np.catalog.shipped import structure_types_of

    held = set(recipes.heldout_materials)
    return sorted(set(structure_types_of([m for m in recipes.materials if m not in held])))


def _structure_types(recipes: RecipeTable, rows: np.ndarray) -> np.ndarray:
    """The structure type of each row's material (``unknown`` outside the shipped catalog)."""
    from c2np.catalog.shipped import structure_types_of

    types = dict(zip(recipes.materials, structure_types_of(recipes.materials)))
    return np.array([types[recipes.materials[int(i)]] for i in recipes.material_index[rows]], dtype=object)


def _sg_key(spacegroup: float) -> str:
    """Confusion-matrix column of a predicted space group ("invalid" outside 1..230)."""
    sg = float(spacegroup)
    return str(int(sg)) if np.isfinite(sg) and sg == int(sg) and 1 <= sg <= 230 else "invalid"


# --- the results document ----------------------------------------------------------------
@dataclass(frozen=True)
class RowInfo:
    """What the results need about the scored rows: per row its sample id, material,
    radius (Å) and split; for the run the protocol, dataset fingerprint and material count."""

    sample_ids: list[str]
    materials: list[str]
    radii_angstrom: list[int]
    splits: list[str]
    protocol: str
    fingerprint: str
    n_materials: int

    @classmethod
    def of(cls, store: EvalStore, rows: np.ndarray) -> RowInfo:
        t = store.recipes
        rows = np.asarray(rows, dtype=np.int64)
        return cls([t.sample_id(int(r)) for r in rows],
                   [str(t.materials[i]) for i in t.material_index[rows]],
                   [int(x) for x in t.radius_angstrom[rows]],
                   [SPLITS[int(i)] for i in t.split[rows]],
                   str(t.protocol), str(store.fingerprint), len(t.materials))

    def take(self, positions: Sequence[int]) -> RowInfo:
        pick = [int(k) for k in positions]
        return RowInfo([self.sample_ids[k] for k in pick], [self.materials[k] for k in pick],
                       [self.radii_angstrom[k] for k in pick], [self.splits[k] for k in pick],
                       self.protocol, self.fingerprint, self.n_materials)


def category_record(category: ModelCategory | None) -> dict[str, Any]:
    """The ``category`` / ``priors`` entry of a results document; ``unstated`` when the
    caller named no category (such results never rank as a learned model)."""
    if category is None:
        return {"category": UNSTATED, "priors": []}
    return category.to_dict()


def assemble(*, task: str, model: str, category: Mapping[str, Any] | None = None,
             store: EvalStore | None = None, split: str, subset: str,
             subset_definition: Mapping[str, Any], rows: np.ndarray | None = None,
             scores: list[Scores], info: dict[str, MetricInfo], predictions_meta: dict[str, Any],
             tolerances: dict[str, Any], n_resamples: int, seed: int, extra: dict[str, Any],
             seconds: float, row_info: RowInfo | None = None,
             groups: Mapping[str, tuple[np.ndarray, str]] | None = None) -> Results:
    """The results document of scored rows (``store`` and ``rows``, or their ``row_info``;
    one :class:`Scores` each, in row order): aggregates overall / per radius / per
    material / per split, failures with reasons, per-sample values, provenance
    (fingerprint, versions, tolerances, predictions hash). ``groups``: key -> (labels (n,),
    bootstrap prefix) for further aggregates, e.g. task 2 per space group."""
    if row_info is None:
        assert store is not None and rows is not None
        row_info = RowInfo.of(store, rows)
    names = list(info)
    values = np.array([[s.values[n] for n in names] for s in scores],
                      dtype=np.float64).reshape(len(scores), len(names))
    ok = np.array([s.ok for s in scores], dtype=bool)
    mats = np.asarray(row_info.materials, dtype=object)
    radii = np.asarray(row_info.radii_angstrom, dtype=np.int64)
    splits = np.asarray(row_info.splits, dtype=object)
    ids = list(row_info.sample_ids)
    kw = {"n_resamples": n_resamples, "seed": seed}
    metrics = {
        "overall": aggregate(values, ok, names, key="overall", **kw),
        "per_radius": aggregate_groups(values, ok, names, radii, "radius", **kw),
        "per_material": aggregate_groups(values, ok, names, mats, "material", **kw),
        "per_split": aggregate_groups(values, ok, names, splits, "split", **kw),
    }
    for key, (labels, prefix) in (groups or {}).items():
        metrics[key] = aggregate_groups(values, ok, names, labels, prefix, **kw)
    failed = [{"sample_id": ids[i], "reason": str(s.failure_reason)} for i, s in enumerate(scores) if not s.ok]
    samples: dict[str, Any] = {"sample_id": ids, "ok": ok.tolist()}
    for j, n in enumerate(names):
        samples[n] = [float(x) for x in values[:, j]]
    data = {
        "schema": RESULTS_SCHEMA,
        "task": task,
        "model": model,
        **(dict(category) if category is not None else category_record(None)),
        "protocol": row_info.protocol,
        "split": split,
        "subset": subset,
        "subset_definition": dict(subset_definition),
        "dataset": {"fingerprint": row_info.fingerprint, "n_materials": row_info.n_materials},
        "predictions": predictions_meta,
        "n_samples": len(ids),
        "n_failed": int(np.sum(~ok)),
        "failed_samples": failed,
        "tolerances": tolerances,
        "metric_info": {n: {"unit": m.unit, "better": m.better, "failure_penalty": m.penalty,
                            "paper_compatible": m.paper} for n, m in info.items()},
        "bootstrap": {"n_resamples": n_resamples, "seed": seed, "confidence": 0.95,
                      "method": "percentile"},
        "metrics": metrics,
        "samples": samples,
        "versions": versions(),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(seconds, 3),
        **extra,
    }
    return Results(data)
