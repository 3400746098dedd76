"""``c2np verify-export``: read a Parquet export back and recompute its fingerprint."""

from __future__ import annotations

from pathlib import Path

import typer

from c2np.cli._common import EXIT_CHECK_FAILED, console, esc, handle_errors, print_json


def register(app: typer.Typer) -> None:
    """Add ``verify-export`` to ``app``."""
    app.command("verify-export")(verify_export_cmd)


@handle_errors
def verify_export_cmd(
    folder: Path = typer.Argument(..., help="Export folder written by c2np export --format parquet."),
    json_out: bool = typer.Option(False, "--json", help="Print {ok, fingerprint, recomputed, ...} as JSON."),
) -> None:
    """Read a Parquet export, re-carve its base particles from its cells and recipes, and
    recompute the dataset fingerprint. Exit 0 when everything matches, 1 when anything differs,
    2 when a file is missing or damaged."""
    from c2np.parquet_export import read_parquet_export

    exp = read_parquet_export(folder)
    report = exp.check()
    if json_out:
        print_json({"folder": str(folder), "ok": report.ok, "fingerprint": report.fingerprint_recorded,
                    "recomputed": report.fingerprint_recomputed, "problems": list(report.problems),
                    "protocol": exp.recipes.protocol, "n_samples": len(exp.recipes), "n_materials": len(exp.cells)})
    elif report.ok:
        console().print(f"[green]intact[/]: {esc(folder)} (fingerprint {exp.fingerprint[:16]}…, "
                        f"{len(exp.recipes)} samples, {len(exp.cells)} materials)", highlight=False)
    else:
        con = console()
        con.print(f"[red]mismatch[/]: {esc(folder)}", highlight=False)
        for line in report.problems:
            con.print(f"[red]-[/] {esc(line)}", highlight=False)
    if not report.ok:
        raise typer.Exit(EXIT_CHECK_FAILED)
