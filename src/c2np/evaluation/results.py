"""The results record: one JSON document per (model, task, protocol, split), with a schema
version and a SHA-256 over its canonical JSON so that an edited file is refused.

Canonical JSON (what the hash covers): the document without the ``content_sha256`` key,
``json.dumps(..., sort_keys=True, separators=(",", ":"), ensure_ascii=False,
allow_nan=False)`` encoded as UTF-8 (the idea of matbench's ``hash_dictionary``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from c2np.errors import C2NPInputError
from c2np.fileio import read_text_bounded, write_text

__all__ = ["RESULTS_SCHEMA", "HASH_KEY", "DATAFRAME_COLUMNS", "Results", "canonical_json", "content_sha256", "versions",
           "to_dataframe"]

#: Schema of the results document. Version 2 added ``content_sha256``; version 3 the model's
#: ``category`` and ``priors`` (:mod:`c2np.categories`; docs/reference/formats.md).
RESULTS_SCHEMA = "c2np.results/3"
HASH_KEY = "content_sha256"


def canonical_json(data: dict[str, Any]) -> str:
    """The canonical JSON text of ``data`` without its :data:`HASH_KEY` entry."""
    body = {k: v for k, v in data.items() if k != HASH_KEY}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_sha256(data: dict[str, Any]) -> str:
    """SHA-256 hex digest of :func:`canonical_json` of ``data``."""
    return hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()


def versions() -> dict[str, str]:
    """Versions of c2np, Python and the libraries that shape the numbers."""
    import importlib.metadata as md

    from c2np.version import __version__

    out = {"c2np": __version__, "python": platform.python_version()}
    for pkg in ("numpy", "scipy", "h5py", "ase", "spglib"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


@dataclass(frozen=True, eq=False)
class Results:
    """Evaluation results of one (model, task, protocol, split).

    Attributes:
        data: the JSON document (schema :data:`RESULTS_SCHEMA`, see docs/reference/formats.md);
            ``data["content_sha256"]`` is set when the record is built.
    """

    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if HASH_KEY not in self.data:
            self.data[HASH_KEY] = content_sha256(self.data)

    @property
    def sha256(self) -> str:
        """The content hash recorded in the document."""
        return str(self.data[HASH_KEY])

    @property
    def overall(self) -> dict[str, dict[str, Any]]:
        """Overall metric summaries ``{metric: {mean, ci95, mean_successes, n, n_failed}}``."""
        return self.data["metrics"]["overall"]

    @property
    def n_samples(self) -> int:
        """Number of evaluated samples."""
        return int(self.data["n_samples"])

    @property
    def n_failed(self) -> int:
        """Number of failed samples."""
        return int(self.data["n_failed"])

    @property
    def failed_samples(self) -> list[dict[str, str]]:
        """[{sample_id, reason}] of every failure."""
        return list(self.data["failed_samples"])

    def is_intact(self) -> bool:
        """True when the recorded hash matches the content."""
        return self.data.get(HASH_KEY) == content_sha256(self.data)

    def to_json(self) -> str:
        """The document as (indented) JSON text."""
        return json.dumps(self.data, indent=1, allow_nan=False, ensure_ascii=False)

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the JSON atomically; refuses a record whose content no longer matches its
        hash (it was changed after it was built)."""
        if not self.is_intact():
            raise C2NPInputError(f"{path}: results content does not match its {HASH_KEY} "
                                 "(the record was changed after it was built)")
        return write_text(path, self.to_json() + "\n")

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Results:
        """Load a results JSON; refuses a file that is not JSON, has another schema, has no
        hash, or whose content no longer matches its hash."""
        p = Path(path)
        try:
            data = json.loads(read_text_bounded(p))
        except C2NPInputError:
            raise  # a limit exceeded: its own message
        except (OSError, ValueError) as exc:
            raise C2NPInputError(f"{p}: not a readable results file ({exc})") from exc
        if not isinstance(data, dict):
            raise C2NPInputError(f"{p}: not a results document (top level is not an object)")
        if data.get("schema") != RESULTS_SCHEMA:
            raise C2NPInputError(f"{p}: schema {data.get('schema')!r}, expected {RESULTS_SCHEMA!r}"
                                 " (re-run c2np evaluate to write a current results file)")
        recorded = data.get(HASH_KEY)
        if not isinstance(recorded, str):
            raise C2NPInputError(f"{p}: no {HASH_KEY}; cannot tell whether the content is intact")
        actual = content_sha256(data)
        if recorded != actual:
            raise C2NPInputError(f"{p}: content does not match its {HASH_KEY} (recorded "
                                 f"{recorded[:12]}…, content {actual[:12]}…): the file was edited "
                                 "or corrupted after it was written")
        _check_category(data, p)
        return cls(data)


