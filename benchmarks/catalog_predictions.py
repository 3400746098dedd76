"""Baseline predictions of a store's ID and OOD eval subsets as HDF5 files, per split and
joined (ID then OOD), for timing `c2np evaluate --split id/ood/test` (docs/evaluation.md,
"Fifth pass").

    PYTHONPATH=src python benchmarks/catalog_predictions.py STORE OUT_DIR [--models ball,carve]

writes OUT_DIR/{model}_id.h5, {model}_ood.h5 and {model}_test.h5 (model: ball, carve, collapsed).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from c2np.baselines import analytic_carve, predict, random_ball
from c2np.executor import LocalExecutor
from c2np.particle import Particle
from c2np.predictions import write_forward_predictions_h5
from c2np.store import DatasetStore
from c2np.tasks import ForwardQuery, ForwardTask


def collapsed(query: ForwardQuery, *, seed: int = 0) -> Particle:
    """A collapsed prediction: the random ball's atoms shrunk into 1 Å of the centre (the
    costliest kind per R = 30 particle in ``metrics_speed.py``)."""
    ball = random_ball(query, seed=seed)
    return Particle(ball.numbers, ball.positions_angstrom / query.radius_angstrom)


def shrunk(query: ForwardQuery, *, seed: int = 0) -> Particle:
    """A prediction of the wrong size: the random ball's atoms shrunk to 0.6 of the radius
    (the matched RMSD's aligned path, docs/evaluation.md "Ninth pass")."""
    ball = random_ball(query, seed=seed)
    return Particle(ball.numbers, 0.6 * ball.positions_angstrom)


MODELS = {"ball": random_ball, "carve": analytic_carve, "collapsed": collapsed, "shrunk": shrunk}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("out", type=Path)
    ap.add_argument("--models", default="ball", help="comma-separated: ball, carve, collapsed, shrunk")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    store = DatasetStore.open(args.store)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.models.split(","):
        joined = {}
        with LocalExecutor(args.workers) as ex:
            for split in ("id", "ood"):
                preds = predict(ForwardTask(store, split, "eval"), MODELS[name], executor=ex)
                write_forward_predictions_h5(args.out / f"{name}_{split}.h5", preds)
                joined.update(preds)
                print(f"{name} {split}: {len(preds)} samples", flush=True)
        write_forward_predictions_h5(args.out / f"{name}_test.h5", joined)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
