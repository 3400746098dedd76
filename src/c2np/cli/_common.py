"""Shared CLI plumbing: error reporting with exit codes, JSON output, consoles."""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable, TypeVar

import typer
from rich.console import Console

from c2np.errors import C2NPEnvironmentError, C2NPError, C2NPInputError
from c2np.executor import available_cpus

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2


def console() -> Console:
    """Console for human output (stdout); wide enough for the leaderboard when piped."""
    return Console() if sys.stdout.isatty() else Console(width=160)


def err_console() -> Console:
    """Console for errors and progress (stderr)."""
    return Console(stderr=True)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    """Print one clear error line to stderr and exit with ``code``."""
    err_console().print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def handle_errors(func: F) -> F:
    """Decorator: C2NPInputError, C2NPEnvironmentError (and file errors) -> one line on
    stderr, exit 2; any other C2NPError -> exit 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except typer.Exit:
            raise
        except (C2NPInputError, C2NPEnvironmentError) as exc:
            fail(str(exc), EXIT_BAD_INPUT)
        except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
            fail(f"{getattr(exc, 'filename', '') or ''}: {exc.strerror or exc}", EXIT_BAD_INPUT)
        except C2NPError as exc:
            fail(str(exc), EXIT_CHECK_FAILED)

    return wrapper  # type: ignore[return-value]


def resolve_workers(workers: int) -> int:
    """A ``--workers`` value as a process count: 0 means one per available CPU; negative
    values are bad input."""
    if workers < 0:
        raise C2NPInputError(f"--workers must be >= 0 (0: one per available CPU), got {workers}")
    return workers or available_cpus()


def print_json(data: Any) -> None:
    """Write one JSON document to stdout."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=_default) + "\n")


def _default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
