"""Task 2 on the held-out materials of a protocol-strict store, through the harness:
baselines and crystal generators, clean and perturbed (docs/results/ablations_inverse.md).

    OMP_NUM_THREADS=1 nice -n 10 python reproduce/inverse-results/heldout.py out/strict.h5 \
        --generators pretrained/diffcsp-inverse,pretrained/flowmm-inverse --out out/inverse

Variants: clean; Gaussian noise 0.02 and 0.05 Å; random carving centres
(InverseTask.perturbed_queries, seed 0). Every model answers the same queries of a variant;
each (model, variant) is scored by InverseTask.evaluate and written as a results JSON.

Rows: the solver (ceiling), composition lookup, majority class, the descriptor neighbour
fitted on clean training particles and fitted on clean + noisy (0.02, 0.05 Å) copies, each
generator folder of ``--generators`` (sampler / samples per query overridable), and with
``--encoder-heads RUN`` the task-2 regression heads of a ``c2np train`` run ("encoder +
heads"). ``--every K`` keeps every K-th evaluated row (a small fixed subset for cheap checks;
the harness then scores only those rows), starting at row ``--offset``.

``--split training-materials``: instead of the held-out materials, the eval-subset rows of
the store's *training* materials at every radius (:func:`c2np.tasks.training_material_rows`;
never a held-out material, never the ``rot_0`` particle the models fit) — particles the
held-out benchmark does not score, for choosing inference settings (decision records 0035,
0071). The baselines are fitted on the same training examples as always, so on these
rows they are memorisation numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from c2np.baselines import CompositionLookup, DescriptorNeighbour, MajorityClass, crystallographic_solver
from c2np.errors import C2NPInputError
from c2np.models.inverse.config import RANK_RULES, READ_RULES, Z_CANDIDATES
from c2np.models.inverse.pool import GeneratorPool, load_inverse_generator
from c2np.models.inverse.ranking import particle_pair_profile
from c2np.particle_descriptor import describe, position_noise_angstrom
from c2np.predictions import InversePrediction, inverse_values
from c2np.sealed import require_development_split
from c2np.tasks import InverseTask, training_material_rows

TRAINING_MATERIALS = "training-materials"

VARIANTS = {"clean": {}, "noise0.02": {"noise_angstrom": 0.02}, "noise0.05": {"noise_angstrom": 0.05},
            "random-centre": {"random_centre": True}}


def open_rows(store: str, split: str, per_group: int, every: int, offset: int) -> InverseTask | None:
    """The task whose rows are scored: ``split`` (or the training materials' rows), then every
    ``every``-th row from ``offset`` (a fixed subset; the harness scores these rows only).
    None (the reason printed) for an offset out of range."""
    if every < 1 or not 0 <= offset < every:
        print(f"--every {every} --offset {offset}: need every >= 1 and 0 <= offset < every", file=sys.stderr)
        return None
    try:
        require_development_split(split, purpose="a benchmark arm, sweep or diagnosis")
    except C2NPInputError as exc:
        print(f"--split: {exc}", file=sys.stderr)
        return None
    if split == TRAINING_MATERIALS:
        task = InverseTask.open(store, split="train", per_group=per_group)
        task._rows = training_material_rows(task._store.recipes, per_group=per_group)
        task.split = TRAINING_MATERIALS   # the results' label
    else:
        task = InverseTask.open(store, split=split, per_group=per_group)
    task._rows = task._rows[offset::every]
    return task


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store")
    ap.add_argument("--out", default="out/inverse")
    ap.add_argument("--generators", default="", help="comma-separated generator folders")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--per-group", type=int, default=2, help="rotations per (material, R)")
    ap.add_argument("--split", default="heldout-dev",
                    help=f"a split of the store, or {TRAINING_MATERIALS!r} (rows of the training materials)")
    ap.add_argument("--no-solver", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--every", type=int, default=1, help="keep every K-th evaluated row")
    ap.add_argument("--offset", type=int, default=0, help="with --every: the first row kept (0 .. K-1)")
    ap.add_argument("--n-samples", type=int, default=None, help="generated cells per query (vote)")
    ap.add_argument("--sampler", default=None, choices=["sde", "ode", "pc"])
    ap.add_argument("--step-lr", type=float, default=None)
    ap.add_argument("--read-rule", default=None, choices=list(READ_RULES))
    ap.add_argument("--min-pair-angstrom", type=float, default=None,
                    help="vote over generated cells whose atoms are at least this far apart (Å)")
    ap.add_argument("--sample-steps", type=int, default=None, help="reverse-diffusion steps when sampling")
    ap.add_argument("--z-candidates", default=None, choices=list(Z_CANDIDATES),
                    help="compositions generated: the count head's ('head') or every training one ('all')")
    ap.add_argument("--rank", default=None, choices=list(RANK_RULES),
                    help="answer from the candidates: vote, or the smallest pair-profile mismatch")
    ap.add_argument("--refine-top", type=int, default=None, help="rank 'refine': candidates refined per query")
    ap.add_argument("--refine-evals", type=int, default=None, help="rank 'refine': profiles per refinement")
    ap.add_argument("--refine-screen-evals", type=int, default=None,
                    help="rank 'refine': profiles of the screen of every template candidate (0: no screen)")
    ap.add_argument("--symmetric-margin", type=float, default=None,
                    help="prefer the more symmetric template within this profile mismatch of the best")
    ap.add_argument("--symmetric-margin-rel", type=float, default=None,
                    help="... plus this share of the best mismatch")
    ap.add_argument("--symmetric-margin-per-angstrom", type=float, default=None,
                    help="... plus this times the particle's noise estimate (Å)")
    ap.add_argument("--crop-radii", default=None,
                    help="comma-separated radii (Å) of the central crops the generators are also "
                         "conditioned on (GenConfig.crop_radii_angstrom; '' for none)")
    ap.add_argument("--crop-max-noise", type=float, default=None,
                    help="crops only for particles whose noise estimate is at most this (Å; "
                         "GenConfig.crop_max_noise_angstrom)")
    ap.add_argument("--anneal-slope", type=float, default=None,
                    help="flowmm: inference anti-annealing of the coordinate velocity, (1 + c t) u")
    ap.add_argument("--dump-candidates", action="store_true",
                    help="write every generator's candidates per query (GEN__VARIANT.candidates.json)")
    ap.add_argument("--write-predictions", action="store_true",
                    help="also write every model's answers (MODEL__VARIANT.predictions.json: sample id -> "
                         "a, b, c, alpha, beta, gamma, space group)")
    ap.add_argument("--merge-predictions", default="",
                    help="comma-separated folders of --write-predictions runs on disjoint rows (e.g. --every 2 "
                         "--offset 0 and 1): their answers scored together on this run's rows, nothing generated; "
                         "exit 2 when a row is answered twice or by no folder")
    ap.add_argument("--encoder-heads", default="", help="a c2np train run folder (task inverse)")
    ap.add_argument("--no-baselines", action="store_true", help="generators (and encoder heads) only")
    ap.add_argument("--spacegroups", default="",
                    help="keep only rows whose target has one of these space groups (comma-separated; a "
                         "row subset for diagnostics, after --every)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    task = open_rows(args.store, args.split, args.per_group, args.every, args.offset)
    if task is None:
        return 2
    if args.spacegroups:
        try:
            keep = {int(x) for x in args.spacegroups.split(",")}
        except ValueError:
            print(f"--spacegroups: not a comma-separated list of integers: {args.spacegroups!r}", file=sys.stderr)
            return 2
        task._rows = np.array([r for r in task._rows if task._target(int(r)).spacegroup in keep], dtype=np.int64)
        if len(task._rows) == 0:
            print(f"--spacegroups {args.spacegroups}: no evaluated row has one of these groups", file=sys.stderr)
            return 2
    if args.merge_predictions:
        return merge_predictions(task, args, out)
    t0 = time.time()
    fitted = {} if args.no_baselines else {"composition-lookup": CompositionLookup.fit(task),
                                           "majority-class": MajorityClass.fit(task)}
    neighbours = {} if args.no_baselines else {"descriptor-neighbour": DescriptorNeighbour.fit(task),
                                               "descriptor-neighbour-noisy": DescriptorNeighbour.fit_noisy(task)}
    gens = {Path(g).name: load_inverse_generator(g) for g in args.generators.split(",") if g}
    for gname, gen in gens.items():
        over = {k: v for k, v in (("n_samples", args.n_samples), ("sampler", args.sampler),
                                  ("step_lr", args.step_lr), ("read_rule", args.read_rule),
                                  ("min_pair_angstrom", args.min_pair_angstrom),
                                  ("sample_steps", args.sample_steps), ("z_candidates", args.z_candidates),
                                  ("rank", args.rank), ("refine_top", args.refine_top),
                                  ("refine_evals", args.refine_evals),
                                  ("refine_screen_evals", args.refine_screen_evals),
                                  ("symmetric_margin", args.symmetric_margin),
                                  ("symmetric_margin_rel", args.symmetric_margin_rel),
                                  ("symmetric_margin_per_angstrom", args.symmetric_margin_per_angstrom),
                                  ("anneal_slope", args.anneal_slope),
                                  ("crop_radii_angstrom", None if args.crop_radii is None else
                                   tuple(float(r) for r in args.crop_radii.split(",") if r)),
                                  ("crop_max_noise_angstrom", args.crop_max_noise))
                if v is not None}
        if isinstance(gen, GeneratorPool):
            if over:
                print(f"{gname}: a generator pool takes no setting overrides ({', '.join(over)})", file=sys.stderr)
                return 2
            continue
        gen.cfg = dataclasses.replace(gen.cfg, **over)
    heads = None
    if args.encoder_heads:
        from c2np.models.training import load_run

        heads, _ = load_run(args.encoder_heads)
        heads.eval()
    if args.no_solver or args.no_baselines:
        args.no_solver = True
    print(f"{task}; fitted in {time.time() - t0:.0f} s", flush=True)
    summary = []
    for variant in args.variants.split(","):
        preds: dict[str, dict] = {m: {} for m in [*(["solver"] if not args.no_solver else []), *fitted,
                                                  *neighbours, *gens, *(["encoder-heads"] if heads else [])]}
        ids, descs, parts = [], [], []
        t1 = time.time()
        for q in task.perturbed_queries(seed=args.seed, **VARIANTS[variant]):
            if not args.no_solver:
                p = crystallographic_solver(q)
                if p is not None:
                    preds["solver"][q.sample_id] = p
            for name, model in fitted.items():
                preds[name][q.sample_id] = model(q)
            d = describe(q.particle)
            for name, nb in neighbours.items():
                preds[name][q.sample_id] = nb.from_descriptor(d)
            ids.append(q.sample_id)
            descs.append(d)
            parts.append(q.particle)
        print(f"{variant}: queries + baselines {time.time() - t1:.0f} s", flush=True)
        profiles = [particle_pair_profile(p, d) for p, d in zip(parts, descs)] if gens else []
        noise = [position_noise_angstrom(p) for p in parts] if gens else []   # read by choose and the dump
        for name, gen in gens.items():
            t2 = time.time()
            cands = gen.candidates(descs, seed=args.seed, profiles=profiles, particles=parts)   # = predict_particles
            for sid, c, s in zip(ids, cands, noise):
                p = gen.choose(c, noise_angstrom=s)
                if p is not None:
                    preds[name][sid] = p
            if args.dump_candidates:
                rows = [{"sample_id": sid, "n_atoms": len(part.numbers), "noise_angstrom": s,
                         "radius_angstrom": float(np.linalg.norm(part.positions_angstrom
                                                                 - part.positions_angstrom.mean(0), axis=1).max()),
                         "candidates": [{"composition": list(x.composition), "params": [float(v) for v in x.params],
                                         "spacegroup": x.spacegroup, "min_pair_angstrom": x.min_pair_angstrom,
                                         "mismatch": x.mismatch, "composition_logprob": x.composition_logprob,
                                         "volume_angstrom3": x.volume_angstrom3,
                                         "template_spacegroup": x.template_spacegroup,
                                         "n_operations": x.n_operations, "generator": x.generator,
                                         "view_radius_angstrom": x.view_radius_angstrom,
                                         **({"lattice_angstrom": x.cell[0].tolist(), "frac": x.cell[1].tolist(),
                                             "slots": x.cell[2].tolist()} if x.cell is not None else {})}
                                        for x in c]}
                        for sid, part, c, s in zip(ids, parts, cands, noise)]
                (out / f"{name}__{variant}.candidates.json").write_text(json.dumps(rows))
            print(f"{variant}: {name} {time.time() - t2:.0f} s", flush=True)
        if heads is not None:
            t2 = time.time()
            with torch.no_grad():
                for a in range(0, len(parts), 16):
                    lat, sg = heads.predict(parts[a:a + 16])
                    for sid, p6, g in zip(ids[a:a + 16], lat, sg):
                        preds["encoder-heads"][sid] = InversePrediction.from_values(np.asarray(p6), int(g))
            print(f"{variant}: encoder-heads {time.time() - t2:.0f} s", flush=True)
        for name, p in preds.items():
            if args.write_predictions:
                (out / f"{name}__{variant}.predictions.json").write_text(
                    json.dumps({sid: [*map(float, inverse_values(v)[0]), int(inverse_values(v)[1])]
                                for sid, v in p.items()}))
            summary.append(score(task, p, name, variant, out))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


def score(task: InverseTask, preds: dict, name: str, variant: str, out: Path) -> dict:
    """Score one model's answers of a variant through the harness, write its results JSON and
    print (and return) its summary row."""
    res = task.evaluate(preds, model=name)
    res.write(out / f"{name}__{variant}.json")
    o = res.overall
    row = {"model": name, "variant": variant, "n": res.n_samples, "failed": res.n_failed,
           "joint_paper": o["joint_accuracy_paper"], "sg_acc": o["spacegroup_accuracy"],
           "per_radius_joint_min": min(v["joint_accuracy_paper"]["mean"]
                                       for v in res.data["metrics"]["per_radius"].values())}
    print(json.dumps({k: (v["mean"], v["ci95"]) if isinstance(v, dict) else v for k, v in row.items()}), flush=True)
    return row


def merge_predictions(task: InverseTask, args: argparse.Namespace, out: Path) -> int:
    """``--merge-predictions``: the answers of every model and variant found in the folders,
    joined (each of this run's rows answered by exactly one folder or by none; a row
    answered twice, or an answer of a row outside this run, is an error), scored together."""
    folders = [Path(f) for f in args.merge_predictions.split(",") if f]
    summary = []
    for variant in args.variants.split(","):
        ids = {q.sample_id for q in task.perturbed_queries(seed=args.seed, **VARIANTS[variant])}
        names = sorted({f.name.split("__")[0] for d in folders for f in d.glob(f"*__{variant}.predictions.json")})
        if not names:
            print(f"--merge-predictions: no *__{variant}.predictions.json in {args.merge_predictions}", file=sys.stderr)
            return 2
        for name in names:
            merged: dict[str, InversePrediction] = {}
            for d in folders:
                f = d / f"{name}__{variant}.predictions.json"
                if not f.is_file():
                    print(f"{f}: missing (every folder must answer every model)", file=sys.stderr)
                    return 2
                part = json.loads(f.read_text())
                twice = set(part) & set(merged)
                outside = set(part) - ids
                if twice or outside:
                    print(f"{f}: {len(twice)} rows answered twice, {len(outside)} rows outside this run",
                          file=sys.stderr)
                    return 2
                merged.update({sid: InversePrediction.from_values(v[:6], int(v[6])) for sid, v in part.items()})
            summary.append(score(task, merged, name, variant, out))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
