"""Candidate-selection rules of a crystal generator, scored through the harness from the
candidates that ``benchmarks/inverse_heldout.py --dump-candidates`` wrote
(docs/inverse_results.md, session 6).

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/crystal_gen_rank_rules.py out/strict.h5 \
        out/rank_a/diffcsp-inverse__clean.candidates.json --variant clean --every 2 --out out/rank_rules

The rows must be the dump's (same ``--per-group`` / ``--every`` / variant). Every rule sees
only the candidates (generated cells read by spglib, their validity, pair-profile mismatch,
count-head log-probability and volume) and the particle's atom count and radius; the
targets are used by the harness and by the ``oracle`` diagnostic (any candidate right; not a
model). A candidate's sample index is its rank among the candidates of its composition (an
unreadable cell, left out of the dump, shifts it).

Rules (``-K``: the first K samples of each composition):
* ``head-vote-K``: the count head's composition, vote (the shipped rule at K = 1).
* ``head-profile-K``: the count head's composition, smallest mismatch.
* ``all-profile-K``: every composition, smallest mismatch.
* ``density-profile-K``: the composition whose candidates' median atoms per volume is
  nearest (in log) the particle's ``n / (4/3 pi R^3)``, then smallest mismatch.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from c2np.models.inverse.choice import Candidate, choose_candidate
from c2np.tasks import InverseTask


def load(path: Path) -> list[dict]:
    rows = json.loads(path.read_text())
    for r in rows:
        seen: Counter = Counter()
        cands = []
        for c in r["candidates"]:
            comp = tuple(c["composition"])
            cands.append((seen[comp], Candidate(comp, np.asarray(c["params"]), int(c["spacegroup"]),
                                                float(c["min_pair_angstrom"]), float(c["mismatch"]),
                                                float(c["composition_logprob"]), float(c["volume_angstrom3"]))))
            seen[comp] += 1
        r["cands"] = cands
    return rows


def rule(name: str, r: dict, k: int, min_pair: float):
    cands = [c for s, c in r["cands"] if s < k]
    if not cands:
        return None
    if name.startswith("head"):
        best = max(c.composition_logprob for c in cands)
        cands = [c for c in cands if c.composition_logprob == best]
    if name.startswith("density"):
        rho = r["n_atoms"] / (4.0 / 3.0 * np.pi * r["radius_angstrom"] ** 3)
        by: dict = {}
        for c in cands:
            by.setdefault(c.composition, []).append(sum(c.composition) / max(c.volume_angstrom3, 1e-9))
        comp = min(by, key=lambda cp: abs(np.log(np.median(by[cp]) / rho)))
        cands = [c for c in cands if c.composition == comp]
    return choose_candidate(cands, rule="vote" if name.endswith("vote") else "profile",
                            min_pair_angstrom=min_pair)


def true_composition(task: InverseTask, row: int, desc) -> tuple[int, ...]:
    """Atoms per species slot of the target's standardized primitive cell (what the
    generator is trained to produce), as in crystal_gen_heldout_z.py."""
    import spglib

    rec = task._store.recipes
    cell = task._store.cells[rec.materials[int(rec.material_index[row])]]
    std = spglib.standardize_cell(cell.to_spglib(), to_primitive=True, symprec=1e-3)  # type: ignore[arg-type]
    assert std is not None
    slot_by_z = {int(z): int(s) for z, s in zip(desc.numbers, desc.slot_of)}
    return tuple(int(sum(slot_by_z.get(int(z), 2) == k for z in std[2])) for k in range(3))


def true_cell_check(task: InverseTask, ids: list[str], rows: dict, variant: str, seed: int = 0) -> None:
    """Diagnostic of the criterion itself: per target group, on how many rows the target's own
    standardized primitive cell (the material's true crystal) has a smaller pair-profile
    mismatch than every wrong candidate, i.e. would be chosen had it been generated."""
    from c2np.models.inverse.examples import cell_example
    from c2np.models.inverse.ranking import cell_pair_profile, particle_pair_profile, profile_mismatch
    from c2np.particle_descriptor import describe
    from inverse_heldout import VARIANTS

    rec = task._store.recipes
    wins: Counter = Counter()
    for q, sid, row in zip(task.perturbed_queries(seed=seed, **VARIANTS[variant]), ids, task._rows):
        t = task._target(int(row))
        d = describe(q.particle)
        ex = cell_example(d, task._store.cells[rec.materials[int(rec.material_index[int(row)])]])
        m_true = profile_mismatch(particle_pair_profile(q.particle, d),
                                  cell_pair_profile(ex.lattice_angstrom, ex.frac, ex.slots, d.scale_angstrom))
        wrong = [c.mismatch for _, c in rows[sid]["cands"]
                 if not (c.spacegroup == t.spacegroup and np.all(np.abs(c.params[:3] - t.params[:3]) <= 0.5)
                         and np.all(np.abs(c.params[3:] - t.params[3:]) <= 0.5))]
        wins[(t.spacegroup, bool(m_true < min(wrong, default=np.inf)))] += 1
    print("target cell beats every wrong candidate, per target group:",
          {sg: f"{wins[(sg, True)]}/{wins[(sg, True)] + wins[(sg, False)]}" for sg in sorted({k[0] for k in wins})})


def z_table(task: InverseTask, ids: list[str], rows: dict, min_pair: float) -> None:
    """Is the composition (Z) each rule ends with the target's? Printed per target group."""
    from c2np.particle_descriptor import describe

    hits: Counter = Counter()
    for q, sid, row in zip(task.queries(), ids, task._rows):
        true = true_composition(task, int(row), describe(q.particle))
        sg = task._target(int(row)).spacegroup
        cands = [c for _, c in rows[sid]["cands"]]
        head = max(cands, key=lambda c: c.composition_logprob).composition
        valid = [c for c in cands if c.min_pair_angstrom >= min_pair] or cands
        prof = min(valid, key=lambda c: c.mismatch).composition
        r = rows[sid]
        rho = r["n_atoms"] / (4.0 / 3.0 * np.pi * r["radius_angstrom"] ** 3)
        by: dict = {}
        for c in cands:
            by.setdefault(c.composition, []).append(sum(c.composition) / max(c.volume_angstrom3, 1e-9))
        dens = min(by, key=lambda cp: abs(np.log(np.median(by[cp]) / rho)))
        for name, comp in (("head", head), ("density", dens), ("profile", prof)):
            hits[(sg, name, comp == true)] += 1
    for sg in sorted({k[0] for k in hits}):
        print(f"Z right, target {sg}:", {m: f"{hits[(sg, m, True)]}/{hits[(sg, m, True)] + hits[(sg, m, False)]}"
                                          for m in ("head", "density", "profile")})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store")
    ap.add_argument("dump")
    ap.add_argument("--variant", default="clean")
    ap.add_argument("--per-group", type=int, default=1)
    ap.add_argument("--every", type=int, default=2)
    ap.add_argument("--min-pair-angstrom", type=float, default=0.7)
    ap.add_argument("--out", default="out/rank_rules")
    args = ap.parse_args()
    task = InverseTask.open(args.store, split="heldout-dev", per_group=args.per_group)
    if args.every > 1:
        task._rows = task._rows[:: args.every]     # the dump's rows
    rows = {r["sample_id"]: r for r in load(Path(args.dump))}
    ids = [q.sample_id for q in task.queries()]
    if set(ids) != set(rows):
        print(f"{args.dump}: its sample ids are not this task's rows", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    kmax = max(s for r in rows.values() for s, _ in r["cands"]) + 1
    # oracle (diagnostic): is any candidate within the paper tolerance of the target?
    targets = {sid: task._target(int(row)) for sid, row in zip(ids, task._rows)}
    hit = Counter()
    for sid in ids:
        t = targets[sid]
        ok = any(c.spacegroup == t.spacegroup and np.all(np.abs(c.params[:3] - t.params[:3]) <= 0.5)
                 and np.all(np.abs(c.params[3:] - t.params[3:]) <= 0.5) for _, c in rows[sid]["cands"])
        hit[(t.spacegroup, ok)] += 1
    print("oracle (any candidate right), per target space group:",
          {sg: f"{hit[(sg, True)]}/{hit[(sg, True)] + hit[(sg, False)]}" for sg in sorted({k[0] for k in hit})})
    z_table(task, ids, rows, args.min_pair_angstrom)
    true_cell_check(task, ids, rows, args.variant)
    summary = []
    for k in range(1, kmax + 1):
        for name in ("head-vote", "head-profile", "all-profile", "density-profile"):
            preds = {}
            for sid in ids:
                p = rule(name, rows[sid], k, args.min_pair_angstrom)
                if p is not None:
                    preds[sid] = p
            res = task.evaluate(preds, model=f"{name}-{k}")
            res.write(out / f"{name}-{k}__{args.variant}.json")
            o = res.overall["joint_accuracy_paper"]
            per_sg = {sg: round(v["joint_accuracy_paper"]["mean"], 3)
                      for sg, v in sorted(res.data["metrics"]["per_spacegroup"].items())}
            row = {"rule": f"{name}-{k}", "variant": args.variant, "joint_paper": o["mean"], "ci95": o["ci95"],
                   "failed": res.n_failed, "per_spacegroup": per_sg}
            summary.append(row)
            print(json.dumps(row), flush=True)
    (out / f"summary__{args.variant}.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
