"""Shared CLI plumbing: error reporting with exit codes, JSON output, consoles."""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from c2np.errors import C2NPError, C2NPInputError, C2NPNoAnswerError
from c2np.executor import available_cpus
from c2np.fileio import output_folder
from c2np.terminal import clipped, printable, shortened

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

#: Longest error line printed (its start and end are kept).
MAX_ERROR_CHARS = 2000


def safe_streams() -> None:
    """Let stdout and stderr write any text: a character the stream cannot encode (a path's
    non-UTF-8 byte, held as a lone surrogate) is written as an escape, never
    ``UnicodeEncodeError``."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


def console() -> Console:
    """Console for human output (stdout); wide enough for the leaderboard when piped."""
    safe_streams()
    return Console(emoji=False) if sys.stdout.isatty() else Console(width=160, emoji=False)


def err_console() -> Console:
    """Console for errors and progress (stderr)."""
    safe_streams()
    return Console(stderr=True, emoji=False)  # ':x:' in a path stays ':x:'


def esc(value: object) -> str:
    """``value`` as text that Rich prints literally and a terminal shows as it is: Rich markup
    (``[``) escaped, control characters (ESC, newline, C1) and undecodable bytes written as
    visible escapes (:func:`c2np.terminal.printable`)."""
    return escape(printable(value))


def fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    """Print one clear error line to stderr and exit with ``code``. ``message`` is shown as
    plain text (never read as Rich markup: paths may hold ``[`` or ``:x:``), on one line (a
    newline or ESC in a name is shown as an escape)."""
    text = printable(message)
    if len(text) > MAX_ERROR_CHARS:  # a message is one line, never a file's worth
        half = MAX_ERROR_CHARS // 2
        text = f"{text[:half]} … ({len(text) - 2 * half:,} characters left out) … {text[-half:]}"
    err_console().print(f"[bold red]error:[/] {escape(text)}", highlight=False, soft_wrap=True,
                        emoji=False)
    raise typer.Exit(code)


def interrupted() -> None:
    """Ctrl-C: one line, then end the process at once with exit code 130. Outputs were already
    left as they were (temporary files are removed as the interrupt unwinds); exit handlers are
    skipped so that none can wait on a worker pool."""
    err_console().print("[bold red]error:[/] interrupted", highlight=False, soft_wrap=True)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(EXIT_INTERRUPTED)


def os_error_message(exc: OSError) -> str:
    """One line for an operating-system error: the file(s) and what went wrong, with a hint
    for the environment problems a user can fix (full disk, read-only folder)."""
    names = [str(n) for n in (exc.filename, getattr(exc, "filename2", None)) if n]
    hint = {errno.ENOSPC: " (the disk is full)", errno.EDQUOT: " (disk quota exceeded)",
            errno.EROFS: " (read-only file system)", errno.EACCES: " (permission denied)",
            errno.ENOTDIR: " (a part of the path is a file, not a folder)"}.get(exc.errno or -1, "")
    what = exc.strerror or str(exc)
    if hint.strip(" ()").lower() in what.lower():
        hint = ""
    return (f"{' -> '.join(names)}: {what}" if names else what) + hint


#: the install command of each optional top-level module a command may need
OPTIONAL_MODULES: dict[str, str] = {
    "torch": "pip install torch==2.13.0 && pip install 'c2np[torch]'",
    "safetensors": "pip install torch==2.13.0 && pip install 'c2np[torch]'",
    "dask": "pip install 'c2np[dask]'",
    "distributed": "pip install 'c2np[dask]'",
    "pyarrow": "pip install 'c2np[export]'",
    "pandas": "pip install 'c2np[export]'",
    "datasets": "pip install 'c2np[export]'",
    "torch_geometric": "pip install 'c2np[pyg]'",
}


def missing_module_message(exc: ModuleNotFoundError) -> str:
    """One line for a missing module: the optional extra that provides it, or (any other
    module) a broken installation."""
    top = (exc.name or "").split(".")[0]
    if top in OPTIONAL_MODULES:
        return f"this command needs the optional package {top!r}: {OPTIONAL_MODULES[top]}"
    return f"missing Python module {exc.name!r}: the installation is incomplete (reinstall c2np)"


def handle_errors(func: F) -> F:
    """Decorator mapping every error to one line on stderr and an exit code, never a
    traceback: :class:`C2NPNoAnswerError` and other :class:`C2NPError` -> 1; bad input,
    limits, file and environment errors (full disk, read-only folder, a missing optional
    package), memory -> 2. Set
    ``C2NP_DEBUG=1`` to see the traceback of an unexpected error."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = kwargs.get("out")
        guard = output_folder(out) if isinstance(out, (str, os.PathLike)) else contextlib.nullcontext()
        try:
            with guard:  # nothing below an output folder is written through a link
                return func(*args, **kwargs)
        except typer.Exit:
            raise
        except C2NPNoAnswerError as exc:
            fail(str(exc), EXIT_CHECK_FAILED)
        except C2NPInputError as exc:
            fail(str(exc), EXIT_BAD_INPUT)
        except C2NPError as exc:
            fail(str(exc), EXIT_CHECK_FAILED)
        except OSError as exc:
            fail(os_error_message(exc), EXIT_BAD_INPUT)
        except MemoryError:
            fail("out of memory; lower the sizes (c2np --limit ..., see docs/reference/limits.md)", EXIT_BAD_INPUT)
        except KeyboardInterrupt:
            interrupted()
        except ModuleNotFoundError as exc:   # an optional dependency this command needs
            fail(missing_module_message(exc), EXIT_BAD_INPUT)
        except Exception as exc:  # a bug: still one line, never a traceback
            if os.environ.get("C2NP_DEBUG"):
                raise
            fail(f"unexpected {type(exc).__name__}: {clipped(exc, 300)} (a bug in c2np; rerun with C2NP_DEBUG=1 "
                 "for the traceback and report it)", EXIT_BAD_INPUT)

    return wrapper  # type: ignore[return-value]


def resolve_workers(workers: int) -> int:
    """A ``--workers`` value as a process count: 0 means one per available CPU; negative
    values are bad input."""
    from c2np.limits import check

    if workers < 0:
        raise C2NPInputError(f"--workers must be >= 0 (0: one per available CPU), got {workers}")
    check("workers", workers, what="--workers")
    return workers or available_cpus()


#: Largest ``--seed`` (NumPy and PyTorch take any seed in 0 .. 2**63 - 1).
MAX_SEED = 2**63 - 1


def check_seed(seed: int, *, flag: str = "--seed") -> int:
    """``seed`` when it is 0 .. :data:`MAX_SEED`; anything else is bad input (one line)."""
    if not 0 <= seed <= MAX_SEED:
        raise C2NPInputError(f"{flag} must be an integer 0 .. 2**63 - 1, got {shortened(str(seed), 40)}")
    return seed


def print_json(data: Any) -> None:
    """Write one JSON document to stdout."""
    sys.stdout.write(json.dumps(_finite(data), indent=2, sort_keys=False, default=_default,
                                allow_nan=False) + "\n")


def _finite(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by None (JSON has no NaN or infinity)."""
    import math

    import numpy as np

    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, np.ndarray) and obj.dtype.kind == "f":
        return _finite(obj.tolist())
    return obj


def _default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


#: ``--scheduler`` help of every command on the executor seam.
SCHEDULER_HELP = ("Run the parallel part on Dask instead of local processes: local:N (a LocalCluster "
                  "of N workers) or tcp://HOST:PORT (a running scheduler); needs c2np\\[dask]. "
                  "Results do not depend on it.")


def open_executor(workers: int, scheduler: str | None) -> Any:
    """The :class:`c2np.executor.Executor` of ``--workers`` / ``--scheduler``, both checked
    before any work (bad values are bad input)."""
    from c2np.executor import make_executor, parse_scheduler

    parse_scheduler(scheduler)
    return make_executor(resolve_workers(workers), scheduler)
