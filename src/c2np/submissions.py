"""Submissions: a model enters the leaderboard as a folder ``<model-id>/`` holding a
``model.yml`` (what the model is) and its prediction files per task and split.

Layout (docs/reference/submissions.md)::

    <model-id>/model.yml
    <model-id>/forward/{id,ood}.{extxyz,h5}          task 1
    <model-id>/inverse/{id,ood[,heldout]}.csv        task 2 (heldout: protocol strict)
    <model-id>/<task>/training_log.csv               optional: loss vs fidelity per epoch

* :func:`read_model_yml`: ``yaml.safe_load`` + JSON-Schema validation (:data:`MODEL_SCHEMA`,
  jsonschema), every problem named with its place in the document;
* :func:`check_submission`: schema, fingerprint, every file readable, every expected sample
  id present; returns the list of problems (empty = valid);
* :func:`score_submissions`: every submission of a folder scored by the evaluation harness
  (one source of truth for the leaderboard).
"""

from __future__ import annotations

import datetime as _dt
import itertools
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from c2np.categories import CATEGORIES, PRIORS, check_category
from c2np.errors import C2NPInputError, C2NPLimitError
from c2np.terminal import printable, shortened

__all__ = ["SUBMISSION_SCHEMA", "MODEL_SCHEMA", "MODEL_SCHEMA_FILE", "model_schema_text", "packaged_model_schema",
           "orcid_checksum_ok", "MODEL_ID_PATTERN", "PREDICTION_SUFFIXES",
           "DEFAULT_SPLITS", "Problem", "read_model_yml", "expected_splits", "prediction_file",
           "check_submission", "find_submissions", "rotations_per_group", "submission_splits"]

SUBMISSION_SCHEMA = "c2np.submission/1"
MODEL_ID_PATTERN = r"^[a-z0-9][a-z0-9._+-]{0,63}$"
PREDICTION_SUFFIXES: dict[str, tuple[str, ...]] = {"forward": (".extxyz", ".h5"), "inverse": (".csv",)}
_HEX64 = r"^[0-9a-f]{64}$"
ORCID_PATTERN = r"^(https://orcid\.org/)?[0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{3}[0-9X]$"
PACKAGE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
#: the JSON Schema file shipped in the package (identical to :data:`MODEL_SCHEMA`)
MODEL_SCHEMA_FILE = "model.schema.json"

MODEL_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "c2np submission model.yml",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema", "model", "training", "hardware", "wall_time_seconds", "c2np_version",
                 "date", "tasks"],
    "properties": {
        "schema": {"const": SUBMISSION_SCHEMA},
        "model": {
            "type": "object", "additionalProperties": False,
            "required": ["id", "name", "version", "family", "category", "authors", "license"],
            "anyOf": [{"required": ["repository"]}, {"required": ["doi"]}],
            "properties": {
                "id": {"type": "string", "pattern": MODEL_ID_PATTERN},
                "name": {"type": "string", "minLength": 1, "maxLength": 200},
                "version": {"type": "string", "minLength": 1, "maxLength": 64},
                "family": {"type": "string", "minLength": 1, "maxLength": 100},
                "category": {"enum": list(CATEGORIES)},
                "priors": {"type": "array", "uniqueItems": True, "maxItems": len(PRIORS),
                           "items": {"enum": list(PRIORS)}},
                "authors": {"type": "array", "minItems": 1,
                            "items": {"type": "string", "minLength": 1, "maxLength": 200}},
                "repository": {"type": "string", "minLength": 1, "maxLength": 500},
                "doi": {"type": "string", "pattern": r"^10\.\d{4,9}/\S+$"},
                "license": {"type": "string", "minLength": 1, "maxLength": 100},
                "description": {"type": "string", "maxLength": 5000},
                "orcids": {"type": "array", "uniqueItems": True, "maxItems": 100,
                           "items": {"type": "string", "pattern": ORCID_PATTERN}},
                "parameter_count": {"type": "integer", "minimum": 0},
                "checkpoint": {
                    "type": "object", "additionalProperties": False, "required": ["url", "sha256"],
                    "properties": {"url": {"type": "string", "pattern": r"^https?://\S+$", "maxLength": 2000},
                                   "sha256": {"type": "string", "pattern": _HEX64}},
                },
            },
        },
        "training": {
            "type": "object", "additionalProperties": False,
            "required": ["protocol", "store_fingerprint"],
            "properties": {
                "protocol": {"enum": ["paper", "strict", "strict-structure"]},
                "store_fingerprint": {"type": "string", "pattern": _HEX64},
                "data": {"type": "string", "maxLength": 2000},
            },
        },
        "hardware": {"type": "string", "minLength": 1, "maxLength": 500},
        "compute": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "gpu_type": {"type": "string", "minLength": 1, "maxLength": 200},
                "gpu_count": {"type": "integer", "minimum": 0, "maximum": 100000},
                "gpu_hours": {"type": "object", "additionalProperties": False,
                              "properties": {"training": {"type": "number", "minimum": 0},
                                             "inference": {"type": "number", "minimum": 0}}},
            },
        },
        "packages": {"type": "object", "maxProperties": 500,
                     "propertyNames": {"pattern": PACKAGE_NAME_PATTERN},
                     "additionalProperties": {"type": "string", "minLength": 1, "maxLength": 100}},
        "wall_time_seconds": {
            "type": "object", "additionalProperties": False, "required": ["training", "inference"],
            "properties": {"training": {"type": "number", "minimum": 0},
                           "inference": {"type": "number", "minimum": 0}},
        },
        "c2np_version": {"type": "string", "minLength": 1, "maxLength": 64},
        "date": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
        "tasks": {"type": "array", "minItems": 1, "uniqueItems": True,
                  "items": {"enum": list(PREDICTION_SUFFIXES)}},
        "subset": {"enum": ["eval", "full"], "default": "eval"},
        "rotations_per_material_radius": {"type": "integer", "minimum": 1, "maximum": 1000},
        "splits": {"type": "array", "minItems": 1, "uniqueItems": True,
                   "items": {"enum": ["id", "ood", "heldout"]}},
    },
}


