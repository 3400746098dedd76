"""``c2np evaluate``: score a predictions file against a dataset store (contract §6-8), whole
or one shard of a job array; ``c2np merge-results``: combine the shards."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from c2np.cli._common import check_seed, console, esc, handle_errors, print_json, resolve_workers
from c2np.errors import C2NPInputError
from c2np.fileio import check_output_path

TASKS = ("forward", "inverse")


def register(app: typer.Typer) -> None:
    """Add the ``evaluate`` command to ``app``."""
    app.command("evaluate")(evaluate_cmd)
    app.command("merge-results")(merge_results_cmd)


def _open_store(path: Path) -> Any:
    """Open a dataset store (a seam for tests)."""
    from c2np.store import DatasetStore

    return DatasetStore.open(path)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def print_results_table(data: dict[str, Any]) -> None:
    """Two Rich tables: every metric overall (mean, 95 % CI, mean over successes), and the
    headline metrics per radius."""
    from rich.table import Table

    from c2np.metrics import HEADLINE

    con = console()
    overall = data["metrics"]["overall"]
    title = (f"{data['model']} · {data['task']} · {data['protocol']} · {data['split']} "
             f"({data['subset']}): {data['n_samples']} samples, {data['n_failed']} failed")
    t1 = Table(title=esc(title))
    for col, just in (("metric", "left"), ("mean", "right"), ("95 % CI", "right"),
                      ("mean (successes)", "right"), ("unit", "left")):
        t1.add_column(col, justify=just)  # type: ignore[arg-type]
    for name, summ in overall.items():
        ci = summ["ci95"]
        unit = data["metric_info"][name]["unit"]
        t1.add_row(name, _num(summ["mean"]), "-" if ci is None else f"{ci[0]:.4g} – {ci[1]:.4g}",
                   _num(summ["mean_successes"]), unit)
    con.print(t1)
    names = tuple(m.value for m in HEADLINE[data["task"]] if m.value in overall)
    t2 = Table(title="per radius (failure-penalised means)")
    t2.add_column("R (Å)", justify="right")
    t2.add_column("n", justify="right")
    t2.add_column("failed", justify="right")
    for n in names:
        t2.add_column(n, justify="right")
    for r, group in sorted(data["metrics"]["per_radius"].items(), key=lambda kv: int(kv[0])):
        first = group[names[0]]
        t2.add_row(r, str(first["n"]), str(first["n_failed"]), *(_num(group[n]["mean"]) for n in names))
    con.print(t2)
    if data["n_failed"]:
        shown = ", ".join(f"{f['sample_id']} ({f['reason']})" for f in data["failed_samples"][:5])
        more = "" if data["n_failed"] <= 5 else f" and {data['n_failed'] - 5} more"
        con.print(f"[yellow]{data['n_failed']} failed samples[/]: {esc(shown)}{more}", highlight=False)


@handle_errors
def evaluate_cmd(
    store: Path = typer.Option(..., "--store", help="Dataset store (.h5) built by c2np."),
    task: str = typer.Option(..., "--task", help="forward (task 1) or inverse (task 2)."),
    predictions: Path = typer.Option(..., "--predictions", "-p",
                                     help="Task 1: .extxyz or .h5; task 2: .csv."),
    split: str = typer.Option(..., "--split", help="train, val, id, ood, test (id+ood), heldout-dev, "
                              "heldout-test (the sealed test) or heldout (both)."),
    protocol: Optional[str] = typer.Option(None, "--protocol",
                                           help="Expected protocol of the store (checked)."),
    subset: str = typer.Option("eval", "--subset", help="eval (8 rotations per material and R) or full."),
    per_group: int = typer.Option(8, "--per-group", help="Rotations per (material, R) in the eval subset "
                                  "(default: the harness's 8; c2np predict --per-group writes such files)."),
    model: str = typer.Option("model", "--model", help="Model name recorded in the results."),
    category: Optional[str] = typer.Option(None, "--category", help="What the model knows, recorded in "
                                           "the results: learned, learned+prior (name each --prior) or "
                                           "analytic. Unstated results never rank as learned."),
    prior: list[str] = typer.Option([], "--prior", help="A prior of a learned+prior model (repeatable): "
                                    "lattice-sites, sphere-boundary, site-snapping, carve, spacegroup-templates, "
                                    "profile-ranking, profile-refinement, central-crop, ensemble."),
    out: Path = typer.Option(..., "--out", "-o", help="Results JSON to write."),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples for the 95 % CI."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Also write a PNG of the results."),
    workers: int = typer.Option(0, "--workers", help="Processes scoring samples in parallel "
                                "(0: one per available CPU). Results do not depend on it."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Run the scoring on "
                                            "Dask instead of local processes: local:N (a LocalCluster "
                                            "of N workers) or tcp://HOST:PORT (a running scheduler); "
                                            "needs c2np\\[dask]. Results do not depend on it."),
    shard: Optional[str] = typer.Option(None, "--shard", help="Task 1: score only shard I of N "
                                        "(I/N, I = 0..N-1, e.g. a job-array index) and write a partial "
                                        "results file to --out; c2np merge-results combines the N parts."),
) -> None:
    """Score predictions; print overall and per-radius metrics; write the results JSON."""
    from c2np.limits import check as check_limit

    check_output_path(out)
    check_seed(seed)
    check_limit("bootstrap", bootstrap, what="--bootstrap")  # before the scoring, not after it
    from c2np.tasks import EVAL_SPLITS, SUBSETS, evaluate_task

    if task not in TASKS:
        raise C2NPInputError(f"--task must be one of {list(TASKS)}, got {task!r}")
    if split not in EVAL_SPLITS:
        raise C2NPInputError(f"--split must be one of {list(EVAL_SPLITS)}, got {split!r}")
    if subset not in SUBSETS:
        raise C2NPInputError(f"--subset must be one of {list(SUBSETS)}, got {subset!r}")
    workers = resolve_workers(workers)
    from c2np.executor import parse_scheduler

    parse_scheduler(scheduler)  # bad --scheduler values fail before any work
    from c2np.evaluation.shards import parse_shard

    shard_spec = parse_shard(shard) if shard is not None else None
    if shard_spec is not None and task != "forward":
        raise C2NPInputError("--shard applies to --task forward only")
    if bootstrap < 1:
        raise C2NPInputError(f"--bootstrap must be >= 1, got {bootstrap}")
    from c2np.categories import check_category

    stated = None if category is None and not prior else check_category(category, prior, where="--category/--prior")
    if not predictions.is_file():
        raise C2NPInputError(f"{predictions}: no such predictions file")
    ds = _open_store(store)
    if protocol is not None and protocol != ds.recipes.protocol:
        raise C2NPInputError(f"{store}: store has protocol {ds.recipes.protocol!r}, "
                             f"--protocol says {protocol!r}")
    from c2np.executor import make_executor

    if shard_spec is not None:
        from c2np.tasks import ForwardTask

        with make_executor(workers, scheduler) as ex:
            part = ForwardTask(ds, split, subset, per_group=per_group, executor=ex).evaluate(
                predictions, model=model, category=stated, n_resamples=bootstrap, seed=seed, progress=progress,
                workers=workers, executor=ex, shard=shard_spec)
        part.write(out)
        console().print(f"shard {shard_spec[0]}/{shard_spec[1]}: {len(part.data['samples'])} samples, "
                        f"{part.n_failed} failed -> {esc(out)}")
        return
    with make_executor(workers, scheduler) as ex:
        res = evaluate_task(task, ds, predictions, split, subset, model=model, category=stated,
                            n_resamples=bootstrap,
                            seed=seed, progress=progress, workers=workers, per_group=per_group, executor=ex)
    res.write(out)
    print_results_table(res.data)
    console().print(f"results -> {esc(out)}")
    if plot is not None:
        from c2np.report import plot_results

        plot_results(res.data, plot)
        console().print(f"plot -> {esc(plot)}")


@handle_errors
def merge_results_cmd(
    parts: list[Path] = typer.Argument(..., help="Partial results files of c2np evaluate --shard I/N."),
    out: Path = typer.Option(..., "--out", "-o", help="Results JSON to write."),
    json_out: bool = typer.Option(False, "--json", help="Print the merged results JSON to stdout."),
) -> None:
    """Combine the partial results of all shards of one run into that run's results."""
    from c2np.evaluation.merge import merge_results

    res = merge_results(parts)
    res.write(out)
    if json_out:
        print_json(res.data)
        return
    print_results_table(res.data)
    console().print(f"{len(parts)} parts -> {esc(out)}")
