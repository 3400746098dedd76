"""Model cards of trained model folders and the registry of shipped models (torch-free).

Every folder under ``pretrained/`` holds a ``model.yml`` card (:data:`CARD_SCHEMA`): the model's
folder id, name, task, family, category and priors, its training (protocol, the training
store's fingerprint, data, optimiser steps, batch size, seed), the hardware it was trained on,
where its results are, the members of a pool, and the SHA-256 of every file of the folder.
:func:`read_card` reads and validates one card; :func:`load_registry` reads every card of a
root folder (the registry); :func:`verify_card` recomputes what a card claims: each file's
SHA-256, no file left unlisted, and the priors, category and name that the model's own
configuration implies (:mod:`c2np.models.priors`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from c2np.categories import CATEGORIES, PRIORS, ModelCategory, check_category, name_with_priors
from c2np.errors import C2NPInputError

__all__ = ["CARD_FILE", "CARD_SCHEMA", "CARD_KIND", "TrainingRecord", "ModelCard", "read_card", "load_registry",
           "default_pretrained_root", "configured_priors", "file_digests", "verify_card", "card_document"]

CARD_FILE = "model.yml"
CARD_KIND = "c2np.model_card/1"
_SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_TEXT = {"type": "string", "minLength": 1, "maxLength": 5000}

#: the JSON Schema of a card (the subset :mod:`c2np.structured` checks)
CARD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["schema", "id", "name", "task", "family", "category", "priors", "description", "training",
                 "hardware", "results", "files"],
    "properties": {
        "schema": {"const": CARD_KIND},
        "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]{0,63}$"},
        "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._+-]{0,63}$"},
        "task": {"enum": ["forward", "inverse"]},
        "family": {"type": "string", "minLength": 1, "maxLength": 100},
        "category": {"enum": list(CATEGORIES)},
        "priors": {"type": "array", "uniqueItems": True, "items": {"enum": list(PRIORS)}},
        "description": _TEXT,
        "training": {
            "type": "object",
            "additionalProperties": False,
            "required": ["protocol", "store_fingerprint", "data", "steps", "batch_size", "seed"],
            "properties": {
                "protocol": {"enum": ["paper", "strict"]},
                "store_fingerprint": _SHA256,
                "data": _TEXT,
                "steps": {"type": "integer", "minimum": 0},
                "selected_step": {"type": "integer", "minimum": 0},
                "batch_size": {"type": "integer", "minimum": 1},
                "seed": {"type": "integer", "minimum": 0},
            },
        },
        "hardware": {"type": "string", "minLength": 1, "maxLength": 500},
        "results": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1, "maxLength": 500}},
        "members": {"type": "array", "minItems": 2, "uniqueItems": True,
                    "items": {"type": "string", "minLength": 1, "maxLength": 500}},
        "files": {"type": "object", "additionalProperties": _SHA256},
    },
}


@dataclass(frozen=True)
class TrainingRecord:
    """How a model was trained.

    Attributes:
        protocol: the split protocol of its training store (``paper`` or ``strict``).
        store_fingerprint: the training store's fingerprint (SHA-256 hex).
        data: the training data in words (materials, radii, pairs).
        steps: optimiser steps taken in all.
        batch_size: rows per optimiser step.
        seed: the training run's seed.
        selected_step: the step of the shipped checkpoint, where one was selected.
    """

    protocol: str
    store_fingerprint: str
    data: str
    steps: int
    batch_size: int
    seed: int
    selected_step: int | None = None


@dataclass(frozen=True)
class ModelCard:
    """One model folder's card (see the module).

    Attributes:
        folder: the model folder.
        id: the folder's name.
        name: the model's name with the tags of its priors (``mattergen+sites+sphere+snap``).
        task: ``forward`` or ``inverse``.
        family: the model family (a pool: its members' families joined by ``-``).
        category: category and priors (:class:`~c2np.categories.ModelCategory`).
        description: what the model is, in words.
        training: how it was trained.
        hardware: what it was trained on.
        results: where its results are (paths relative to the repository).
        members: a pool's member folders, relative to the pool folder (empty otherwise).
        files: SHA-256 of each file, by path relative to the folder (POSIX separators).
    """

    folder: Path
    id: str
    name: str
    task: str
    family: str
    category: ModelCategory
    description: str
    training: TrainingRecord
    hardware: str
    results: tuple[str, ...]
    members: tuple[str, ...]
    files: Mapping[str, str]

    @property
    def priors(self) -> tuple[str, ...]:
        """The model's analytic priors (:data:`~c2np.categories.PRIORS` order)."""
        return self.category.priors


def default_pretrained_root() -> Path:
    """The ``pretrained/`` folder of a source checkout (beside ``src/``)."""
    return Path(__file__).resolve().parents[3] / "pretrained"


def read_card(folder: str | os.PathLike[str]) -> ModelCard:
    """The card of a model folder, read by the guarded reader and validated against
    :data:`CARD_SCHEMA` and the category rules; a problem is one
    :class:`~c2np.errors.C2NPInputError` naming the file and the field."""
    from c2np.fileio import regular_file_in
    from c2np.structured import read_yaml

    f = Path(folder)
    path = f / CARD_FILE
    try:
        regular_file_in(f, path, what="model card")
    except FileNotFoundError:
        raise C2NPInputError(f"{path}: no model card") from None
    doc = read_yaml(path, schema=CARD_SCHEMA, what="model card")
    if doc["id"] != f.name:
        raise C2NPInputError(f"{path}: id {doc['id']!r} must be the folder's name {f.name!r}")
    category = check_category(doc["category"], doc["priors"], where=str(path))
    for rel in doc["files"]:
        parts = Path(rel).parts
        if Path(rel).is_absolute() or ".." in parts or "\\" in rel or rel == CARD_FILE:
            raise C2NPInputError(f"{path}: files: {rel!r} must be a path inside the folder (not the card)")
    t = doc["training"]
    return ModelCard(folder=f, id=doc["id"], name=doc["name"], task=doc["task"], family=doc["family"],
                     category=category, description=doc["description"],
                     training=TrainingRecord(t["protocol"], t["store_fingerprint"], t["data"], t["steps"],
                                             t["batch_size"], t["seed"], t.get("selected_step")),
                     hardware=doc["hardware"], results=tuple(doc["results"]), members=tuple(doc.get("members", ())),
                     files=dict(doc["files"]))


def load_registry(root: str | os.PathLike[str] | None = None) -> dict[str, ModelCard]:
    """Every model card under ``root`` (default :func:`default_pretrained_root`), by folder id:
    each sub-folder must hold a card."""
    r = Path(root) if root is not None else default_pretrained_root()
    if not r.is_dir():
        raise C2NPInputError(f"{r}: no such folder of trained models")
    return {d.name: read_card(d) for d in sorted(r.iterdir()) if d.is_dir() and not d.name.startswith(".")}


def _json(path: Path) -> Any:
    from c2np.structured import read_json

    return read_json(path, what="model configuration")


def configured_priors(card: ModelCard) -> tuple[str, tuple[str, ...]]:
    """``(family, priors)`` that the model folder's own configuration implies: a task-1 run's
    ``config.json`` (:func:`~c2np.models.priors.forward_priors`), a task-2 generator's
    (:func:`~c2np.models.priors.inverse_priors`) or a pool's members with the pool's settings
    (:func:`~c2np.models.priors.pool_priors`)."""
    from c2np.models.priors import forward_priors, inverse_priors, pool_priors

    f = card.folder
    if card.task == "forward":
        doc = _json(f / "config.json")
        return str(doc["model"]), forward_priors(str(doc["model"]), doc["config"])
    if (f / "pool.json").is_file():
        from c2np.models.inverse.pool import read_pool_members, resolve_member_folder

        members = read_pool_members(_json(f / "pool.json"), where=str(f / "pool.json"))
        cfgs = [{**_json(resolve_member_folder(f, m.path) / "config.json")["config"], **m.config} for m in members]
        return "-".join(str(c["process"]) for c in cfgs), pool_priors(cfgs)
    cfg = _json(f / "config.json")["config"]
    return str(cfg["process"]), inverse_priors(cfg)


def _listed_files(folder: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in filenames:
            rel = Path(dirpath, name).relative_to(folder).as_posix()
            if rel != CARD_FILE:
                out.append(rel)
    return sorted(out)


def file_digests(folder: str | os.PathLike[str]) -> dict[str, str]:
    """SHA-256 of every file of a model folder but its card, by path relative to the folder
    (POSIX separators, sorted): the ``files`` block a card of that folder must hold."""
    from c2np.fileio import file_sha256

    f = Path(folder)
    return {rel: file_sha256(f / rel) for rel in _listed_files(f)}


def verify_card(card: ModelCard) -> list[str]:
    """What is wrong with a card against its folder (empty: nothing): a listed file missing,
    not a regular file or with another SHA-256, a file of the folder not listed, priors,
    category or name other than the configuration implies, a pool's members other than its
    ``pool.json`` names. One line per problem, naming the file."""
    from c2np.fileio import file_sha256, regular_file_in
    from c2np.models.priors import category_of_priors

    f, where = card.folder, card.folder / CARD_FILE
    problems = []
    for rel, digest in card.files.items():
        p = f / rel
        try:
            regular_file_in(f, p, what="model file")
        except FileNotFoundError:
            problems.append(f"{p}: listed in {where} but missing")
            continue
        except C2NPInputError as exc:
            problems.append(str(exc))
            continue
        if file_sha256(p) != digest:
            problems.append(f"{p}: SHA-256 differs from {where}")
    problems += [f"{f / rel}: not listed in {where}" for rel in _listed_files(f) if rel not in card.files]
    try:
        family, priors = configured_priors(card)
    except (C2NPInputError, KeyError, TypeError) as exc:
        return [*problems, f"{where}: the configuration cannot be read ({exc})"]
    if family != card.family:
        problems.append(f"{where}: family {card.family!r}, the configuration says {family!r}")
    if priors != card.priors:
        problems.append(f"{where}: priors {list(card.priors)}, the configuration implies {list(priors)}")
    if category_of_priors(priors).category != card.category.category:
        problems.append(f"{where}: category {card.category.category}, the configuration implies "
                        f"{category_of_priors(priors).category}")
    if name_with_priors(family, priors) != card.name:
        problems.append(f"{where}: name {card.name!r}, the configuration implies {name_with_priors(family, priors)!r}")
    if (f / "pool.json").is_file():
        from c2np.models.inverse.pool import read_pool_members

        paths = tuple(m.path for m in read_pool_members(_json(f / "pool.json"), where=str(f / "pool.json")))
        if paths != card.members:
            problems.append(f"{where}: members {list(card.members)}, pool.json names {list(paths)}")
    elif card.members:
        problems.append(f"{where}: members listed, but the folder is not a pool")
    return problems


def card_document(card: ModelCard) -> dict[str, Any]:
    """The card as the mapping its ``model.yml`` holds (keys in :data:`CARD_SCHEMA` order)."""
    training = {k: v for k, v in dataclasses.asdict(card.training).items() if v is not None}
    doc: dict[str, Any] = {"schema": CARD_KIND, "id": card.id, "name": card.name, "task": card.task,
                           "family": card.family, "category": card.category.category,
                           "priors": list(card.priors), "description": card.description, "training": training,
                           "hardware": card.hardware, "results": list(card.results)}
    if card.members:
        doc["members"] = list(card.members)
    doc["files"] = dict(card.files)
    return json.loads(json.dumps(doc))
