"""The ``c2np`` command line: a thin Typer + Rich shell over the library.

Each command group lives in its own module with a ``register(app)`` function; the app is
assembled in :func:`build_app` (not at import time). Exit codes: 0 success, 1 a check
failed (e.g. ``verify`` found a mismatch), 2 bad input.
"""

from __future__ import annotations

import importlib

import typer

# Command modules, each exposing register(app: typer.Typer) -> None.
_COMMAND_MODULES: tuple[str, ...] = (
    "c2np.cli.dataset",
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
    def _root() -> None:
        """Crystal-to-Nanoparticle benchmark."""

    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(app)
    return app


def main() -> None:
    """Console-script entry point."""
    build_app()()
