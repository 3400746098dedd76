"""Commands of the learned models: ``train``, ``predict`` and ``model-diagnostic``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from c2np.cli._common import check_seed, console, handle_errors, print_json
from c2np.cli._common import esc as escape
from c2np.errors import C2NPInputError
from c2np.fileio import check_output_path


def register(app: typer.Typer) -> None:
    """Add the model commands to ``app``."""
    app.command("train")(train_cmd)
    app.command("predict")(predict_cmd)
    app.command("model-diagnostic")(diagnostic_cmd)
    app.command("merge-predictions")(merge_predictions_cmd)


def _open_dataset(store: Optional[Path], cells: Optional[Path], protocol: str,
                  radii: Optional[str]) -> Any:
    """A store-like dataset: the HDF5 store, or an in-memory one carved from a cell folder."""
    from c2np.errors import C2NPInputError

    if (store is None) == (cells is None):
        raise C2NPInputError("give exactly one of --store STORE.h5 or --cells FOLDER")
    if store is not None:
        from c2np.store import DatasetStore

        return DatasetStore.open(store)
    assert cells is not None  # exactly one of store / cells was given (checked above)
    from c2np.cells import read_cells
    from c2np.models.data import InMemoryDataset

    radii_list = None
    if radii:
        try:
            radii_list = [int(x) for x in radii.split(",") if x.strip()]
        except ValueError:
            raise C2NPInputError(f"--radii must be comma-separated integers, got {radii!r}") from None
    assert cells is not None  # exactly one of store / cells, checked above
    return InMemoryDataset(read_cells(cells), protocol, radii_angstrom=radii_list)


@handle_errors
def train_cmd(
    model: str = typer.Option(..., "--model", "-m",
                              help="cdvae | diffcsp | flowmm | mattergen | adit | sitescore (task 1: "
                                   "carve-based, learned threshold)"),
    task: str = typer.Option(..., "--task", help="forward (task 1) or inverse (task 2)"),
    config: str = typer.Option("small", "--config", help="tiny | small | paper"),
    store: Optional[Path] = typer.Option(None, "--store", help="Dataset store (.h5)."),
    cells: Optional[Path] = typer.Option(None, "--cells", help="Instead of --store: CIF folder or zip, "
                                         "carved in memory."),
    protocol: str = typer.Option("paper", "--protocol", help="Protocol for --cells."),
    radii: Optional[str] = typer.Option(None, "--radii", help="Radii for --cells, e.g. 6,8,10."),
    out: Path = typer.Option(..., "--out", "-o", help="Run folder (checkpoints, log.csv)."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out from its checkpoint."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Override the number of epochs."),
    overrides: list[str] = typer.Option([], "--set", help="Override a config field, KEY=VALUE "
                                        "(repeatable), e.g. --set max_train_radius_angstrom=13."),
    device: str = typer.Option("cpu", "--device", help="cpu | cuda | auto (cuda when available)."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary."),
) -> None:
    """Train a learned model from scratch on the store's train split (held-out materials and
    validation radii excluded), validating on its val split."""
    from c2np.models.config import get_config, parse_overrides
    from c2np.models.training import train

    check_seed(seed)
    cfg = get_config(config, **parse_overrides(overrides))
    ds = _open_dataset(store, cells, protocol, radii)
    if not json_out and getattr(ds, "recipes", None) is not None:
        from c2np.cli.dataset import radii_report

        for line in radii_report(ds.recipes)[0].splitlines():  # one terminal line each, never wrapped
            console().print(escape(line), highlight=False, soft_wrap=True)
    res = train(ds, model, task, cfg, out, seed=seed, resume=resume, epochs=epochs, device=device,
                progress=not json_out)
    last = res.log[-1] if res.log else {}
    summary = {"run": str(res.run_dir), "model": model, "task": task, "epoch": res.epoch,
               "step": res.step, **res.data, "best": res.best, "last": last}
    if json_out:
        print_json(summary)
        return
    console().print(escape(f"trained {model}/{task} to epoch {res.epoch} (step {res.step}) -> {res.run_dir}; "
                           f"train loss {last.get('train_loss', float('nan')):.4g}, "
                           f"val loss {last.get('val_loss', float('nan')):.4g}; best epoch "
                           f"{res.best.get('epoch')}; trained on {len(res.data['train_materials'])} materials, "
                           f"radii {res.data['train_radii']} Å"))


@handle_errors
def predict_cmd(
    run: Path = typer.Option(..., "--run", help="Run folder written by c2np train, or a task-2 crystal "
                             "generator or generator pool folder (pretrained/<family>-inverse)."),
    store: Optional[Path] = typer.Option(None, "--store", help="Dataset store (.h5)."),
    cells: Optional[Path] = typer.Option(None, "--cells", help="Instead of --store: CIF folder or zip."),
    protocol: str = typer.Option("paper", "--protocol", help="Protocol for --cells."),
    radii: Optional[str] = typer.Option(None, "--radii", help="Radii for --cells."),
    split: str = typer.Option("id", "--split", help="train | val | id | ood | test | heldout-dev | "
                              "heldout-test (the sealed test) | heldout (both)"),
    subset: str = typer.Option("eval", "--subset", help="eval (the harness's seeded rotations per material "
                               "and R, as c2np evaluate scores them) or full"),
    per_group: Optional[int] = typer.Option(None, "--per-group", help="Rotations per (material, R) in the "
                                            "eval subset (default: the harness's 8)."),
    out: Path = typer.Option(..., "--out", "-o", help="Predictions: .extxyz (task 1) or .csv (task 2); a "
                             "provenance record is written beside it as OUT.json."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Sampling steps (default: the config's)."),
    checkpoint: str = typer.Option("best", "--checkpoint", help="best (best validation fidelity) or last."),
    device: str = typer.Option("cpu", "--device", help="cpu | cuda | auto (cuda when available)."),
    allow_other_store: bool = typer.Option(False, "--allow-other-store", help="Predict on a store whose "
                                           "fingerprint or protocol differs from the run's (recorded)."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary."),
    shard: Optional[str] = typer.Option(None, "--shard", help="Predict only shard I of N (whole "
                                        "batches dealt round robin; I = 0..N-1, e.g. a job-array index); "
                                        "c2np merge-predictions combines the N parts into one run's file."),
) -> None:
    """Write predictions of a trained model for a split (files c2np evaluate reads)."""
    check_output_path(out)
    check_seed(seed)
    from c2np.models.inverse.predict import is_generator_folder, predict_generator
    from c2np.models.training import predict
    from c2np.sharding import parse_shard

    shard_spec = parse_shard(shard) if shard is not None else None
    ds = _open_dataset(store, cells, protocol, radii)
    if is_generator_folder(run):    # a shipped task-2 crystal generator or pool: its own settings
        if steps is not None or checkpoint != "best":
            raise C2NPInputError(f"{run}: a crystal generator folder predicts with its own settings "
                                 "(no --steps or --checkpoint)")
        res = predict_generator(run, ds, split, out, subset=subset, per_group=per_group, seed=seed,
                                shard=shard_spec, progress=not json_out, device=device)
        if json_out:
            print_json(res)
            return
        console().print(escape(f"{res['n_samples']} predictions ({res['model']}, {res['kind']}, {split}; "
                               f"{res['n_no_answer']} without an answer) -> {out} "
                               f"at {res['samples_per_s']:.3g} samples/s"))
        return
    summary = predict(run, ds, split, out, subset=subset, seed=seed, steps=steps, per_group=per_group,
                      checkpoint=checkpoint, device=device, allow_other_store=allow_other_store,
                      progress=not json_out, shard=shard_spec)
    if json_out:
        print_json(summary)
        return
    other = "" if summary["store_check"]["matches"] else " (another store than the run's, allowed)"
    console().print(escape(f"{summary['n_samples']} predictions ({summary['model']}, {summary['task']}, "
                           f"{split}, {checkpoint} checkpoint = epoch {summary['checkpoint']['epoch']}) -> {out} "
                           f"at {summary['samples_per_s']:.3g} samples/s{other}"))


@handle_errors
def merge_predictions_cmd(
    parts: list[Path] = typer.Argument(..., help="Prediction files of c2np predict --shard I/N (each "
                                                 "with its PART.json record)."),
    out: Path = typer.Option(..., "--out", "-o", help="Merged predictions (.csv for task 2, .extxyz for "
                                                      "task 1); OUT.json beside it."),
    json_out: bool = typer.Option(False, "--json", help="Print the merged summary as JSON."),
) -> None:
    """Combine the shards of one c2np predict run into exactly that run's predictions file."""
    check_output_path(out)
    from c2np.models.training import merge_predictions

    summary = merge_predictions(list(parts), out)
    if json_out:
        print_json(summary)
        return
    console().print(escape(f"{len(parts)} parts, {summary['n_samples']} predictions -> {out}"))


@handle_errors
def diagnostic_cmd(
    runs: list[Path] = typer.Argument(..., help="Run folders."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder for the plot and table."),
) -> None:
    """Training loss next to geometric fidelity per model (plot + Markdown table)."""
    from c2np.models.diagnostic import write_diagnostic

    files = write_diagnostic(runs, out)
    console().print(escape("wrote " + ", ".join(str(f) for f in files)))
