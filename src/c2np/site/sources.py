"""What a site is built from: results documents, grouped per model with the model's
``model.yml`` text, its prediction files (for the viewer and the confusion matrix) and its
training log (for loss vs fidelity).

Every results document enters through :func:`load_results` (one reader), as a plain dict
of the ``c2np.results/1`` schema (docs/reference/formats.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from c2np.categories import UNSTATED
from c2np.errors import C2NPInputError
from c2np.fileio import read_text_bounded
from c2np.report import REFERENCE_BASELINES
from c2np.submissions import load_yaml

__all__ = ["SiteModel", "load_results", "find_results_files", "models_from_results",
           "read_forward_samples", "read_predicted_spacegroups",
           "model_kind", "BASELINE_KINDS", "SUBMISSION_MODEL_FILE", "SUBMISSION_LOG_FILE"]

SUBMISSION_MODEL_FILE = "model.yml"
SUBMISSION_LOG_FILE = "training_log.csv"  # <submission>/<task>/training_log.csv

# The role of each built-in baseline, shown beside its category.
BASELINE_KINDS: dict[str, str] = {
    "analytic-carve": "analytic · ceiling",
    "memorisation": "analytic · memorisation",
    "random-ball": "analytic · floor",
    "solver": "analytic · solver",
    "composition-lookup": "analytic · memorisation",
    "majority-class": "analytic · floor",
}


def load_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The results document at ``path`` as a dict; raises :class:`C2NPInputError` naming the
    file when it is not a readable ``c2np.results/1`` document."""
    from c2np.evaluation.results import Results

    return dict(Results.read(path).data)


@dataclass(frozen=True)
class SiteModel:
    """One model of the site.

    Attributes:
        model_id: the model's id (the results' ``model``; a submission's folder name).
        results: its results documents (one per task and split).
        model_yml: the text of its ``model.yml`` (None when built from results only).
        metadata: the parsed ``model.yml`` (empty when none).
        predictions: (task, split) -> prediction file, where it is on disk.
        training_logs: task -> the ``log.csv`` of the training run of the model submitted
            for that task (columns of ``c2np.models.training.LOG_COLUMNS``).
    """

    model_id: str
    results: tuple[Mapping[str, Any], ...]
    model_yml: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    predictions: Mapping[tuple[str, str], Path] = field(default_factory=dict)
    training_logs: Mapping[str, Path] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """How the model is labelled in tables: its category (see :func:`model_kind`)."""
        return model_kind(self.model_id, self.metadata, self.results)

    @property
    def tasks(self) -> tuple[str, ...]:
        """The tasks it has results for, in task order."""
        have = {str(d["task"]) for d in self.results}
        return tuple(t for t in REFERENCE_BASELINES if t in have)


def model_kind(model_id: str, metadata: Mapping[str, Any] | None = None,
               results: Sequence[Mapping[str, Any]] = ()) -> str:
    """The label of a model in tables: a built-in baseline's role; else the category (with
    its priors) of its ``model.yml``, else of its results; else ``"unstated"``."""
    if model_id in BASELINE_KINDS:
        return BASELINE_KINDS[model_id]
    meta = metadata or {}
    block = meta.get("model") if isinstance(meta.get("model"), Mapping) else None
    source = block if block is not None and "category" in block else (results[0] if results else {})
    category = str(source.get("category", UNSTATED))
    priors = [str(p) for p in source.get("priors", ()) or ()]
    return f"{category} ({', '.join(priors)})" if priors else category


def find_results_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Results JSON files named by ``paths``: files as given; a folder's ``results/``
    subfolder when it has one (a benchmark output folder), else the folder's own ``*.json``
    files (sorted). Every file must then be a results document. A missing path or no file at
    all raises :class:`C2NPInputError`."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            folder = p / "results" if (p / "results").is_dir() else p
            out.extend(sorted(q for q in folder.glob("*.json") if q.is_file()))
        else:
            raise C2NPInputError(f"{p}: no such results file or folder")
    if not out:
        raise C2NPInputError(f"no results JSON files in {', '.join(map(str, paths))}")
    return out


