"""The leaderboard, rebuilt from submission folders only: check every submission, score
every prediction file with the evaluation harness, write the results documents, the
Markdown / JSON leaderboard and the report site.

See docs/reference/submissions.md.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from c2np.categories import category_from_mapping
from c2np.errors import C2NPInputError
from c2np.metrics import HEADLINE
from c2np.report import LeaderboardRow, normalise, row_from_results, write_leaderboard
from c2np.sealed import DEV_SPLIT, SEALED_SPLIT, heldout_parts
from c2np.submissions import (
    DEFAULT_SPLITS,
    Problem,
    check_submission,
    find_submissions,
    prediction_file,
    submission_splits,
)

__all__ = ["LeaderboardSummary", "SubmissionProblems", "check_submissions", "build_leaderboard", "scored_splits"]


def scored_splits(split: str, recipes: Any) -> tuple[str, ...]:
    """The splits a submission's ``split`` file is scored on: the held-out answers
    (``heldout``) apart as ``heldout-dev`` and, where the store has sealed test materials,
    ``heldout-test`` (:mod:`c2np.sealed`); any other split as itself."""
    if split != "heldout":
        return (split,)
    parts = heldout_parts(recipes.heldout_materials)
    return (DEV_SPLIT,) * bool(parts.dev) + (SEALED_SPLIT,) * bool(parts.test)


class SubmissionProblems(C2NPInputError):
    """One or more submissions have problems (each listed, one per line)."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{len(problems)} problem(s) in the submissions:\n{lines}")


@dataclass(frozen=True)
class LeaderboardSummary:
    """What :func:`build_leaderboard` wrote.

    Attributes:
        submissions: the submission folders scored.
        results: results documents written (one per model, task and split).
        leaderboard_md, leaderboard_json: the tables.
        report_index: the site's ``index.html``.
        rows: leaderboard rows (normalised).
        documents: the results documents (dicts).
        notes: what the site could not show.
        seconds: wall time.
        extra: the run facts written above the tables (store, fingerprint, ...).
    """

    submissions: tuple[Path, ...]
    results: tuple[Path, ...]
    leaderboard_md: Path
    leaderboard_json: Path
    report_index: Path
    rows: tuple[LeaderboardRow, ...]
    documents: tuple[dict[str, Any], ...]
    notes: tuple[str, ...]
    seconds: float
    extra: Mapping[str, Any] = field(default_factory=dict)


def check_submissions(root: str | os.PathLike[str], store: Any, *, splits: Sequence[str] = DEFAULT_SPLITS,
                      per_group: int | None = None) -> list[tuple[Path, dict[str, Any] | None, list[Problem]]]:
    """``(folder, model.yml, problems)`` of every submission under ``root`` (``per_group``: the
    rotations per (material, R) every ``eval`` submission must cover); no submission at all is
    bad input."""
    folders = find_submissions(root)
    if not folders:
        raise C2NPInputError(f"{root}: no submission folders (sub-folders with a model.yml)")
    return [(f, *check_submission(f, store, splits=splits, per_group=per_group)) for f in folders]


def build_leaderboard(submissions_dir: str | os.PathLike[str], store: Any, *,
                      results_dir: str | os.PathLike[str], leaderboard_dir: str | os.PathLike[str],
                      site_dir: str | os.PathLike[str], tasks: Sequence[str] | None = None,
                      splits: Sequence[str] = DEFAULT_SPLITS,
                      n_resamples: int = 1000, seed: int = 0, workers: int = 1, progress: bool = False,
                      log: Callable[[str], None] | None = None, title: str = "C2NP leaderboard",
                      per_group: int | None = None) -> LeaderboardSummary:
    """Check every submission (any problem raises :class:`SubmissionProblems`), score each
    (task, split) file with the harness (``c2np.tasks.evaluate_task``), write
    ``results_dir/<model>__<task>__<protocol>__<split>.json``, ``leaderboard.md`` / ``.json``
    into ``leaderboard_dir`` and the report site into ``site_dir``. ``store`` is an open
    ``DatasetStore`` (or a path); ``tasks`` restricts what is scored; ``per_group`` is the
    rotations per (material, R) of the ``eval`` rows every submission must cover (default the
    harness's 8), so that every row of a table is scored on the same samples."""
    from c2np.site.builder import build_site
    from c2np.site.sources import models_from_results
    from c2np.store import DatasetStore
    from c2np.tasks import EVAL_ROTATIONS_PER_GROUP, evaluate_task

    t0 = time.perf_counter()
    say = log or (lambda _m: None)
    per_group = EVAL_ROTATIONS_PER_GROUP if per_group is None else int(per_group)
    if per_group < 1:
        raise C2NPInputError(f"--per-group must be >= 1, got {per_group}")
    st: Any = store if hasattr(store, "recipes") else DatasetStore.open(store)
    checked = check_submissions(submissions_dir, st, splits=splits, per_group=per_group)
    problems = [p for _f, _d, ps in checked for p in ps]
    if problems:
        raise SubmissionProblems(problems)
    res_dir = Path(results_dir)
    written: list[Path] = []
    documents: list[dict[str, Any]] = []
    for folder, doc, _ in checked:
        assert doc is not None
        model_id = doc["model"]["id"]
        category = category_from_mapping(doc["model"], where=f"{folder}/model.yml: model")
        subset = doc.get("subset", "eval")
        for task in doc["tasks"]:
            if tasks is not None and task not in tasks:
                continue
            for split in submission_splits(doc, task, st.recipes.protocol, splits):
                path, _ = prediction_file(folder, task, split)
                assert path is not None  # checked above
                for scored in scored_splits(split, st.recipes):
                    say(f"scoring {task} · {scored} · {model_id}")
                    res = evaluate_task(task, st, path, scored, subset, model=model_id, category=category,
                                        seed=seed, n_resamples=n_resamples, progress=progress, workers=workers,
                                        per_group=per_group)
                    written.append(res.write(res_dir / f"{model_id}__{task}__{st.recipes.protocol}__{scored}.json"))
                    documents.append(dict(res.data))
    if not documents:
        raise C2NPInputError(f"{submissions_dir}: no prediction files to score for tasks {list(tasks or [])}")
    rows = normalise([row_from_results(d, p) for d, p in zip(documents, written)])
    extra = {"store": str(st.path), "fingerprint": st.fingerprint, "protocol": st.recipes.protocol,
             "splits": ",".join(dict.fromkeys(str(d["split"]) for d in documents)),
             "rotations_per_material_radius": per_group,
             "submissions": ", ".join(f.name for f, _, _ in checked)}
    paths = write_leaderboard(rows, leaderboard_dir, headline={k: [m.value for m in v] for k, v in HEADLINE.items()},
                              extra=extra)
    site = build_site(models_from_results(documents), site_dir, store=st, title=title, log=say)
    return LeaderboardSummary(tuple(f for f, _, _ in checked), tuple(written), paths["markdown"], paths["json"],
                              site.index, tuple(rows), tuple(documents), site.notes, time.perf_counter() - t0,
                              extra)
