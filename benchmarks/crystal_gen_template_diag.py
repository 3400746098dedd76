"""Read-out and rank of template-sampled cells, re-done from a candidate dump and scored
through the harness (docs/inverse_results.md, session 8).

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/crystal_gen_template_diag.py out/strict.h5 \
        out/diag_a/diffcsp-inverse__clean.candidates.json --variant clean --every 2 --spacegroups 62,167

The dump must come from ``benchmarks/inverse_heldout.py --dump-candidates`` with the same
``--split`` / ``--per-group`` / ``--every`` / ``--offset`` / ``--spacegroups`` / variant (it
holds the generated cells).
Per candidate: the space group spglib reads at each tolerance of a ladder (0.005 Å down to
1e-4 Å), the template's group, the profile mismatch and the best isotropic stretch of the
cell against the particle's pair profile. Rules (all see only the candidates and the
particle): ``tight-profile`` (the session-7 rule), ``template-profile`` (the template's group
read on the ladder), ``template-stretch`` (the same, ranked by the stretched mismatch and the
answer's lengths multiplied by the stretch). The targets are read by the harness and by the
diagnostic columns (right candidate exists / chosen), never by a rule.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from c2np.metrics import inverse_metrics
from c2np.models.inverse.ranking import best_scale_mismatch, particle_pair_profile
from c2np.models.inverse.readout import SYMPREC_TEMPLATE_LADDER_ANGSTROM, read_cell_to_prediction
from c2np.particle_descriptor import describe, position_noise_angstrom
from c2np.predictions import InversePrediction
from c2np.tasks import InverseTask

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inverse_heldout import TRAINING_MATERIALS, VARIANTS, open_rows  # noqa: E402


def right(params: np.ndarray, sg: int, target) -> bool:
    """Right at the paper tolerance, by the harness's own rule (:func:`c2np.metrics.inverse_metrics`)."""
    return inverse_metrics(params, sg, target).values.get("joint_accuracy_paper") == 1.0


def ladder(lat: np.ndarray, frac: np.ndarray, numbers: np.ndarray) -> list[int]:
    out = []
    for tol in SYMPREC_TEMPLATE_LADDER_ANGSTROM:
        r = read_cell_to_prediction(lat, frac, numbers, sweep_angstrom=[tol], rule="tight")
        out.append(0 if r is None else r[1])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store")
    ap.add_argument("dump")
    ap.add_argument("--variant", default="clean", choices=list(VARIANTS))
    ap.add_argument("--per-group", type=int, default=1)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--split", default="heldout", help=f"a split, or {TRAINING_MATERIALS!r}")
    ap.add_argument("--spacegroups", default="")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-pair-angstrom", type=float, default=0.7)
    ap.add_argument("--out", default="")
    ap.add_argument("--write", default="", help="with --margins: write each margin's results JSON here")
    ap.add_argument("--margins", default="",
                    help="instead: re-choose from a rank-'refine' dump with these symmetric margins "
                         "(crystal_gen.choose_candidate) and score each through the harness")
    ap.add_argument("--rel-margins", default="0",
                    help="with --margins: relative symmetric margins (symmetric_margin_rel)")
    ap.add_argument("--noise-margins", default="0",
                    help="with --margins: symmetric margins per Å of the particle's noise estimate "
                         "(symmetric_margin_per_angstrom); every (margin, relative, per-Å) triple is scored")
    args = ap.parse_args()
    task = open_rows(args.store, args.split, args.per_group, args.every, args.offset)
    if task is None:
        return 2
    if args.spacegroups:
        keep = {int(x) for x in args.spacegroups.split(",")}
        task._rows = np.array([r for r in task._rows if task._target(int(r)).spacegroup in keep], dtype=np.int64)
    dump = {r["sample_id"]: r for r in json.loads(Path(args.dump).read_text())}
    if args.margins:
        triples = [(float(m), float(r), float(k)) for m in args.margins.split(",")
                   for r in args.rel_margins.split(",") for k in args.noise_margins.split(",")]
        noise: dict[str, float] = {}
        if any(k for _, _, k in triples):   # the particles' own estimate, from the same queries
            noise = {q.sample_id: position_noise_angstrom(q.particle)
                     for q in task.perturbed_queries(seed=args.seed, **VARIANTS[args.variant])}
        return rechoose(task, dump, triples, args.min_pair_angstrom, args.write, args.variant, noise)
    targets = {task._query(int(r)).sample_id: task._target(int(r)) for r in task._rows}
    rules = ("tight-profile", "template-profile", "template-stretch", "template-stretch-only-lengths")
    preds: dict[str, dict] = {k: {} for k in rules}
    stats: Counter = Counter()
    per_row = []
    for q in task.perturbed_queries(seed=args.seed, **VARIANTS[args.variant]):
        row = dump[q.sample_id]
        tgt = targets[q.sample_id]
        d = describe(q.particle)
        prof = particle_pair_profile(q.particle, d)
        cands = []
        for c in row["candidates"]:
            if c["min_pair_angstrom"] < args.min_pair_angstrom:
                continue
            lat, frac, slots = np.asarray(c["lattice_angstrom"]), np.asarray(c["frac"]), np.asarray(c["slots"])
            numbers = d.slot_numbers[slots]
            numbers = np.where(numbers == 0, d.slot_numbers[0], numbers)
            tsg = int(c["template_spacegroup"])
            rt = read_cell_to_prediction(lat, frac, numbers, rule="template", template_spacegroup=tsg)
            lam, smis = best_scale_mismatch(prof, lat, frac, slots, d.scale_angstrom)
            p_t = rt[0] if rt else np.asarray(c["params"])
            sg_t = rt[1] if rt else int(c["spacegroup"])
            p_s = p_t.copy()
            p_s[:3] *= lam
            cands.append({"tsg": tsg, "tight": (np.asarray(c["params"]), int(c["spacegroup"])),
                          "template": (p_t, sg_t), "stretch": (p_s, sg_t), "mis": float(c["mismatch"]),
                          "smis": smis, "lam": lam, "ladder": ladder(lat, frac, numbers)})
        if not cands:
            continue
        a = min(cands, key=lambda x: x["mis"])
        b = min(cands, key=lambda x: x["smis"])
        choice = {"tight-profile": a["tight"], "template-profile": a["template"], "template-stretch": b["stretch"],
                  "template-stretch-only-lengths": a["stretch"]}
        for k, (p, sg) in choice.items():
            preds[k][q.sample_id] = InversePrediction.from_values([float(x) for x in p], int(sg))
        g = tgt.spacegroup
        stats[(g, "rows")] += 1
        for kind in ("tight", "template", "stretch"):
            if any(right(*c[kind], tgt) for c in cands):
                stats[(g, f"right-{kind}-exists")] += 1
        same = [c for c in cands if c["tsg"] == g]
        stats[(g, "right-template-chosen-by-mis")] += int(a["tsg"] == g)
        stats[(g, "right-template-chosen-by-smis")] += int(b["tsg"] == g)
        for c in same:
            stats[(g, f"template-cand-ladder {c['ladder']}")] += 1
        per_row.append({"sample_id": q.sample_id, "target_sg": g, "target": tgt.parameters.as_array().round(3).tolist(),
                        "cands": [{"tsg": c["tsg"], "tight_sg": c["tight"][1], "ladder": c["ladder"],
                                   "params": np.round(c["template"][0], 3).tolist(), "mis": round(c["mis"], 4),
                                   "smis": round(c["smis"], 4), "lam": c["lam"]} for c in cands]})
    for k in sorted(stats, key=str):
        print(k, stats[k])
    for name, p in preds.items():
        res = task.evaluate(p, model=name, n_resamples=200)
        per = res.data["metrics"].get("per_spacegroup", {})
        print(name, round(res.overall["joint_accuracy_paper"]["mean"], 3),
              {g: round(v["joint_accuracy_paper"]["mean"], 3) for g, v in per.items()})
    if args.out:
        Path(args.out).write_text(json.dumps(per_row, indent=0))
    return 0


