"""The solver over many particle files, through the executor seam (``c2np identify A B ...``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from c2np.errors import C2NPInputError, C2NPNoAnswerError
from c2np.executor import Executor, LocalExecutor

__all__ = ["FileOutcome", "solve_files"]


@dataclass(frozen=True)
class FileOutcome:
    """The solver on one file: ``result`` (:meth:`SolverResult.to_dict`, with the file) or
    ``error`` with its ``kind`` ("no answer": exit 1, "bad input": exit 2)."""

    file: str
    result: dict[str, Any] | None = None
    error: str | None = None
    kind: str | None = None

    @property
    def exit_code(self) -> int:
        """0 identified, 1 no answer, 2 bad input."""
        return 0 if self.error is None else (1 if self.kind == "no answer" else 2)


def _solve_file(_: Any, item: tuple[str, int]) -> FileOutcome:
    """Worker side: read the particle (``item``: path, ranked answers wanted) and solve it;
    input errors are the file's outcome."""
    from c2np.particle_io import read_particle
    from c2np.solver.pipeline import solve_particle

    path, top_k = item
    try:
        result = solve_particle(read_particle(path), top_k=top_k)
    except C2NPInputError as exc:
        kind = "no answer" if isinstance(exc, C2NPNoAnswerError) else "bad input"
        return FileOutcome(path, error=f"{path}: {exc}", kind=kind)
    data = result.to_dict()
    data["file"] = path
    return FileOutcome(path, result=data)


def solve_files(paths: Sequence[str | os.PathLike[str]], *, executor: Executor | None = None,
                chunk: int = 1, top_k: int = 1) -> list[FileOutcome]:
    """The solver (default settings) on every file, in the order given; ``executor``
    (:mod:`c2np.executor`; default: this process) runs them, ``chunk`` files per task; ``top_k``
    ranked answers per file (``candidates`` in each result). A file
    that is unreadable or has no answer is its outcome, never an exception."""
    ex = executor if executor is not None else LocalExecutor(1)
    out: list[FileOutcome] = []
    for part in ex.map(_solve_file, [(str(p), int(top_k)) for p in paths], chunk=chunk):
        out.extend(part)
    return out
