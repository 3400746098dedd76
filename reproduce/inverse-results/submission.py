"""Turn the held-out answers of ``reproduce/inverse-results/heldout.py --write-predictions`` (one or
more disjoint parts, e.g. the two ``--every 2 --offset 0 / 1`` halves) into a leaderboard
submission folder that covers the held-out split only (``splits: [heldout]``, 1 rotation per
(material, R)), so that the answers scored in docs/ are ranked by ``c2np leaderboard`` beside
the baselines on the same rows (docs/submissions.md).

    python reproduce/inverse-results/submission.py out/strict.h5 diffcsp-inverse \\
        out/s18/held_0,out/s18/held_1 --out submissions/diffcsp-inverse \\
        --name "DiffCSP crystal generator (task 2)" --family DiffCSP \\
        --repository "c2np pretrained/diffcsp-inverse" --training-seconds 5400

Only the clean variant is a leaderboard file (the leaderboard scores the store's particles).
The parts must hold exactly the store's held-out eval rows at 1 rotation per (material, R);
sample ids are written as the store's own ids.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import yaml

from c2np.errors import C2NPInputError
from c2np.fileio import write_text
from c2np.predictions import write_inverse_predictions
from c2np.store import DatasetStore
from c2np.tasks import opaque_sample_id, select_rows
from c2np.version import __version__


def merged_answers(store: DatasetStore, model: str, parts: list[Path]) -> dict[str, tuple[float, ...]]:
    """``{store sample id: 7-tuple}`` over the held-out eval rows (1 rotation per group), from
    the parts' ``<model>__clean.predictions.json`` (opaque ids); overlap or a gap is an error."""
    answers: dict[str, list[float]] = {}
    for part in parts:
        path = part / f"{model}__clean.predictions.json"
        if not path.is_file():
            raise C2NPInputError(f"{path}: no such predictions file (run heldout.py --write-predictions)")
        got = json.loads(path.read_text())
        overlap = set(got) & set(answers)
        if overlap:
            raise C2NPInputError(f"{path}: {len(overlap)} sample(s) also in an earlier part")
        answers.update(got)
    ids = store.recipes.sample_ids()
    rows = select_rows(store.recipes, "heldout", per_group=1)
    want = {opaque_sample_id(store.fingerprint, ids[int(r)]): ids[int(r)] for r in rows}
    if set(answers) != set(want):
        raise C2NPInputError(f"{model}: the parts hold {len(answers)} answers, the held-out eval rows are "
                             f"{len(want)} ({len(set(want) - set(answers))} missing, "
                             f"{len(set(answers) - set(want))} not held-out rows)")
    return {want[k]: tuple(float(x) for x in answers[k]) for k in sorted(want, key=lambda k: want[k])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store")
    ap.add_argument("model", help="model id, as in the parts' file names")
    ap.add_argument("parts", help="comma-separated folders written by heldout.py --write-predictions")
    ap.add_argument("--out", required=True, help="submission folder (its name must be the model id)")
    ap.add_argument("--name", required=True)
    ap.add_argument("--family", required=True)
    ap.add_argument("--kind", default="learned", choices=["learned", "baseline", "carve-based baseline", "other"])
    ap.add_argument("--repository", required=True)
    ap.add_argument("--description", default="")
    ap.add_argument("--training-seconds", type=float, default=0.0)
    ap.add_argument("--inference-seconds", type=float, default=0.0)
    ap.add_argument("--hardware", default="2 CPU cores (x86-64), no GPU; one core per process")
    a = ap.parse_args(argv)
    out = Path(a.out)
    if out.name != a.model:
        print(f"error: --out {out}: the folder's name must be the model id {a.model!r}", file=sys.stderr)
        return 2
    try:
        store = DatasetStore.open(a.store)
        answers = merged_answers(store, a.model, [Path(p) for p in a.parts.split(",") if p])
    except C2NPInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_inverse_predictions(out / "inverse" / "heldout.csv", answers)
    doc = {
        "schema": "c2np.submission/1",
        "model": {"id": a.model, "name": a.name, "version": __version__, "family": a.family, "kind": a.kind,
                  "authors": ["c2np"], "repository": a.repository, "license": "MIT",
                  **({"description": a.description} if a.description else {})},
        "training": {"protocol": store.recipes.protocol, "store_fingerprint": store.fingerprint,
                     "data": "the training materials of the store (the held-out materials never seen)"},
        "hardware": a.hardware,
        "wall_time_seconds": {"training": a.training_seconds, "inference": a.inference_seconds},
        "c2np_version": __version__,
        "date": dt.date.today().isoformat(),
        "tasks": ["inverse"],
        "splits": ["heldout"],
        "rotations_per_material_radius": 1,
    }
    write_text(out / "model.yml", yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    print(f"{out}: {len(answers)} held-out answers")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
