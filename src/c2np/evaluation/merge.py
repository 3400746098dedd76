"""Merge the partial results of ``--shard I/N`` runs into the results of one run.

The parts must all belong to the same run (task, model, split, subset, predictions hash,
tolerances, bootstrap settings, dataset fingerprint, evaluated sample ids) and cover
shards 0 .. N−1 exactly once; a missing, repeated or foreign part is bad input. The
merged document is assembled by the same code as a one-run result, from the same scores
in the same row order, so its metrics and intervals are those of one run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from c2np.errors import C2NPInputError
from c2np.evaluation.harness import RowInfo, assemble_forward
from c2np.evaluation.results import Results, _check_category
from c2np.evaluation.shards import PartialResults, check_shard_set, ids_sha256, shard_positions
from c2np.limits import check as check_limit
from c2np.terminal import printable

__all__ = ["merge_results"]


def merge_results(paths: Sequence[str | os.PathLike[str]]) -> Results:
    """Results of one run from the partial files of all its shards (see module doc)."""
    if not paths:
        raise C2NPInputError("merge-results: no partial results files given")
    parts = [(str(p), PartialResults.read(p)) for p in paths]
    ref = parts[0][1].data
    count = check_shard_set([(p, part.data) for p, part in parts],
                            keys=("run", "n_rows", "sample_ids_sha256", "dataset"), what="merge-results")
    first = printable(parts[0][0])
    if ref["run"]["task"] != "forward":
        raise C2NPInputError("merge-results: only task-1 (forward) parts can be merged")
    check_limit("bootstrap", ref["run"]["n_resamples"], what=f"merge-results: {first}: run.n_resamples")
    category = ref["run"].get("category")
    if isinstance(category, dict):
        _check_category(category, Path(first))
    n_rows = int(ref["n_rows"])
    held = sum(len(part.data["samples"]) for _, part in parts)
    if held != n_rows:  # before anything of size n_rows is allocated
        raise C2NPInputError(f"merge-results: the parts hold {held:,} samples, but their run has n_rows = {n_rows:,}")
    records: list = [None] * n_rows
    seconds = 0.0
    for path, part in parts:
        i = int(part.data["shard"]["index"])
        if len(part.data["samples"]) != len(range(i, n_rows, count)):
            raise C2NPInputError(f"merge-results: {printable(path)}: its samples are not those of shard {i}/{count}")
        expected = shard_positions(n_rows, i, count).tolist()
        got = [k for k, _, _ in part.scores()]
        if got != expected:
            raise C2NPInputError(f"merge-results: {printable(path)}: its samples are not those of shard {i}/{count}")
        for k, rec, sc in part.scores():
            records[k] = (rec, sc)
        seconds += float(part.data.get("seconds", 0.0))
    ds = ref["dataset"]
    info = RowInfo([r["sample_id"] for r, _ in records], [r["material"] for r, _ in records],
                   [int(r["radius_angstrom"]) for r, _ in records], [r["split"] for r, _ in records],
                   ds["protocol"], ds["fingerprint"], int(ds["n_materials"]))
    if ids_sha256(info.sample_ids) != ref["sample_ids_sha256"]:
        raise C2NPInputError("merge-results: the parts' sample ids do not match the run's")
    return assemble_forward(ref["run"], info, [sc for _, sc in records], seconds=seconds)
