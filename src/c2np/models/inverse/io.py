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

__all__ = ["GENERATOR_KIND", "save_generator", "load_generator"]

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


def load_generator(folder: str | Path) -> CrystalGenerator:
    """A generator written by :func:`save_generator` (with the folder's space-group templates,
    :data:`c2np.models.inverse.templates.TEMPLATES_FILE`, when it has them)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    p = Path(folder)
    try:
        meta = json.loads((p / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise C2NPInputError(f"{p}: not a crystal generator folder ({exc})") from exc
    try:
        tensors = load_file(str(p / "model.safetensors"))
    except (SafetensorError, OSError, ValueError) as exc:
        raise C2NPInputError(f"{p / 'model.safetensors'}: not readable weights ({exc})") from exc
    try:
        cfg = GenConfig(**meta["config"])
    except TypeError as exc:          # a field this version does not know
        raise C2NPInputError(f"{p / 'config.json'}: not a configuration of this version ({exc})") from exc
    n = int(meta["n_desc"])
    model = CrystalGenerator(cfg, n, [tuple(c) for c in meta["compositions"]], np.zeros(n), np.ones(n),
                             np.zeros((3, 3)), 1.0)
    try:
        model.load_state_dict(tensors)
    except RuntimeError as exc:         # missing, unexpected or mis-shaped tensors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise C2NPInputError(f"{p / 'model.safetensors'}: the weights do not match config.json ({first})") from exc
    model.templates = load_templates(p) or []
    model.eval()
    return model
