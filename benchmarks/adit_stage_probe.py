"""Which ADiT stage limits a trained run: its frozen autoencoder or its latent DiT?

For the run's validation fidelity rows (``reference_fidelity.json``, the rows `c2np train`
scored), the per-sample F1@0.5 / F1@0.1 (``c2np.metrics.forward_metrics``, the harness's
per-sample code) of (a) the autoencoder's reconstruction of the true particle (encoder means
-> decoder, the true atom count) and (b) the sampled particle (DiT from noise, the count
head's count). (a) high and (b) low: the DiT limits; (a) low: the autoencoder does.

    python benchmarks/adit_stage_probe.py --run pretrained/adit-forward \\
        --store c2np_out/fit/store_paper.h5 --steps 100
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import torch

    from c2np.metrics import forward_metrics
    from c2np.models.data import condition_for_row
    from c2np.models.forward.base import collate as _collate
    from c2np.models.forward.base import masked_logits as _masked_logits
    from c2np.models.forward.base import to_particles as _to_particles
    from c2np.models.training import generator, load_run
    from c2np.store import DatasetStore

    torch.set_num_threads(1)
    model, _ = load_run(args.run)
    model.eval()
    ids = json.loads((Path(args.run) / "reference_fidelity.json").read_text())["sample_ids"]
    rows: dict[str, list[float]] = {"ae f1@0.5": [], "ae f1@0.1": [], "sample f1@0.5": [], "sample f1@0.1": []}
    store = DatasetStore.open(args.store)
    with torch.no_grad():
        index = {sid: i for i, sid in enumerate(store.recipes.sample_ids())}
        for k, sid in enumerate(ids):
            r = index[sid]
            cond, target = condition_for_row(store, r), store.particle(r)
            c, p = _collate([cond], [target], model.device)
            ae_cond = model.conditioner(c)
            mu, _ = model.encode(p, c, ae_cond)
            u, logits = model.decode(mu, p.batch, p.counts, ae_cond, c)
            rec_p = _to_particles(u, _masked_logits(logits, p.batch, c).argmax(-1), p.counts, c)[0]
            smp = model.sample([cond], generator(args.seed + k, model), steps=args.steps)[0]
            for name, q in (("ae", rec_p), ("sample", smp)):
                v = forward_metrics(q.numbers, q.positions_angstrom, target.numbers, target.positions_angstrom,
                                    radius_angstrom=cond.radius_angstrom).values
                rows[f"{name} f1@0.5"].append(float(v["f1@0.5"]))
                rows[f"{name} f1@0.1"].append(float(v["f1@0.1"]))
            print(sid, target.n_atoms, *(f"{rows[m][-1]:.3f}" for m in rows), flush=True)
    print("mean", *(f"{m} {np.mean(v):.3f}" for m, v in rows.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
