"""``c2np report``: rebuild the offline HTML report from results files, a benchmark /
leaderboard output folder, or a folder of submissions (scored with the harness first)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from c2np.cli._common import console, err_console, esc, handle_errors, print_json
from c2np.errors import C2NPInputError

if TYPE_CHECKING:  # pragma: no cover - annotations only (the builder is imported where it runs)
    from c2np.site.builder import SiteSummary


def register(app: typer.Typer) -> None:
    """Add the report command to ``app``."""
    app.command("report")(report_cmd)


@handle_errors
def report_cmd(
    inputs: list[Path] = typer.Argument(..., help="Results JSON files, a folder of them, a benchmark / "
                                        "leaderboard output folder (its results/ is used), or a folder "
                                        "of submissions (needs --store; scored first)."),
    out: Path = typer.Option(..., "-o", "--out", help="Site folder (index.html is written there)."),
    store: Optional[Path] = typer.Option(None, "--store", help="Dataset store of the results: enables the "
                                         "3D particle viewer (prediction files must be on disk)."),
    title: str = typer.Option("C2NP leaderboard", "--title", help="Title of the main page."),
    json_out: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """Build the self-contained HTML report (open OUT/index.html; no network needed)."""
    from c2np.site.builder import build_site
    from c2np.site.sources import find_results_files, load_results, models_from_results
    from c2np.submissions import find_submissions

    if len(inputs) == 1 and inputs[0].is_dir() and not (inputs[0] / "results").is_dir() \
            and find_submissions(inputs[0]):
        from c2np.cli.submissions import leaderboard_cmd

        if store is None:
            raise C2NPInputError(f"{inputs[0]}: a folder of submissions is scored first; give --store")
        from c2np.submissions import read_model_yml, rotations_per_group
        from c2np.tasks import EVAL_ROTATIONS_PER_GROUP

        declared = {rotations_per_group(doc) for f in find_submissions(inputs[0])
                    if (doc := read_model_yml(f / "model.yml")[0]) is not None and doc.get("subset", "eval") == "eval"}
        # the rows the submissions declare when they agree (else the harness's default, and the check names them)
        return leaderboard_cmd(inputs[0], store=store, out=out, bootstrap=1000, seed=0, workers=0,
                               title=title, json_out=json_out,
                               per_group=declared.pop() if len(declared) == 1 else EVAL_ROTATIONS_PER_GROUP)
    docs = [load_results(p) for p in find_results_files(inputs)]
    opened = None
    if store is not None:
        from c2np.store import DatasetStore

        opened = DatasetStore.open(store)
    log = (lambda m: None) if json_out else (lambda m: err_console().print(f"[dim]·[/] {esc(m)}", highlight=False))
    dirs = [q for p in inputs for q in ((p, p.parent) if p.is_dir() else (p.parent, p.parent.parent))]
    summary = build_site(models_from_results(docs, search_dirs=dirs), out, store=opened, title=title, log=log)
    if json_out:
        print_json(site_summary_json(summary))
        return
    from c2np.cli._common import esc as escape

    con = console()
    for note in summary.notes:
        con.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
    con.print(f"report: {escape(str(summary.index))} ({len(summary.pages)} pages, {len(summary.viewers)} viewers, "
              f"{summary.bytes_total / 1e6:.1f} MB, {summary.seconds:.1f} s)", highlight=False)


def site_summary_json(summary: SiteSummary) -> dict:
    """JSON-ready summary of a built site."""
    return {"index": str(summary.index), "pages": [str(p) for p in summary.pages],
            "viewers": [str(p) for p in summary.viewers], "tables": [str(p) for p in summary.tables],
            "notes": list(summary.notes), "bytes_total": summary.bytes_total,
            "seconds": round(summary.seconds, 2)}
