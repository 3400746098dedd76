"""Readers of the files in a model folder (a training run folder, a crystal generator folder,
a generator pool folder) that fail with one clear error naming the file.

Every file is first checked to be a regular file inside the folder the user handed over
(:func:`member`; a FIFO, a device or a link leading out is refused before it is opened).
JSON files go through the guarded reader (:mod:`c2np.structured`: size, depth, integers,
finite numbers, then a schema of :mod:`c2np.models.schemas` naming the field). Sizes a folder
declares are checked against :mod:`c2np.limits` before anything of their size is allocated:
the tensors of a safetensors header (:func:`check_weights_header`), the parameters of the
network a config builds (:func:`check_model_size`, counted on PyTorch's ``meta`` device) and
the size of a ``torch.save`` file. A damaged folder (truncated or foreign safetensors, weights
that do not fit the config, a malformed ``state.json`` or ``log.csv``, a pickle in
``optim.pt``) raises :class:`~c2np.errors.C2NPInputError`, never a traceback from torch,
safetensors or json.
"""

from __future__ import annotations

import csv
import io
import math
import os
import struct
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from c2np.errors import C2NPInputError
from c2np.fileio import read_bytes_bounded, regular_file_in
from c2np.limits import check as check_limit
from c2np.terminal import clipped, printable, shortened

__all__ = ["member", "read_json", "read_weights", "check_weights_header", "check_model_size", "load_weights_into",
           "read_torch", "read_log", "SAFETENSORS_ITEM_BYTES", "MAX_HEADER_BYTES"]

#: Bytes per item of each safetensors dtype.
SAFETENSORS_ITEM_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
                          "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
#: Largest safetensors header (the library's own bound).
MAX_HEADER_BYTES = 100_000_000

_HEADER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"__metadata__": {"type": "object", "additionalProperties": {"type": "string"}}},
    "additionalProperties": {
        "type": "object", "required": ["dtype", "shape", "data_offsets"],
        "properties": {"dtype": {"enum": sorted(SAFETENSORS_ITEM_BYTES)},
                       "shape": {"type": "array", "maxItems": 16, "items": {"type": "integer", "minimum": 0}},
                       "data_offsets": {"type": "array", "minItems": 2, "maxItems": 2,
                                        "items": {"type": "integer", "minimum": 0}}}},
}


def member(folder: str | os.PathLike[str], path: str | os.PathLike[str], *, what: str) -> Path:
    """``path``, checked to be a regular file inside ``folder`` before it is opened
    (:func:`c2np.fileio.regular_file_in`); missing: :class:`C2NPInputError` "missing {what}"."""
    try:
        return regular_file_in(folder, path, what=what)
    except FileNotFoundError:
        raise C2NPInputError(f"{printable(path)}: missing {what}") from None
    except OSError as exc:
        raise C2NPInputError(f"{printable(path)}: cannot read the {what} ({exc.strerror or exc})") from None


def read_json(path: Path, *, what: str, keys: tuple[str, ...] = (), schema: Mapping[str, Any] | None = None,
              folder: str | os.PathLike[str] | None = None, finite: bool = True) -> dict[str, Any]:
    """The JSON object in ``path`` (a regular file inside ``folder``, default its own folder)
    holding at least ``keys``, read by the guarded reader and checked against ``schema``.
    ``finite=False`` lets NaN through (files c2np writes with a metric that failed)."""
    from c2np.structured import read_json as guarded

    p = member(folder if folder is not None else Path(path).parent, path, what=what)
    data = guarded(p, what=f"the {what}", finite=finite)
    if not isinstance(data, dict):
        raise C2NPInputError(f"{printable(p)}: the {what} is not a JSON object")
    missing = [k for k in keys if k not in data]
    if missing:
        raise C2NPInputError(f"{printable(p)}: the {what} lacks {', '.join(missing)}")
    if schema is not None:
        from c2np.structured import validate

        validate(data, schema, source=printable(p))
    return data