def _submission_of(prediction: Path) -> Path | None:
    """The submission folder holding a prediction file (``<id>/<task>/<split>.ext``), if any."""
    for folder in (prediction.parent.parent, prediction.parent):
        if (folder / SUBMISSION_MODEL_FILE).is_file():
            return folder
    return None


def _locate(recorded: str, search_dirs: Sequence[Path]) -> Path | None:
    """A prediction file recorded in a results document: the path itself when it exists,
    else the longest tail of it found under one of ``search_dirs`` (the results may have
    been written from another working directory)."""
    p = Path(recorded)
    if p.is_file():
        return p
    parts = p.parts
    for base in search_dirs:
        for i in range(1 if p.is_absolute() else 0, len(parts)):
            q = base.joinpath(*parts[i:])
            if q.is_file():
                return q
    return None


def models_from_results(documents: Sequence[Mapping[str, Any]], *,
                        search_dirs: Sequence[str | os.PathLike[str]] = ()) -> list[SiteModel]:
    """Group results documents by model. Prediction files named in the documents are used
    where they exist (see :func:`_locate` for ``search_dirs``); a ``model.yml`` (and ``training_log.csv``) found in
    the submission folder of a prediction file is attached, with its ``<task>/training_log.csv`` files. Two documents
    for the same (model, task, split) are bad input."""
    import yaml

    dirs = [Path(d) for d in search_dirs]
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    seen: set[tuple[str, str, str]] = set()
    for d in documents:
        key = (str(d["model"]), str(d["task"]), str(d["split"]))
        if key in seen:
            raise C2NPInputError(f"two results documents for model {key[0]!r}, task {key[1]!r}, "
                                 f"split {key[2]!r}")
        seen.add(key)
        grouped.setdefault(key[0], []).append(d)
    models = []
    for model_id, docs in sorted(grouped.items()):
        preds: dict[tuple[str, str], Path] = {}
        folder: Path | None = None
        for d in docs:
            recorded = (d.get("predictions") or {}).get("path")
            path = _locate(str(recorded), dirs) if recorded else None
            if path is not None:
                preds[(str(d["task"]), str(d["split"]))] = path
                folder = folder or _submission_of(path)
        text, meta, logs = None, {}, {}
        if folder is not None:
            text = read_text_bounded(folder / SUBMISSION_MODEL_FILE)
            try:
                loaded = load_yaml(text)
            except yaml.YAMLError:
                loaded = None
            meta = loaded if isinstance(loaded, dict) else {}
            logs = {t: folder / t / SUBMISSION_LOG_FILE for t in REFERENCE_BASELINES
                    if (folder / t / SUBMISSION_LOG_FILE).is_file()}
        models.append(SiteModel(model_id=model_id, results=tuple(docs), model_yml=text,
                                metadata=meta, predictions=preds, training_logs=logs))
    return models


def read_forward_samples(path: str | os.PathLike[str], wanted: Iterable[str]
                         ) -> dict[str, tuple[Any, Any]]:
    """``{sample_id: (numbers (n,), positions (n, 3) Å)}`` of the ``wanted`` samples of a
    task-1 predictions file (one pass; samples absent from the file are absent here)."""
    from c2np.predictions import iter_forward_predictions

    want = set(wanted)
    out: dict[str, tuple[Any, Any]] = {}
    for _place, sid, numbers, positions in iter_forward_predictions(path):
        if sid in want:
            out[sid] = (numbers, positions)
            if len(out) == len(want):
                break
    return out


def read_predicted_spacegroups(path: str | os.PathLike[str]) -> dict[str, int | None]:
    """``{id: space group}`` of a task-2 predictions file (ids as in the file: the store's or
    the opaque ids of ``c2np.tasks``); None where the predicted space group is not an integer
    in 1..230 (that sample is a failure)."""
    import math

    from c2np.predictions import read_inverse_predictions

    out: dict[str, int | None] = {}
    for sid, row in read_inverse_predictions(path).items():
        sg = row.spacegroup
        ok = math.isfinite(sg) and float(sg).is_integer() and 1 <= sg <= 230
        out[sid] = int(sg) if ok else None
    return out