def model_schema_text() -> str:
    """:data:`MODEL_SCHEMA` as the text of the shipped JSON Schema file (2-space indented
    JSON, a final newline)."""
    import json

    return json.dumps(MODEL_SCHEMA, indent=2, ensure_ascii=False) + "\n"


def packaged_model_schema() -> str:
    """The text of the JSON Schema file shipped in the package (``c2np/data/model.schema.json``)."""
    from importlib.resources import files

    return (files("c2np") / "data" / MODEL_SCHEMA_FILE).read_text(encoding="utf-8")


def orcid_checksum_ok(orcid: str) -> bool:
    """True when the last character of an ORCID iD is its ISO 7064 MOD 11-2 check character."""
    digits = orcid.removeprefix("https://orcid.org/").replace("-", "")
    total = 0
    for ch in digits[:-1]:
        total = (total + int(ch)) * 2
    check = (12 - total % 11) % 11
    return digits[-1] == ("X" if check == 10 else str(check))


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a submission: the file, the place in it, what is wrong."""

    path: str
    place: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.place}: {self.message}" if self.place else f"{self.path}: {self.message}"


def _plain(value: Any) -> Any:
    """YAML dates as ISO strings (``2026-01-19`` parses as a date), recursively."""
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _where(error: Any) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{_short(printable(p), 80)}" for p in error.absolute_path)
    return path.lstrip(".") or "(top level)"


def load_yaml(text: str) -> Any:
    """The YAML document ``text`` read by the guarded reader (:func:`c2np.structured.load_yaml_text`:
    safe types, no aliases, bounded depth and integers, finite numbers, valid dates as ISO
    strings); a problem is a ``yaml.YAMLError`` naming its line."""
    from c2np.structured import load_yaml_text

    return load_yaml_text(text)


def read_model_yml(path: str | os.PathLike[str]) -> tuple[dict[str, Any] | None, list[Problem]]:
    """``(document, problems)`` of a ``model.yml``: a regular file inside its folder (checked
    before it is opened), read by the guarded reader (:mod:`c2np.structured`: size within
    ``yaml_bytes``, no aliases, bounded depth and integers, finite numbers, valid dates) and
    validated against :data:`MODEL_SCHEMA`; every value shown in a problem is shortened. The
    document is None when it cannot be parsed."""
    import jsonschema
    import yaml

    from c2np.fileio import regular_file_in
    from c2np.structured import read_text

    p = Path(path)
    where = printable(p)
    try:
        regular_file_in(p.parent, p, what="model.yml")
        text = read_text(p, what="model.yml", limit="yaml_bytes")
    except FileNotFoundError:
        return None, [Problem(where, "", "no model.yml")]
    except C2NPLimitError:
        raise
    except C2NPInputError as exc:
        return None, [Problem(where, "", _message(exc, p))]
    try:
        doc = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        place = f"line {mark.line + 1}" if mark is not None else ""
        return None, [Problem(where, place, f"not YAML ({_short(printable(getattr(exc, 'problem', None) or exc))})")]
    if not isinstance(doc, dict):
        return None, [Problem(where, "", "must be a YAML mapping (key: value)")]
    doc = _plain(doc)
    validator = jsonschema.Draft202012Validator(MODEL_SCHEMA)
    errors = sorted(itertools.islice(validator.iter_errors(doc), 200), key=lambda e: list(map(str, e.absolute_path)))
    problems = [Problem(where, _where(e), _short(printable(e.message))) for e in errors]
    date = doc.get("date")
    if isinstance(date, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        try:
            _dt.date.fromisoformat(date)
        except ValueError:
            problems.append(Problem(where, "date", f"{date!r} is not a valid date"))
    model = doc.get("model")
    if isinstance(model, dict) and isinstance(model.get("orcids"), list):
        for k, orcid in enumerate(model["orcids"]):
            if isinstance(orcid, str) and re.fullmatch(ORCID_PATTERN, orcid) and not orcid_checksum_ok(orcid):
                problems.append(Problem(str(p), f"model.orcids[{k}]",
                                        f"{orcid!r} fails the ORCID check digit (a typo?)"))
    if isinstance(model, dict) and not any(pr.place.startswith(("model.category", "model.priors"))
                                           or (pr.place == "model" and "category" in pr.message) for pr in problems):
        try:
            check_category(model.get("category"), model.get("priors", ()), where="model")
        except C2NPInputError as exc:
            problems.append(Problem(where, "model.priors", _short(str(exc).removeprefix("model: "))))
    return doc, problems


def _short(message: str, limit: int = 300) -> str:
    """A schema message cut to about ``limit`` characters, keeping its start and its end (the
    rule broken), so that a huge value is never echoed whole."""
    half = limit // 2
    return message if len(message) <= limit else f"{message[:half]} … {message[-half:]}"


DEFAULT_SPLITS: tuple[str, ...] = ("id", "ood")


def expected_splits(task: str, protocol: str, splits: Sequence[str] = DEFAULT_SPLITS) -> tuple[str, ...]:
    """The splits a submission for ``task`` covers: ``splits`` (ID and OOD by default), plus
    the held-out materials for task 2 under protocols ``strict`` and ``strict-structure``
    (never for task 1)."""
    out = [s for s in splits if not (s == "heldout" and task == "forward")]
    if task == "inverse" and protocol in ("strict", "strict-structure") and "heldout" not in out:
        out.append("heldout")
    return tuple(out)


def submission_splits(doc: Mapping[str, Any], task: str, protocol: str,
                      splits: Sequence[str] = DEFAULT_SPLITS) -> tuple[str, ...]:
    """The splits of ``task`` a submission is checked and scored on: :func:`expected_splits`,
    restricted to the ``splits`` its ``model.yml`` declares (all of them when it declares none;
    e.g. ``[heldout]`` for a model evaluated on the held-out materials only)."""
    wanted = expected_splits(task, protocol, splits)
    declared = doc.get("splits")
    if not isinstance(declared, list):
        return wanted
    return tuple(s for s in wanted if s in declared)


def prediction_file(folder: Path, task: str, split: str) -> tuple[Path | None, list[Problem]]:
    """The prediction file of (task, split) in a submission folder (exactly one allowed): a
    regular file inside the folder, checked before it is opened (a FIFO, a device or a link
    leading outside the folder is a problem naming the path, never read)."""
    from c2np.fileio import regular_file_in

    found = [folder / task / f"{split}{ext}" for ext in PREDICTION_SUFFIXES[task]
             if os.path.lexists(folder / task / f"{split}{ext}")]
    if not found:
        names = " or ".join(f"{task}/{split}{e}" for e in PREDICTION_SUFFIXES[task])
        return None, [Problem(printable(folder), "", f"missing prediction file {names}")]
    if len(found) > 1:
        return None, [Problem(printable(folder), "", f"several prediction files for {task} {split}: "
                              f"{', '.join(f.name for f in found)} (keep one)")]
    try:
        regular_file_in(folder, found[0], what="prediction file")
    except FileNotFoundError:
        return None, [Problem(printable(found[0]), "", "a link to nothing")]
    except C2NPInputError as exc:
        return None, [Problem(printable(found[0]), "", _message(exc, found[0]))]
    return found[0], []


def find_submissions(root: str | os.PathLike[str]) -> list[Path]:
    """Submission folders under ``root`` (its sub-folders holding a ``model.yml``; ``root``
    itself when it holds one), sorted."""
    r = Path(root)
    if not r.is_dir():
        raise C2NPInputError(f"{r}: no such submissions folder")
    if (r / "model.yml").is_file():
        return [r]
    return sorted(d for d in r.iterdir() if d.is_dir() and (d / "model.yml").is_file())


def _id_problems(path: Path, ids: Iterable[tuple[str, str]], known: Callable[[str], str | None],
                 expected: Sequence[str]) -> list[Problem]:
    """Unknown / duplicate / missing ids of one prediction file (``ids``: (place, raw id);
    ``known`` maps a raw id to the store's id, None when unknown)."""
    problems = []
    seen: dict[str, str] = {}
    got: set[str] = set()
    for place, raw in ids:
        sid = known(raw)
        if sid is None:
            problems.append(Problem(str(path), place, f"unknown sample id {shortened(raw)} (not in the store)"))
            continue
        if sid in got:
            problems.append(Problem(str(path), place, f"duplicate sample id {shortened(raw)} (first at {seen[sid]})"))
            continue
        got.add(sid)
        seen[sid] = place
    missing = [s for s in expected if s not in got]
    if missing:
        shown = ", ".join(missing[:5]) + (f", … ({len(missing) - 5} more)" if len(missing) > 5 else "")
        problems.append(Problem(str(path), "", f"{len(missing)} expected sample id(s) missing: {shown}"))
    return problems


def _message(exc: Exception, path: Path) -> str:
    text = str(exc)
    for prefix in (f"{path}: ", f"{printable(path)}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def _file_ids(task: str, path: Path) -> list[tuple[str, str]]:
    """(place, sample id) of every entry of a prediction file, read by the harness's
    readers (:mod:`c2np.predictions`); unreadable content raises C2NPInputError."""
    from c2np.predictions import iter_forward_predictions, read_inverse_predictions

    if task == "forward":
        return [(place, sid) for place, sid, _z, _x in iter_forward_predictions(path)]
    return [(f"line {row.line}", sid) for sid, row in read_inverse_predictions(path).items()]


def rotations_per_group(doc: Mapping[str, Any]) -> int:
    """Rotations per (material, R) of the ``eval`` rows a ``model.yml`` document covers
    (``rotations_per_material_radius``; default the harness's 8)."""
    from c2np.tasks import EVAL_ROTATIONS_PER_GROUP

    value = doc.get("rotations_per_material_radius", EVAL_ROTATIONS_PER_GROUP)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 1 \
        else EVAL_ROTATIONS_PER_GROUP


def check_submission(folder: str | os.PathLike[str], store: Any, *,
                     splits: Sequence[str] = DEFAULT_SPLITS, per_group: int | None = None
                     ) -> tuple[dict[str, Any] | None, list[Problem]]:
    """``(model.yml document, problems)`` of a submission folder scored on ``store`` (an open
    ``DatasetStore``) over ``splits`` (see :func:`expected_splits`). The expected ``eval`` rows
    are the ones the file declares (``rotations_per_material_radius``); ``per_group``, when
    given, is what the leaderboard scores and the declaration must equal it. No problems means
    the leaderboard can score it; see docs/reference/submissions.md for the list of checks."""
    from c2np.tasks import TASK_NAMES, opaque_sample_id, select_rows

    f = Path(folder)
    problems: list[Problem] = []
    if not f.is_dir():
        return None, [Problem(str(f), "", "no such submission folder")]
    if not re.fullmatch(MODEL_ID_PATTERN, f.name):
        problems.append(Problem(str(f), "", f"folder name {f.name!r} is not a model id "
                                f"(pattern {MODEL_ID_PATTERN})"))
    yml = f / "model.yml"
    doc, ps = read_model_yml(yml)
    problems += ps
    if doc is None:
        return None, problems
    mid = (doc.get("model") or {}).get("id") if isinstance(doc.get("model"), dict) else None
    if isinstance(mid, str) and mid != f.name:
        problems.append(Problem(str(yml), "model.id", f"{mid!r} differs from the folder name {f.name!r}"))
    training: dict[str, Any] = doc["training"] if isinstance(doc.get("training"), dict) else {}
    fp = training.get("store_fingerprint")
    if isinstance(fp, str) and fp != store.fingerprint:
        problems.append(Problem(str(yml), "training.store_fingerprint",
                                f"{fp[:16]}… does not match the fingerprint {store.fingerprint[:16]}… of "
                                f"the store {store.path}"))
    proto = training.get("protocol")
    if isinstance(proto, str) and proto != store.recipes.protocol:
        problems.append(Problem(str(yml), "training.protocol",
                                f"{proto!r} differs from the store's protocol {store.recipes.protocol!r}"))
    tasks = [t for t in doc.get("tasks") or [] if t in TASK_NAMES] if isinstance(doc.get("tasks"), list) else []
    subset = doc.get("subset", "eval") if doc.get("subset", "eval") in ("eval", "full") else "eval"
    declared = rotations_per_group(doc)
    if subset == "full" and "rotations_per_material_radius" in doc:
        problems.append(Problem(str(yml), "rotations_per_material_radius",
                                "applies to subset eval only (subset full covers every rotation)"))
    elif subset == "eval" and per_group is not None and declared != per_group:
        problems.append(Problem(str(yml), "rotations_per_material_radius",
                                f"the files cover {declared} rotation(s) per (material, R); this leaderboard "
                                f"scores {per_group} (c2np leaderboard --per-group), so the rows would differ"))
    ids = store.recipes.sample_ids()
    index = {sid: i for i, sid in enumerate(ids)}
    opaque: dict[str, str] | None = None
    for task in TASK_NAMES:
        tdir = f / task
        if task not in tasks:
            if tdir.exists():
                problems.append(Problem(str(tdir), "", f"model.yml does not list task {task!r}; "
                                        "list it under tasks or remove the folder"))
            continue
        allowed = {"training_log.csv"}
        scored = submission_splits(doc, task, store.recipes.protocol, splits)
        if not scored:
            problems.append(Problem(str(yml), "splits", f"task {task!r}: covers none of the splits scored "
                                    f"here ({', '.join(expected_splits(task, store.recipes.protocol, splits))})"))
        for split in scored:
            allowed |= {f"{split}{e}" for e in PREDICTION_SUFFIXES[task]}
            path, ps = prediction_file(f, task, split)
            problems += ps
            if path is None:
                continue
            expected = [ids[int(r)] for r in select_rows(store.recipes, split, subset, per_group=declared)]
            try:
                entries = _file_ids(task, path)
            except C2NPInputError as exc:
                problems.append(Problem(printable(path), "", _short(printable(_message(exc, path)))))
                continue
            if task == "inverse" and opaque is None:
                opaque = {opaque_sample_id(store.fingerprint, sid): sid for sid in ids}
            table = opaque or {}

            def known(raw: str, _t: dict[str, str] = table, _task: str = task) -> str | None:
                if raw in index:
                    return raw
                return _t.get(raw) if _task == "inverse" else None

            problems += _id_problems(path, entries, known, expected)
        if tdir.is_dir():
            for extra in sorted(p.name for p in tdir.iterdir() if p.name not in allowed):
                wanted = ", ".join(scored)
                problems.append(Problem(str(tdir / extra), "", "unexpected file (not a prediction file of an "
                                        f"expected split: {wanted})"))
            log = tdir / "training_log.csv"
            if os.path.lexists(log):
                from c2np.fileio import regular_file_in
                from c2np.models.diagnostic import read_log_csv

                try:
                    regular_file_in(f, log, what="training log")
                    read_log_csv(log)
                except (C2NPInputError, OSError, UnicodeDecodeError) as exc:
                    problems.append(Problem(printable(log), "", _short(printable(_message(exc, log)))))
    return doc, problems
