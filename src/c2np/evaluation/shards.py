"""Shards of one evaluation run, for job arrays: ``--shard I/N`` scores part I of N and
writes a partial results file; :mod:`c2np.evaluation.merge` combines the N parts into the
results of one run (same metrics, same CIs, same fingerprint).

Shard I of N holds the evaluated positions k (rows in sorted order) with ``k % N == I``,
I = 0 .. N−1 (round robin, so every shard sees every radius). A partial file
(``schema: "c2np.partial-results/1"``) records the run (task, model, split, subset,
predictions hash, tolerances, bootstrap settings), the shard, the row count and a hash of
all evaluated sample ids, and per scored sample its id, material, radius, split and scores.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from c2np.errors import C2NPInputError
from c2np.fileio import write_text
from c2np.metrics import Scores
from c2np.sharding import SHARD_ENTRY_SCHEMA, check_shard_set, ids_sha256, parse_shard, shard_positions
from c2np.structured import read_json, validate
from c2np.terminal import printable

__all__ = ["PARTIAL_SCHEMA", "PARTIAL_DOC_SCHEMA", "PartialResults", "parse_shard", "shard_positions",
           "check_shard_set", "ids_sha256"]

PARTIAL_SCHEMA = "c2np.partial-results/1"

#: Most rows of one evaluation run (a store holds at most ``store_bytes`` / 45 recipe rows).
MAX_ROWS = 2**40
_HEX64 = r"^[0-9a-f]{64}$"
_COUNT = {"type": "integer", "minimum": 0, "maximum": MAX_ROWS}
_NAME = {"type": "string", "maxLength": 1000}

#: The schema of a partial results file (:mod:`c2np.structured`): types and ranges of every
#: field the merge reads.
PARTIAL_DOC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["schema", "run", "shard", "n_rows", "sample_ids_sha256", "dataset", "samples"],
    "properties": {
        "schema": {"const": PARTIAL_SCHEMA},
        "run": {
            "type": "object",
            "required": ["task", "model", "split", "subset", "subset_definition", "predictions", "tolerances",
                         "n_resamples", "seed"],
            "properties": {
                "task": {"enum": ["forward", "inverse"]}, "model": _NAME, "split": _NAME, "subset": _NAME,
                "category": {"type": ["object", "string", "null"]},
                "subset_definition": {"type": "object"}, "predictions": {"type": "object"},
                "tolerances": {"type": "object", "properties": {
                    "f1_tolerances_angstrom": {"type": "array", "minItems": 1, "maxItems": 100,
                                               "items": {"type": "number", "exclusiveMinimum": 0}}}},
                "n_resamples": {"type": "integer", "minimum": 0},
                "seed": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
            },
        },
        "shard": SHARD_ENTRY_SCHEMA,
        "n_rows": _COUNT,
        "sample_ids_sha256": {"type": "string", "pattern": _HEX64},
        "dataset": {"type": "object", "required": ["protocol", "fingerprint", "n_materials"],
                    "properties": {"protocol": _NAME, "fingerprint": _NAME, "n_materials": _COUNT}},
        "seconds": {"type": "number", "minimum": 0},
        "samples": {"type": "array", "items": {
            "type": "object",
            "required": ["position", "sample_id", "material", "radius_angstrom", "split", "scores"],
            "properties": {
                "position": _COUNT, "sample_id": _NAME, "material": _NAME, "split": _NAME,
                "radius_angstrom": {"type": "integer", "minimum": 0, "maximum": 1_000_000},
                "scores": {"type": "object", "required": ["ok", "failure_reason", "values", "details"],
                           "properties": {
                               "ok": {"type": "boolean"},
                               "failure_reason": {"type": ["string", "null"], "maxLength": 10_000},
                               "values": {"type": "object", "additionalProperties": {"type": "number"}},
                               "details": {"type": "object", "properties": {
                                   "matched_rmsd_certified": {"type": "boolean"},
                                   "matched_rmsd_lower_bound": {"type": "number"},
                                   "matched_rmsd_gap": {"type": "number"}}}}},
            },
        }},
    },
}


def _scores_to_json(s: Scores) -> dict[str, Any]:
    return {"ok": bool(s.ok), "failure_reason": s.failure_reason,
            "values": {k: float(v) for k, v in s.values.items()},
            "details": {k: (v.item() if isinstance(v, np.generic) else v) for k, v in s.details.items()}}


def _scores_from_json(d: Mapping[str, Any]) -> Scores:
    return Scores(values={k: float(v) for k, v in d["values"].items()}, ok=bool(d["ok"]),
                  failure_reason=d["failure_reason"], details=dict(d["details"]))


@dataclass(frozen=True)
class PartialResults:
    """One shard's scores and the run they belong to (see the module docstring)."""

    data: dict[str, Any]

    @classmethod
    def of(cls, run: Mapping[str, Any], shard: tuple[int, int], n_rows: int, info: Any,
           positions: np.ndarray, scores: Sequence[Scores | None], *, seconds: float
           ) -> PartialResults:
        """``info``: the :class:`~c2np.evaluation.harness.RowInfo` of all evaluated rows."""
        part = info.take(positions)
        samples = []
        for k, sid, mat, rad, spl, sc in zip(positions, part.sample_ids, part.materials,
                                             part.radii_angstrom, part.splits, scores):
            assert sc is not None
            samples.append({"position": int(k), "sample_id": sid, "material": mat,
                            "radius_angstrom": int(rad), "split": spl, "scores": _scores_to_json(sc)})
        return cls({"schema": PARTIAL_SCHEMA, "run": dict(run),
                    "shard": {"index": int(shard[0]), "count": int(shard[1])},
                    "n_rows": int(n_rows), "sample_ids_sha256": ids_sha256(info.sample_ids),
                    "dataset": {"protocol": info.protocol, "fingerprint": info.fingerprint,
                                "n_materials": info.n_materials},
                    "seconds": round(seconds, 3), "samples": samples})

    @property
    def n_failed(self) -> int:
        return sum(not s["scores"]["ok"] for s in self.data["samples"])

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write atomically (JSON)."""
        return write_text(Path(path), json.dumps(self.data, indent=1, allow_nan=False) + "\n")

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> PartialResults:
        """Read a partial results file with the guarded reader (:mod:`c2np.structured`): size,
        depth, numbers, then :data:`PARTIAL_DOC_SCHEMA`; any problem names the file and field."""
        data = read_json(path, what="partial results file")
        if not isinstance(data, dict) or data.get("schema") != PARTIAL_SCHEMA:
            raise C2NPInputError(f"{printable(path)}: not a partial results file (schema {PARTIAL_SCHEMA!r} "
                                 "expected)")
        validate(data, PARTIAL_DOC_SCHEMA, source=printable(path))
        return cls(data)

    def scores(self) -> list[tuple[int, dict[str, Any], Scores]]:
        """(position, sample record, scores) of every sample of this shard."""
        return [(int(s["position"]), s, _scores_from_json(s["scores"])) for s in self.data["samples"]]
