"""Readers of the files in a run folder that fail with one clear error naming the file.

A damaged run folder (truncated or foreign safetensors, weights that do not fit the config,
malformed ``state.json`` or ``log.csv``, a pickle in ``optim.pt``) raises
:class:`~c2np.errors.C2NPInputError` saying which file and what is wrong, never a traceback
from torch, safetensors or json.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from c2np.errors import C2NPInputError
from c2np.fileio import read_text_bounded
from c2np.limits import check as check_limit

__all__ = ["read_json", "read_weights", "load_weights_into", "read_torch", "read_log"]


def read_json(path: Path, *, what: str, keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON object in ``path`` holding at least ``keys``."""
    try:
        data = json.loads(read_text_bounded(path))
    except FileNotFoundError:
        raise C2NPInputError(f"{path}: missing {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise C2NPInputError(f"{path}: cannot read the {what} ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise C2NPInputError(f"{path}: the {what} is not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    if not isinstance(data, dict):
        raise C2NPInputError(f"{path}: the {what} is not a JSON object")
    missing = [k for k in keys if k not in data]
    if missing:
        raise C2NPInputError(f"{path}: the {what} lacks {', '.join(missing)}")
    return data


def read_weights(path: Path, *, device: str = "cpu") -> dict[str, Any]:
    """Tensors of a ``.safetensors`` file (never a pickle), placed on ``device``."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not Path(path).is_file():
        raise C2NPInputError(f"{path}: no model weights (missing checkpoint)")
    try:
        return load_file(str(path), device=device)
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise C2NPInputError(f"{path}: damaged or foreign weights file ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''})") from exc


def load_weights_into(model: Any, tensors: dict[str, Any], *, source: Path) -> None:
    """``model.load_state_dict(tensors, strict=True)`` with an error naming ``source`` and
    the first mismatching tensors when the weights do not fit the model's config."""
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        detail = "; ".join(lines[1:4]) if len(lines) > 1 else (lines[0] if lines else "")
        raise C2NPInputError(f"{source}: the weights do not fit the model built from config.json "
                             f"({detail})") from exc


def read_torch(path: Path, *, what: str) -> Any:
    """A tensor file saved by ``torch.save``, read with ``weights_only=True`` (a pickle of
    arbitrary objects is refused, not executed)."""
    import pickle

    import torch

    if not Path(path).is_file():
        raise C2NPInputError(f"{path}: missing {what}")
    try:
        return torch.load(path, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, AttributeError,
            TypeError, KeyError, IndexError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise C2NPInputError(f"{path}: not a loadable {what} (only plain tensors are read; {first})") from exc


def read_log(path: Path, *, columns: tuple[str, ...]) -> list[dict[str, float]]:
    """Rows of a training ``log.csv`` (numbers; empty cells left out); [] when absent."""
    if not Path(path).is_file():
        return []
    rows: list[dict[str, float]] = []
    check_limit("text_bytes", Path(path).stat().st_size, what=str(path))
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            if reader.fieldnames is None or "epoch" not in reader.fieldnames:
                raise C2NPInputError(f"{path}: not a training log (no 'epoch' column in the header)")
            unknown = [c for c in reader.fieldnames if c not in columns]
            if unknown:
                raise C2NPInputError(f"{path}: unknown log columns {unknown}")
            for row in reader:
                try:
                    rows.append({k: float(v) for k, v in row.items() if v not in ("", None)})
                except (ValueError, TypeError) as exc:
                    raise C2NPInputError(f"{path}: line {reader.line_num}: not a number ({exc})") from exc
                if "epoch" not in rows[-1]:
                    raise C2NPInputError(f"{path}: line {reader.line_num}: no epoch")
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise C2NPInputError(f"{path}: cannot read the training log ({exc})") from exc
    return rows
