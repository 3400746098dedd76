"""Task-2 predictions of a crystal-generator folder (``pretrained/<family>-inverse``) or a
generator pool folder (``pretrained/diffcsp-flowmm-pool-inverse``) for a split of a store:
the files ``c2np evaluate`` scores, written by ``c2np predict --run FOLDER``.

The rows and their opaque ids are exactly those of :func:`c2np.models.training.predict`
(:func:`~c2np.models.training.query_items`); the generator sees the particles only. Particles
are generated in chunks of :data:`CHUNK`, each with its own seed
(:func:`~c2np.models.training.batch_seed`), so ``shard=(i, n)`` (whole chunks dealt round robin)
reproduces its part of one run and ``c2np merge-predictions`` joins the parts into that run's
file. Within a chunk the particles' cells are sampled in shared batches
(:meth:`~c2np.models.inverse.generator.CrystalGenerator.candidates`); the progress bar counts
particles. ``device``: where the networks run (``cpu``, ``cuda`` or ``auto``; the template
projections and the read-out stay on the CPU). A particle for which no generated cell can be
read gets a row of missing values (NaN; the harness counts it as a failure).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from c2np.errors import C2NPInputError

__all__ = ["CHUNK", "is_generator_folder", "predict_generator", "place_generator"]

#: the compiled kernels of the pair profiles (:mod:`c2np.models.inverse.ranking`)
PROFILE_KERNEL_MODULE = "c2np.models.inverse._profile_kernels"
#: particles generated together (one seed each; the unit of shards and of the progress bar)
CHUNK = 16


def is_generator_folder(path: str | Path) -> bool:
    """Whether ``path`` is a crystal-generator folder (``config.json`` of kind
    ``c2np.crystal_gen/1``) or a generator pool folder (``pool.json``)."""
    import os

    from c2np.models.inverse.pool import POOL_FILE
    from c2np.models.runfiles import read_json

    p = Path(path)
    if os.path.lexists(p / POOL_FILE):
        return True
    try:  # a regular file inside the folder, read by the guarded reader (a FIFO is never opened)
        meta = read_json(p / "config.json", what="model config", folder=p)
    except C2NPInputError:  # not a generator's: the run folder reader names the problem
        return False
    return meta.get("kind") == "c2np.crystal_gen/1"


def place_generator(gen: Any, device: str) -> Any:
    """A loaded generator or generator pool moved to ``device`` (``cpu``, ``cuda`` or
    ``auto``, :func:`~c2np.models.training.resolve_device`; ``cuda`` without a GPU is a
    :class:`~c2np.errors.C2NPInputError`); returns the ``torch.device``."""
    from c2np.models.training import resolve_device

    dev = resolve_device(device)
    for module in [m for _, m in gen.members] if hasattr(gen, "members") else [gen]:
        module.to(dev)
    return dev


def predict_generator(folder: str | Path, store: Any, split: str, out: str | Path, *, subset: str = "eval",
                      per_group: int | None = None, seed: int = 0, shard: tuple[int, int] | None = None,
                      progress: bool = True, device: str = "cpu") -> dict[str, Any]:
    """Write the generator's task-2 predictions for ``split`` to ``out`` (CSV) and its
    provenance record ``out.json`` (returned). ``subset``, ``per_group`` and ``shard`` as in
    :func:`c2np.models.training.predict`; the record notes that a generator folder does not
    state which store it was trained on (the shipped ones: protocol ``strict``'s training
    materials, so only ``heldout`` rows are unseen materials)."""
    import torch
    from tqdm import tqdm

    from c2np.fileio import atomic_write
    from c2np.kernel_cache import compile_notice
    from c2np.models.inverse.pool import GeneratorPool, load_inverse_generator
    from c2np.models.training import (
        PARTIAL_PREDICTIONS_SCHEMA,
        batch_seed,
        batch_shard_positions,
        query_items,
    )
    from c2np.predictions import write_inverse_predictions
    from c2np.sharding import ids_sha256, shard_positions

    if not is_generator_folder(folder):
        raise C2NPInputError(f"{folder}: not a crystal generator or generator pool folder")
    gen = load_inverse_generator(folder)
    dev = place_generator(gen, device)
    out = Path(out)
    if out.suffix.lower() != ".csv":
        raise C2NPInputError(f"{out}: task-2 predictions are written as .csv")
    t0 = time.perf_counter()
    items = query_items(store, split, subset=subset, per_group=per_group, forward=False)
    n_chunks = -(-len(items) // CHUNK)
    chunks = [int(b) for b in shard_positions(n_chunks, *shard)] if shard is not None else list(range(n_chunks))
    name = Path(folder).resolve().name
    preds: dict[str, tuple[float, ...]] = {}
    n_failed = 0
    n_particles = sum(len(items[b * CHUNK:(b + 1) * CHUNK]) for b in chunks)
    notice = compile_notice("pair-profile kernels", "a few seconds", PROFILE_KERNEL_MODULE) if progress else None
    if notice:
        print(notice, file=sys.stderr, flush=True)
    with torch.no_grad(), tqdm(total=n_particles, desc=f"predicting {name}", disable=not progress,
                               unit="particle") as bar:
        for b in chunks:
            part = items[b * CHUNK:(b + 1) * CHUNK]
            answers = gen.predict_particles([p for _, p in part], seed=batch_seed(seed, b))
            bar.update(len(part))
            for (sid, _), ans in zip(part, answers, strict=True):
                if ans is None:
                    n_failed += 1
                    preds[sid] = (math.nan,) * 7
                else:
                    preds[sid] = tuple(float(x) for x in ans.as_tuple())
    write_inverse_predictions(out, preds)
    dt = time.perf_counter() - t0
    kind = "generator pool" if isinstance(gen, GeneratorPool) else f"crystal generator ({gen.cfg.process})"
    run = {"run": str(folder), "model": name, "task": "inverse", "split": split, "subset": subset,
           "per_group": per_group, "checkpoint": "shipped", "seed": seed, "steps": None, "batch": CHUNK,
           "store_fingerprint": str(store.fingerprint)}
    summary: dict[str, Any] = {
        "file": str(out), "run": str(folder), "model": name, "kind": kind, "task": "inverse", "split": split,
        "subset": subset, "per_group": per_group, "seed": seed, "device": str(dev),
        "sample_ids": "opaque task-2 ids (c2np.tasks.opaque_sample_id)", "n_samples": len(preds),
        "n_no_answer": n_failed, "seconds": dt, "samples_per_s": len(preds) / max(dt, 1e-9),
        "store_check": {"store_protocol": str(getattr(store, "protocol", "")),
                        "store_fingerprint": str(store.fingerprint),
                        "note": "a generator folder does not record its training store; the shipped ones "
                                "were trained on protocol strict's training materials"}}
    if shard is not None:
        summary.update({"schema": PARTIAL_PREDICTIONS_SCHEMA, "run": run,
                        "shard": {"index": int(shard[0]), "count": int(shard[1])}, "n_rows": len(items),
                        "sample_ids_sha256": ids_sha256([sid for sid, _ in items]),
                        "positions": batch_shard_positions(len(items), CHUNK, shard)})
    with atomic_write(out.with_name(out.name + ".json")) as fh:
        json.dump(summary, fh, indent=2)
    return summary
