"""``c2np benchmark`` (every baseline and model on disk -> leaderboard + plots) and
``c2np demo`` (the README's main job, end to end on a small subset of the catalog)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from c2np.cli._common import available_cpus, console, err_console, esc, handle_errors, print_json, resolve_workers

if TYPE_CHECKING:  # pragma: no cover - annotations only (the benchmark is imported where it runs)
    from c2np.benchmark import BenchmarkSummary


def register(app: typer.Typer) -> None:
    """Add the benchmark and demo commands to ``app``."""
    app.command("benchmark")(benchmark_cmd)
    app.command("demo")(demo_cmd)


def _split_list(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def _print_leaderboard(summary: BenchmarkSummary) -> None:
    from rich.table import Table

    from c2np.metrics import HEADLINE

    con = console()
    for task, title in (("forward", "Task 1: unit cell + R -> particle"),
                        ("inverse", "Task 2: particle -> lattice + space group")):
        rows = [r for r in summary.rows if r.task == task]
        if not rows:
            continue
        names = [m.value for m in HEADLINE[task][:5]]
        t = Table(title=title, title_justify="left")
        t.add_column("model")
        t.add_column("split")
        t.add_column("n", justify="right")
        t.add_column("failed", justify="right")
        for n in names:
            t.add_column(n, justify="right")
        for r in sorted(rows, key=lambda x: (x.split, x.model)):
            vals = []
            for n in names:
                v = r.metrics.get(n)
                vals.append("–" if v is None else f"{v:.3f}")
            t.add_row(esc(r.model), esc(r.split), str(r.n_samples), str(r.n_failed), *vals)
        con.print(t)


@handle_errors
def benchmark_cmd(
    store: Path = typer.Option(Path("c2np_out/dataset.h5"), "--store", help="Dataset store."),
    out: Path = typer.Option(Path("c2np_out/benchmark"), "-o", "--out", help="Output folder."),
    splits: str = typer.Option("id,ood", "--splits", help="Comma-separated splits."),
    subset: str = typer.Option("eval", "--subset", help="eval (fixed seeded subset) or full."),
    per_group: int = typer.Option(8, "--per-group", help="Rotations per (material, R) of the eval subset "
                                  "(default: the harness's 8); every submission in OUT/submissions must cover "
                                  "the same rows (model.yml rotations_per_material_radius)."),
    tasks: str = typer.Option("forward,inverse", "--tasks", help="forward, inverse or both."),
    forward_models: Optional[str] = typer.Option(None, "--forward-baselines", help="Subset of task-1 baselines."),
    inverse_models: Optional[str] = typer.Option(None, "--inverse-baselines", help="Subset of task-2 baselines."),
    workers: int = typer.Option(0, "--workers", help="Processes scoring task-1 samples "
                                "(0: one per available CPU). Results do not depend on it."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Run the baselines' predictions "
                                            "(the solver's sweeps above all) on Dask: local:N or "
                                            "tcp://HOST:PORT (needs c2np\\[dask]); default: this process. "
                                            "Results do not depend on it."),
    json_out: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
) -> None:
    """Write the baselines as submissions under OUT/submissions, score every submission there
    (yours too) and write the leaderboard, plots and the report (OUT/report/index.html)."""
    from c2np.benchmark import run_benchmark, summary_json
    from c2np.executor import make_executor, parse_scheduler

    parse_scheduler(scheduler)
    n_workers = resolve_workers(workers)
    log = (lambda m: None) if json_out else (lambda m: err_console().print(f"[dim]·[/] {esc(m)}"))
    with make_executor(1, scheduler) as ex:
        summary = run_benchmark(store, out, splits=_split_list(splits), subset=subset, tasks=_split_list(tasks),
                                forward_models=_split_list(forward_models) if forward_models else None,
                                inverse_models=_split_list(inverse_models) if inverse_models else None,
                                progress=not json_out, log=log, workers=n_workers, executor=ex,
                                per_group=per_group)
    if json_out:
        print_json(summary_json(summary))
        return
    _print_leaderboard(summary)
    console().print(f"leaderboard: {esc(summary.leaderboard_md)}  ({summary.seconds:.0f} s)")
    console().print(f"report:      {esc(summary.report_index)}")


@handle_errors
def demo_cmd(
    out: Path = typer.Option(Path("c2np_out/demo"), "-o", "--out", help="Output folder."),
    materials: Optional[str] = typer.Option(None, "--materials",
                                            help="Comma-separated catalog ids (default: a fixed small set)."),
    json_out: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
) -> None:
    """The main job: small dataset, every baseline, leaderboard and report, end to end."""
    import time

    from c2np.benchmark import run_benchmark, summary_json
    from c2np.catalog import default_demo_materials
    from c2np.cli.dataset import load_cells
    from c2np.store import build_store

    t0 = time.perf_counter()
    ids = materials or ",".join(default_demo_materials())
    cells = load_cells(None, ids)
    err = err_console()
    if not json_out:
        err.print(f"[bold]c2np demo[/]: {len(cells)} materials ({esc(ids)}), protocol paper, radii 6-30 Å")
    store_path = build_store(cells, out / "dataset.h5", "paper", progress=not json_out)
    log = (lambda m: None) if json_out else (lambda m: err.print(f"[dim]·[/] {esc(m)}"))
    summary = run_benchmark(store_path, out, splits=("id", "ood"), subset="eval", progress=not json_out, log=log,
                            workers=available_cpus())
    if json_out:
        print_json(summary_json(summary))
        return
    _print_leaderboard(summary)
    con = console()
    con.print(f"\n[bold green]done[/] in {time.perf_counter() - t0:.0f} s. Wrote:")
    con.print(f"  dataset      {esc(store_path)}")
    con.print(f"  leaderboard  {esc(summary.leaderboard_md)} (+ .json)")
    con.print(f"  report       {esc(summary.report_index)} (offline HTML, open in a browser)")
    con.print(f"  results      {esc(out / 'results')} ({len(summary.results)} JSON files)")
    con.print(f"  plots        {esc(out / 'plots')} ({len(summary.plots)} PNG files)")
    con.print(f"  submissions  {esc(out / 'submissions')} (model.yml + prediction files per baseline)")