def check_weights_header(path: str | os.PathLike[str]) -> int:
    """Read and check the header of the safetensors file ``path`` before its tensors are:
    every tensor has a known dtype, sizes >= 0 and data offsets that match its shape and lie
    inside the file; their total (bytes) must be within the limit ``weights_bytes``. Returns
    that total."""
    p = Path(path)
    with open(p, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(8)
        if len(head) < 8:
            raise C2NPInputError(f"{printable(p)}: damaged or foreign weights file (shorter than a header)")
        (n,) = struct.unpack("<Q", head)
        if n > min(MAX_HEADER_BYTES, size - 8):
            raise C2NPInputError(f"{printable(p)}: damaged or foreign weights file (a header of {n:,} bytes in a "
                                 f"file of {size:,})")
        text = fh.read(n)
    from c2np.structured import parse_json, validate

    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        raise C2NPInputError(f"{printable(p)}: damaged or foreign weights file (its header is not UTF-8)") from None
    header = parse_json(decoded, source=f"{printable(p)}: damaged or foreign weights file:", what="its header")
    if not isinstance(header, dict):
        raise C2NPInputError(f"{printable(p)}: damaged or foreign weights file (its header is not an object)")
    validate(header, _HEADER_SCHEMA, source=f"{printable(p)}: damaged or foreign weights file: header")
    data_bytes = size - 8 - n
    total = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        nbytes = math.prod(entry["shape"]) * SAFETENSORS_ITEM_BYTES[entry["dtype"]]
        begin, end = entry["data_offsets"]
        if end - begin != nbytes or end > data_bytes:
            raise C2NPInputError(f"{printable(p)}: damaged or foreign weights file: header: {shortened(name, 60)}: "
                                 f"shape {shortened(entry['shape'])} "
                                 f"({nbytes:,} bytes) does not match its data offsets {begin:,}..{end:,} "
                                 f"(data of {data_bytes:,} bytes)")
        total += nbytes
        check_limit("weights_bytes", total, what=f"{printable(p)}: header")
    return total


def read_weights(path: Path, *, device: str = "cpu", folder: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Tensors of a ``.safetensors`` file (never a pickle), placed on ``device``; the file is
    a regular file inside ``folder`` (default its own folder) whose header passes
    :func:`check_weights_header`."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    p = member(folder if folder is not None else Path(path).parent, path, what="model weights (checkpoint)")
    check_weights_header(p)
    try:
        return load_file(str(p), device=device)
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise C2NPInputError(f"{printable(p)}: damaged or foreign weights file ({type(exc).__name__}: "
                             f"{clipped(str(exc).splitlines()[0] if str(exc) else '', 200)})") from None


def check_model_size(build: Callable[[], Any], *, source: str) -> None:
    """Build the network ``build()`` makes on PyTorch's ``meta`` device (no memory for its
    tensors) and check its parameters and buffers against the limit ``weights_bytes``, before
    the real one is allocated. A config the network cannot be built from (e.g. ``hidden`` not
    a multiple of ``heads``) is one error naming ``source``."""
    import torch

    try:
        with torch.device("meta"):
            net = build()
    except C2NPInputError as exc:
        raise C2NPInputError(f"{source}: {exc}") from None
    except (AssertionError, ArithmeticError, ValueError, RuntimeError, TypeError, IndexError) as exc:
        raise C2NPInputError(f"{source}: no network can be built from this config ({type(exc).__name__}: "
                             f"{clipped(str(exc).splitlines()[0] if str(exc) else '', 200)})") from None
    tensors = [*net.parameters(), *net.buffers()]
    total = sum(t.numel() * t.element_size() for t in tensors)
    check_limit("weights_bytes", total, what=f"{source}: the network it declares")


def load_weights_into(model: Any, tensors: dict[str, Any], *, source: Path) -> None:
    """``model.load_state_dict(tensors, strict=True)`` with an error naming ``source`` and
    the first mismatching tensors when the weights do not fit the model's config."""
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        detail = "; ".join(lines[1:4]) if len(lines) > 1 else (lines[0] if lines else "")
        raise C2NPInputError(f"{printable(source)}: the weights do not fit the model built from config.json "
                             f"({clipped(detail, 400)})") from exc


def read_torch(path: Path, *, what: str, folder: str | os.PathLike[str] | None = None) -> Any:
    """A tensor file saved by ``torch.save``, read with ``weights_only=True`` (a pickle of
    arbitrary objects is refused, not executed); a regular file inside ``folder`` (default
    its own folder) of at most ``weights_bytes``."""
    import pickle

    import torch

    p = member(folder if folder is not None else Path(path).parent, path, what=what)
    check_limit("weights_bytes", p.stat().st_size, what=printable(p))
    try:
        return torch.load(p, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, AttributeError,
            TypeError, KeyError, IndexError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise C2NPInputError(f"{printable(p)}: not a loadable {what} (only plain tensors are read; "
                             f"{clipped(first, 200)})") from None


def read_log(path: Path, *, columns: tuple[str, ...] | None,
             folder: str | os.PathLike[str] | None = None) -> list[dict[str, float]]:
    """Rows of a training ``log.csv`` (numbers; empty cells left out; ``columns``: the known
    columns, None: any); [] when absent. A regular file inside ``folder`` (default its own
    folder) within ``text_bytes``; ``epoch`` and ``step`` must be whole numbers >= 0."""
    if not os.path.lexists(path):
        return []
    p = member(folder if folder is not None else Path(path).parent, path, what="training log")
    try:
        text = read_bytes_bounded(p, limit="text_bytes", regular_only=True).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise C2NPInputError(f"{printable(p)}: the training log is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise C2NPInputError(f"{printable(p)}: cannot read the training log ({exc.strerror or exc})") from None
    rows: list[dict[str, float]] = []
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        if reader.fieldnames is None or "epoch" not in reader.fieldnames:
            raise C2NPInputError(f"{printable(p)}: not a training log (no 'epoch' column in the header)")
        unknown = [c for c in reader.fieldnames if columns is not None and c not in columns]
        if unknown:
            shown = ", ".join(shortened(c, 40) for c in unknown[:5])
            raise C2NPInputError(f"{printable(p)}: unknown log columns {shown}"
                                 + (f" and {len(unknown) - 5:,} more" if len(unknown) > 5 else ""))
        for row in reader:
            values: dict[str, float] = {}
            for k, v in row.items():
                if not k or v in ("", None):
                    continue
                try:
                    if not isinstance(v, str) or len(v) > 100:
                        raise ValueError(v)
                    values[k] = float(v)
                except ValueError:
                    raise C2NPInputError(f"{printable(p)}: line {reader.line_num}: {clipped(k, 40)}: "
                                         f"{shortened(v)} is not a number") from None
            for k in ("epoch", "step"):
                x = values.get(k)
                if k == "epoch" and x is None:
                    raise C2NPInputError(f"{printable(p)}: line {reader.line_num}: no epoch")
                if x is not None and not (math.isfinite(x) and x >= 0 and x == int(x) and x <= 2**62):
                    raise C2NPInputError(f"{printable(p)}: line {reader.line_num}: {k}: {shortened(x)} is not a "
                                         "whole number >= 0")
            rows.append(values)
    except csv.Error as exc:
        raise C2NPInputError(f"{printable(p)}: cannot read the training log ({clipped(str(exc), 200)})") from None
    return rows
