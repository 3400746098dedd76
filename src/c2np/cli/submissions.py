"""``c2np submission check`` (is a submission folder valid?), ``c2np submission schema``
(the JSON Schema of model.yml) and ``c2np leaderboard``
(score every submission with the harness and build the report site)."""

from __future__ import annotations

from pathlib import Path

import typer

from c2np.cli._common import EXIT_BAD_INPUT, console, err_console, handle_errors, print_json, resolve_workers


def register(app: typer.Typer) -> None:
    """Add ``submission check``, ``submission schema`` and ``leaderboard`` to ``app``."""
    sub = typer.Typer(name="submission", no_args_is_help=True, add_completion=False,
                      help="Submission folders: model.yml + prediction files (docs/reference/submissions.md).")
    sub.command("check")(check_cmd)
    sub.command("schema")(schema_cmd)
    app.add_typer(sub, name="submission")
    app.command("leaderboard")(leaderboard_cmd)


@handle_errors
def check_cmd(
    folder: Path = typer.Argument(..., help="Submission folder (<model-id>/ with model.yml)."),
    store: Path = typer.Option(..., "--store", help="Dataset store the submission is scored on."),
    json_out: bool = typer.Option(False, "--json", help="Print {valid, problems} as JSON."),
) -> None:
    """Check a submission: schema, fingerprint, every file readable, every expected sample id
    present. Exit 0 when valid, 2 when any problem is found (each one named)."""
    from rich.markup import escape

    from c2np.store import DatasetStore
    from c2np.submissions import check_submission

    _, problems = check_submission(folder, DatasetStore.open(store))
    if json_out:
        print_json({"folder": str(folder), "valid": not problems,
                    "problems": [{"path": p.path, "place": p.place, "message": p.message} for p in problems]})
    else:
        err = err_console()
        for p in problems:
            err.print(f"[bold red]problem:[/] {escape(str(p))}", highlight=False, soft_wrap=True)
        if not problems:
            console().print(f"[green]valid[/]: {escape(str(folder))}", highlight=False)
        else:
            err.print(f"{len(problems)} problem(s) in {escape(str(folder))}", highlight=False)
    if problems:
        raise typer.Exit(EXIT_BAD_INPUT)


@handle_errors
def schema_cmd() -> None:
    """Print the JSON Schema of model.yml (Draft 2020-12; the file shipped in the package)."""
    import sys

    from c2np.submissions import packaged_model_schema

    sys.stdout.write(packaged_model_schema())


@handle_errors
def leaderboard_cmd(
    submissions: Path = typer.Argument(..., help="Folder of submission folders."),
    store: Path = typer.Option(..., "--store", help="Dataset store to score on."),
    out: Path = typer.Option(..., "-o", "--out", help="Site folder: index.html, results/, leaderboard.md."),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples per interval."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    workers: int = typer.Option(0, "--workers", help="Processes scoring task-1 samples (0: one per CPU)."),
    title: str = typer.Option("C2NP leaderboard", "--title", help="Title of the main page."),
    per_group: int = typer.Option(8, "--per-group", help="Rotations per (material, R) of the eval rows "
                                  "every submission must cover (model.yml rotations_per_material_radius; "
                                  "default: the harness's 8)."),
    json_out: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """Check and score every submission with the evaluation harness; write the results, the
    leaderboard and the offline report site into OUT."""
    from rich.markup import escape

    from c2np.leaderboard import SubmissionProblems, build_leaderboard

    log = (lambda m: None) if json_out else (lambda m: err_console().print(f"[dim]·[/] {escape(m)}", highlight=False))
    try:
        s = build_leaderboard(submissions, store, results_dir=out / "results", leaderboard_dir=out, site_dir=out,
                              n_resamples=bootstrap, seed=seed, workers=resolve_workers(workers),
                              progress=not json_out, log=log, title=title, per_group=per_group)
    except SubmissionProblems as exc:
        if json_out:
            print_json({"valid": False, "problems": [{"path": p.path, "place": p.place, "message": p.message}
                                                      for p in exc.problems]})
        else:
            for p in exc.problems:
                err_console().print(f"[bold red]problem:[/] {escape(str(p))}", highlight=False, soft_wrap=True)
            err_console().print(f"{len(exc.problems)} problem(s); nothing was scored", highlight=False)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    if json_out:
        print_json({"submissions": [str(p) for p in s.submissions], "results": [str(p) for p in s.results],
                    "leaderboard_md": str(s.leaderboard_md), "report": str(s.report_index),
                    "notes": list(s.notes), "seconds": round(s.seconds, 2)})
        return
    con = console()
    for note in s.notes:
        con.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
    con.print(f"{len(s.submissions)} submissions, {len(s.results)} results; leaderboard "
              f"{escape(str(s.leaderboard_md))}; report {escape(str(s.report_index))} ({s.seconds:.0f} s)",
              highlight=False)