def _check_category(data: dict[str, Any], path: Path) -> None:
    """The document's ``category`` / ``priors`` are a valid pair, or ``unstated`` with none."""
    from c2np.categories import UNSTATED, check_category

    if data.get("category") == UNSTATED and not data.get("priors"):
        return
    check_category(data.get("category"), data.get("priors", ()), where=f"{path}: results")


#: columns of :func:`to_dataframe` (``level="overall"``), in order
DATAFRAME_COLUMNS: tuple[str, ...] = (
    "model", "category", "priors", "task", "protocol", "split", "subset", "fingerprint", "n_samples",
    "n_failed", "metric", "unit", "better", "mean", "ci95_low", "ci95_high", "mean_successes", "path")


def _results_files(paths: Any) -> list[Path | Results]:
    if isinstance(paths, (str, os.PathLike, Results)):
        paths = [paths]
    out: list[Path | Results] = []
    for item in paths:
        if isinstance(item, Results):
            out.append(item)
            continue
        p = Path(item)
        if p.is_dir():
            found = sorted(p.rglob("*.json"))
            out.extend(f for f in found if _is_results_file(f))
        else:
            out.append(p)
    return out


def _is_results_file(path: Path) -> bool:
    """A JSON file under a folder is read when it declares the results schema (a folder may
    hold other JSON, e.g. a leaderboard summary)."""
    try:
        head = read_text_bounded(path)
        return f'"schema": "{RESULTS_SCHEMA}"' in head or f'"schema":"{RESULTS_SCHEMA}"' in head
    except (OSError, UnicodeDecodeError, C2NPInputError):
        return False


def to_dataframe(paths: Any, *, level: str = "overall") -> Any:
    """Results as one ``pandas.DataFrame``: ``paths`` is a results file, a folder (its
    results files, recursively), :class:`Results` records, or a list of any of them. Every
    file is read with :meth:`Results.read` (an edited or foreign file is refused).

    ``level="overall"``: one row per (results, metric), columns :data:`DATAFRAME_COLUMNS`
    (``priors`` joined by ``+``; ``ci95_low`` / ``ci95_high`` the 95 % bootstrap interval).
    ``level="samples"``: one row per (results, sample): model, category, task, split,
    sample_id, ok and one column per metric (failed samples hold the failure penalty)."""
    import pandas as pd

    if level not in ("overall", "samples"):
        raise C2NPInputError(f"level must be 'overall' or 'samples', got {level!r}")
    rows: list[dict[str, Any]] = []
    frames = []
    for item in _results_files(paths):
        res, where = (item, None) if isinstance(item, Results) else (Results.read(item), str(item))
        d = res.data
        head = {"model": d.get("model"), "category": d.get("category"), "priors": "+".join(d.get("priors") or []),
                "task": d.get("task"), "protocol": d.get("protocol"), "split": d.get("split"),
                "subset": d.get("subset"), "fingerprint": (d.get("dataset") or {}).get("fingerprint")}
        if level == "samples":
            frame = pd.DataFrame(d["samples"])
            for k, v in reversed(list(head.items())):
                frame.insert(0, k, v)
            frames.append(frame)
            continue
        info = d.get("metric_info", {})
        for metric, summ in res.overall.items():
            ci = summ.get("ci95") or [None, None]
            rows.append({**head, "n_samples": res.n_samples, "n_failed": res.n_failed, "metric": metric,
                         "unit": info.get(metric, {}).get("unit"), "better": info.get(metric, {}).get("better"),
                         "mean": summ.get("mean"), "ci95_low": ci[0], "ci95_high": ci[1],
                         "mean_successes": summ.get("mean_successes"), "path": where})
    if level == "samples":
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return pd.DataFrame(rows, columns=list(DATAFRAME_COLUMNS))
