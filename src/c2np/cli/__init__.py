"""The ``c2np`` command line: a thin Typer + Rich shell over the library.

Each command group lives in its own module with a ``register(app)`` function; the app is
assembled in :func:`build_app` (not at import time). Exit codes: 0 success, 1 a check
failed or no answer exists (``verify`` found a mismatch, ``identify`` found no lattice), 2 bad
input, a limit exceeded or an environment problem (docs/reference/limits.md).
"""

from __future__ import annotations

import importlib
from typing import Optional

import typer

# Command modules, each exposing register(app: typer.Typer) -> None.
_COMMAND_MODULES: tuple[str, ...] = (
    "c2np.cli.dataset",
    "c2np.cli.exports",
    "c2np.cli.benchmark",
    "c2np.cli.evaluate",
    "c2np.cli.identify",
    "c2np.cli.models",
    "c2np.cli.catalog",
    "c2np.cli.report",
    "c2np.cli.submissions",
)


def build_app() -> typer.Typer:
    """Assemble the Typer application from the command modules."""
    app = typer.Typer(name="c2np", no_args_is_help=True, add_completion=False,
                      help="Crystal-to-Nanoparticle benchmark: carve particles, build datasets, "
                           "evaluate models, identify crystals.",
                      pretty_exceptions_enable=False)

    @app.callback()
    def _root(
        limit: list[str] = typer.Option(
            [], "--limit", metavar="NAME=VALUE",
            help="Raise (or lower) a size limit for this run, e.g. --limit atoms_per_particle=5e6; "
                 "repeatable. Names, defaults and units: docs/reference/limits.md."),
        threads: Optional[int] = typer.Option(
            None, "--threads", min=1,
            help="Intra-op threads per process (PyTorch, BLAS). Default: the available cores divided by the "
                 "worker processes, never more threads than cores; C2NP_THREADS or OMP_NUM_THREADS also set it."),
        version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                     help="Print the c2np version and exit."),
    ) -> None:
        """Crystal-to-Nanoparticle benchmark."""
        if limit:
            _apply_limits(limit)
        _apply_threads(threads)

    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(app)
    return app


def _print_version(value: bool) -> None:
    if value:
        from c2np.version import __version__

        typer.echo(f"c2np {__version__}")
        raise typer.Exit(0)


def _apply_threads(threads: int | None) -> None:
    """The thread policy of :mod:`c2np.threads` for this process (and, per worker, in pools)."""
    from c2np.cli._common import fail
    from c2np.errors import C2NPInputError
    from c2np.threads import ENV_VAR, use_threads

    try:
        n = use_threads(1, threads=threads)
    except C2NPInputError as exc:
        fail(str(exc))
    if threads is not None:
        import os

        os.environ[ENV_VAR] = str(n)  # worker pools follow an explicit --threads too


def _apply_limits(items: list[str]) -> None:
    """Merge ``--limit`` values into ``C2NP_LIMITS`` (so worker processes see them too)."""
    import os

    from c2np.cli._common import fail
    from c2np.errors import C2NPInputError
    from c2np.limits import ENV_VAR, parse_overrides

    try:
        merged = {**parse_overrides(os.environ.get(ENV_VAR, "")),
                  **parse_overrides(",".join(items), source="--limit")}
    except C2NPInputError as exc:
        fail(str(exc))
    os.environ[ENV_VAR] = ",".join(f"{k}={v!r}" for k, v in merged.items())


def main() -> None:
    """Console-script entry point."""
    build_app()()
