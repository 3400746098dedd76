"""Saving and loading a task-2 crystal generator folder: ``model.safetensors``,
``config.json`` (the :class:`~c2np.models.inverse.config.GenConfig`, the training
compositions, kind :data:`GENERATOR_KIND`), ``train_log.jsonl`` and, when built, the
space-group templates (:mod:`c2np.models.inverse.templates`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from c2np.errors import C2NPInputError
from c2np.models.inverse.config import GenConfig
from c2np.models.inverse.generator import CrystalGenerator
from c2np.models.inverse.templates import load_templates
from c2np.terminal import printable, shortened

__all__ = ["GENERATOR_KIND", "save_generator", "load_generator", "read_generator_meta", "descriptor_size"]

#: the ``kind`` of a generator folder's ``config.json``
GENERATOR_KIND = "c2np.crystal_gen/1"


def save_generator(model: CrystalGenerator, folder: str | Path, log_rows: Sequence[dict[str, Any]]) -> Path:
    """Write ``model.safetensors``, ``config.json`` and ``train_log.jsonl`` to ``folder``."""
    from safetensors.torch import save_file

    from c2np.fileio import atomic_path, write_text

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    with atomic_path(out / "model.safetensors") as tmp:    # fsync'ed, renamed, mode by the umask
        save_file(tensors, tmp)
    meta = {"config": asdict(model.cfg), "compositions": model.compositions,
            "n_desc": int(model.desc_mean.shape[0]), "kind": GENERATOR_KIND}
    write_text(out / "config.json", json.dumps(meta, indent=2) + "\n")
    write_text(out / "train_log.jsonl", "".join(json.dumps(r) + "\n" for r in log_rows))
    return out


def descriptor_size() -> int:
    """Length of the particle descriptor a generator is conditioned on (``n_desc``)."""
    from c2np.particle_descriptor import N_BINS, N_SLOTS, slot_pairs

    return len(slot_pairs()) * N_BINS + N_SLOTS + 1


def read_generator_meta(folder: str | Path) -> dict[str, Any]:
    """A generator folder's ``config.json``, read by the guarded reader against
    :data:`~c2np.models.schemas.GENERATOR_META_SCHEMA`: its ``kind``, ``n_desc`` (the
    descriptor length of this version) and the sizes of the network it declares (limits
    ``model_layers`` and ``weights_bytes``), checked before anything is allocated."""
    from c2np.limits import check as check_limit
    from c2np.models.runfiles import check_model_size, read_json
    from c2np.models.schemas import GENERATOR_META_SCHEMA

    p = Path(folder)
    path = p / "config.json"
    meta = read_json(path, what="crystal generator config", folder=p, schema=GENERATOR_META_SCHEMA)
    source = printable(path)
    if meta["kind"] != GENERATOR_KIND:
        raise C2NPInputError(f"{source}: kind: {shortened(meta['kind'])} is not a crystal generator "
                             f"({GENERATOR_KIND!r})")
    if meta["n_desc"] != descriptor_size():
        raise C2NPInputError(f"{source}: n_desc: {shortened(meta['n_desc'])} is not the descriptor length of this "
                             f"version ({descriptor_size()})")
    try:
        cfg = GenConfig(**meta["config"])
    except C2NPInputError as exc:
        raise C2NPInputError(f"{source}: config: {exc}") from None
    check_limit("model_layers", cfg.layers, what=f"{source}: config.layers")
    check_model_size(lambda: _empty_generator(cfg, meta), source=f"{source}: config")
    return meta


def _empty_generator(cfg: GenConfig, meta: dict[str, Any]) -> CrystalGenerator:
    n = int(meta["n_desc"])
    return CrystalGenerator(cfg, n, [tuple(c) for c in meta["compositions"]], np.zeros(n), np.ones(n),
                            np.zeros((3, 3)), 1.0)


def load_generator(folder: str | Path) -> CrystalGenerator:
    """A generator written by :func:`save_generator` (with the folder's space-group templates,
    :data:`c2np.models.inverse.templates.TEMPLATES_FILE`, when it has them). Every file is
    read as :mod:`c2np.models.runfiles` says (regular files inside the folder, guarded JSON,
    sizes within the limits before they are allocated)."""
    from c2np.models.runfiles import load_weights_into, read_weights

    p = Path(folder)
    if not p.is_dir():
        raise C2NPInputError(f"{printable(p)}: not a crystal generator folder (not a folder)")
    meta = read_generator_meta(p)
    tensors = read_weights(p / "model.safetensors", folder=p)
    cfg = GenConfig(**meta["config"])
    model = _empty_generator(cfg, meta)
    load_weights_into(model, tensors, source=p / "model.safetensors")
    model.templates = load_templates(p) or []
    model.eval()
    return model
