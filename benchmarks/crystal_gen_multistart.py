"""Multi-start refinement (``refine_to_profile(shape_starts=...)``) tried on the candidates of
a rank-'refine' candidate dump, scored through the harness (docs/inverse_results.md, session 9).

    OMP_NUM_THREADS=1 nice -n 10 env PYTHONPATH=src python benchmarks/crystal_gen_multistart.py \
        out/strict.h5 out/s8/s8_full/diffcsp-inverse__clean.candidates.json --every 2 --materials KBaH3

The dump (``benchmarks/inverse_heldout.py --dump-candidates``, same split / ``--every`` /
``--offset`` / variant) holds each candidate's cell; its ``refine_top`` template candidates of
smallest mismatch are re-refined from their dumped (already refined) cells, once as they are
(the control), once with the shape starts (``--shape-starts ""``: not) and, with
``--coord-plan N[:AMPS]``, once per plan with N Wyckoff-coordinate starts (session 16); each
set of candidates is answered by the production ``choose_candidate`` and scored by
``InverseTask.evaluate`` on the rows kept. ``--materials`` keeps the rows of those materials
(a diagnostic subset named by the user).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from c2np.models.inverse.choice import Candidate, choose_candidate
from c2np.models.inverse.io import load_generator
from c2np.models.inverse.ranking import particle_pair_profile, refine_to_profile
from c2np.models.inverse.templates import CellTemplate, load_templates
from c2np.particle_descriptor import describe, position_noise_angstrom  # noqa: E402
from inverse_heldout import VARIANTS, open_rows  # noqa: E402


def template_for(c: dict, templates: list[CellTemplate]) -> CellTemplate | None:
    """The template whose operations map the candidate's cell onto itself (same group, slots)."""
    f = np.asarray(c["frac"]) % 1.0
    for t in templates:
        if t.spacegroup != int(c["template_spacegroup"]) or len(t.slots) != len(f) \
                or not np.array_equal(t.slots, np.asarray(c["slots"])):
            continue
        img = np.einsum("gij,nj->gni", t.rotations, f) + t.translations[:, None, :]
        d = img - f[t.perm]
        if np.abs(d - np.round(d)).max() < 1e-3:
            return t
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store")
    ap.add_argument("dump")
    ap.add_argument("--generator", default="pretrained/diffcsp-inverse")
    ap.add_argument("--variant", default="clean", choices=list(VARIANTS))
    ap.add_argument("--split", default="heldout")
    ap.add_argument("--per-group", type=int, default=1)
    ap.add_argument("--every", type=int, default=2)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--materials", default="", help="comma-separated: keep only their rows")
    ap.add_argument("--shape-starts", default="0.1,0.2,0.3,0.4")
    ap.add_argument("--write", default="",
                    help="write each row's results JSON to WRITE/<row>/diffcsp-inverse__VARIANT.json")
    ap.add_argument("--coord-plan", action="append", default=[], metavar="N[:AMPS]",
                    help="also a row re-refined with N Wyckoff-coordinate starts, combined with the shape "
                         "starts AMPS (comma-separated; none when omitted); repeatable, e.g. "
                         "--coord-plan 32 --coord-plan 32:0.2,0.4")
    ap.add_argument("--refine-top", type=int, default=None, help="candidates re-refined (default: the generator's)")
    ap.add_argument("--refine-evals", type=int, default=None, help="profiles per refinement (default: the generator's)")
    ap.add_argument("--symmetric-margin", type=float, default=None, help="default: the generator's")
    args = ap.parse_args()
    task = open_rows(args.store, args.split, args.per_group, args.every, args.offset)
    if task is None:
        return 2
    rec = task._store.recipes
    if args.materials:
        keep = set(args.materials.split(","))
        task._rows = np.array([r for r in task._rows if rec.materials[rec.material_index[r]] in keep], dtype=np.int64)
        if len(task._rows) == 0:
            print(f"--materials {args.materials}: no row of these materials", file=sys.stderr)
            return 2
    gen = load_generator(args.generator)
    cfg = gen.cfg
    margin = cfg.symmetric_margin if args.symmetric_margin is None else args.symmetric_margin
    templates = load_templates(args.generator) or []
    amps = [float(x) for x in args.shape_starts.split(",") if x]  # "": no shape-starts row
    top = cfg.refine_top if args.refine_top is None else args.refine_top
    evals = cfg.refine_evals if args.refine_evals is None else args.refine_evals
    dump = {r["sample_id"]: r for r in json.loads(Path(args.dump).read_text())}
    plans: list[tuple[str, tuple[float, ...] | None, int]] = [
        ("dumped", None, 0), ("re-refined", (), 0)] + ([("shape-starts", tuple(amps), 0)] if amps else [])
    for spec in args.coord_plan:
        n_txt, _, amp_txt = spec.partition(":")
        try:
            n_coord, coord_amps = int(n_txt), tuple(float(x) for x in amp_txt.split(",") if x)
        except ValueError:
            n_coord = -1
        if n_coord < 1:
            print(f"--coord-plan {spec!r}: expected N or N:AMP,AMP,... with N >= 1", file=sys.stderr)
            return 2
        plans.append((f"coord-starts {spec}", coord_amps, n_coord))
    preds: dict[str, dict] = {name: {} for name, _, _ in plans}
    t0 = time.process_time()
    for q in task.perturbed_queries(seed=args.seed, **VARIANTS[args.variant]):
        d = describe(q.particle)
        prof = particle_pair_profile(q.particle, d)
        raw = dump[q.sample_id]["candidates"]
        cands = [Candidate(tuple(c["composition"]), np.asarray(c["params"]), int(c["spacegroup"]),
                           float(c["min_pair_angstrom"]), float(c["mismatch"]), float(c["composition_logprob"]),
                           float(c["volume_angstrom3"]), int(c["template_spacegroup"]), None, int(c["n_operations"]))
                 for c in raw]
        ok = [k for k, c in enumerate(raw) if "frac" in c and c["min_pair_angstrom"] >= cfg.min_pair_angstrom]
        order = sorted(ok, key=lambda k: raw[k]["mismatch"])[:top]
        for name, starts, n_coord in plans:
            out = list(cands)
            for k in order if starts is not None else []:
                c = raw[k]
                t = template_for(c, templates)
                if t is None:
                    continue
                lat, frac, mis = refine_to_profile(prof, t, np.asarray(c["lattice_angstrom"]), np.asarray(c["frac"]),
                                                   np.asarray(c["slots"]), d.scale_angstrom,
                                                   max_evals=evals, shape_starts=starts, coord_starts=n_coord)
                sl = np.asarray(c["slots"])
                new = gen._read(lat, frac, sl, gen.cell_of(np.zeros((3, 3)), frac, sl, d)[2], cands[k].composition,
                                cands[k].composition_logprob, t, mis)   # the production read-out
                if new is not None and new.min_pair_angstrom >= cfg.min_pair_angstrom:
                    out[k] = new
            p = choose_candidate(out, rule="refine", min_pair_angstrom=cfg.min_pair_angstrom, symmetric_margin=margin,
                                 symmetric_margin_rel=cfg.symmetric_margin_rel,
                                 symmetric_margin_per_angstrom=cfg.symmetric_margin_per_angstrom,
                                 noise_angstrom=position_noise_angstrom(q.particle))
            if p is not None:
                preds[name][q.sample_id] = p
    print(f"{len(task._rows)} rows, {time.process_time() - t0:.0f} CPU s; margin {margin}, "
          f"refine top {top} x {evals} profiles, "
          f"shape starts {amps}; coordinate plans {args.coord_plan}", flush=True)
    for name, p in preds.items():
        res = task.evaluate(p, model="diffcsp-inverse" if args.write else name)
        if args.write:
            folder = Path(args.write, name.replace(" ", "_").replace(":", "_").replace(",", "-"))
            folder.mkdir(parents=True, exist_ok=True)
            res.write(folder / f"diffcsp-inverse__{args.variant}.json")
        o = res.overall["joint_accuracy_paper"]
        per = res.data["metrics"].get("per_material", {})
        print(f"{name}: joint {o['mean']:.3f} {np.round(o['ci95'], 3).tolist()}",
              {m: round(v["joint_accuracy_paper"]["mean"], 3) for m, v in per.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