def rechoose(task: InverseTask, dump: dict, margins: list[tuple[float, float, float]], min_pair: float,
             write: str = "", variant: str = "clean", noise: dict[str, float] | None = None) -> int:
    """Score ``choose_candidate`` (rank 'refine') at each (symmetric margin, relative margin,
    margin per Å of noise) from the dump (``noise``: sample id -> the particle's
    ``position_noise_angstrom``); with ``write``, each triple's results JSON goes to
    ``write/margin{m}[_rel{r}][_noise{k}]/`` (no suffix for 0: the earlier sessions' folders)."""
    from c2np.models.inverse.choice import Candidate, choose_candidate
    from c2np.models.inverse.templates import load_templates

    n_ops = {t.spacegroup: len(t.rotations) for t in load_templates("pretrained/diffcsp-inverse") or []}
    for m, rel, per_a in margins:
        tag = f"margin{m}" + (f"_rel{rel}" if rel else "") + (f"_noise{per_a}" if per_a else "")
        preds = {}
        for sid, r in dump.items():
            cands = [Candidate(tuple(c["composition"]), np.asarray(c["params"]), int(c["spacegroup"]),
                               float(c["min_pair_angstrom"]), float(c["mismatch"]), float(c["composition_logprob"]),
                               float(c["volume_angstrom3"]), int(c["template_spacegroup"]), None,
                               int(c.get("n_operations", n_ops.get(int(c["template_spacegroup"]), 0))))
                     for c in r["candidates"]]   # dumps before session 8's n_operations: the templates' count
            p = choose_candidate(cands, rule="refine", min_pair_angstrom=min_pair, symmetric_margin=m,
                                 symmetric_margin_rel=rel, symmetric_margin_per_angstrom=per_a,
                                 noise_angstrom=(noise or {})[sid] if per_a else 0.0)
            if p is not None:
                preds[sid] = p
        res = task.evaluate(preds, model="diffcsp-inverse" if write else tag)
        if write:
            Path(write, tag).mkdir(parents=True, exist_ok=True)
            res.write(Path(write, tag, f"diffcsp-inverse__{variant}.json"))
        o = res.overall["joint_accuracy_paper"]
        per = res.data["metrics"].get("per_spacegroup", {})
        rad = res.data["metrics"]["per_radius"]
        print(f"margin {m} rel {rel} noise {per_a}: joint {o['mean']:.3f} {np.round(o['ci95'], 3).tolist()}",
              {g: round(v["joint_accuracy_paper"]["mean"], 3) for g, v in per.items()},
              "per-radius min", round(min(v["joint_accuracy_paper"]["mean"] for v in rad.values()), 3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
