"""Scoring ``identify`` on a labelled corpus: right answers (a refusal or a crash is a miss;
a non-crystalline cluster is right only when refused), OVITO PTM's answer on the same file, the
lattice error against the particle's own mean lattice, the calibration of the confidence
(reliability table, expected calibration error), the targets, and the generated results page.

Rows are plain dicts: ``{"sample": ..., "outcome": ..., "right": ..., "ptm_right": ...,
"lattice_error": ...}`` as ``benchmarks/identify.py`` writes them to its results file.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SCHEMA", "calibration", "identify_right", "lattice_error", "markdown_tables", "own_lattice",
           "plot_calibration", "ptm_right", "refusal_reason", "standard_abc", "summarize", "targets",
           "write_page"]

SCHEMA = "c2np.identify-benchmark/1"
CONF_BINS = np.linspace(0.0, 1.0, 11)
HIGH_CONFIDENCE = 0.9
STANDARD_ROWS = {"CuAu": np.array([[0.5, 0.5, 0.0], [-0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])}


def own_lattice(ideal: np.ndarray, positions: np.ndarray, lattice_rows: np.ndarray) -> np.ndarray:
    """(3, 3) ``lattice_rows`` under the affine map that best takes the ideal positions (n, 3)
    onto the particle's (least squares): the particle's own mean lattice (Å, rows)."""
    x0 = ideal - ideal.mean(axis=0)
    x = positions - positions.mean(axis=0)
    m, *_ = np.linalg.lstsq(x0, x, rcond=None)
    return np.asarray(lattice_rows @ m)


def standard_abc(material: str, rows: np.ndarray) -> tuple[float, ...]:
    """Sorted a, b, c (Å) of the standardized conventional cell of the material's group."""
    std = STANDARD_ROWS.get(material, np.eye(3)) @ np.asarray(rows)
    return tuple(sorted(np.linalg.norm(std, axis=1).tolist()))


def identify_right(sample: dict[str, Any], outcome: dict[str, Any]) -> bool:
    """A crystal or particle: the expected space group; a cluster: no space group."""
    if sample["expected_spacegroup"] is None:
        return outcome["kind"] == "no answer"
    return bool(outcome["answered"] and outcome["spacegroup"] == sample["expected_spacegroup"])


def ptm_right(sample: dict[str, Any], ptm: dict[str, Any] | None) -> bool | None:
    """PTM recognises the particle's structure (and ordering); on a cluster, PTM is right when
    its majority type is no crystal structure (ico or other). None: not applicable."""
    if ptm is None or sample["group"] == "crystal":
        return None
    if sample["group"] == "cluster":
        return ptm["structure"] not in ("FCC", "HCP", "BCC")
    if ptm["structure"] != sample["ptm_structure"]:
        return False
    want = sample["ptm_ordering"]
    return want is None or (ptm["ordering"] or "").startswith(want)


def lattice_error(sample: dict[str, Any], outcome: dict[str, Any]) -> float | None:
    """Largest relative error of the sorted a, b, c against the particle's own lattice."""
    if not outcome["answered"] or sample["own_abc_angstrom"] is None:
        return None
    found = np.asarray(outcome["abc_angstrom"])
    own = np.asarray(sample["own_abc_angstrom"])
    return float(np.max(np.abs(found - own) / own))


def refusal_reason(outcome: dict[str, Any]) -> str:
    """The refusal's first clause, without numbers (a reason to count)."""

    text = re.sub(r"^(.*?\.extxyz: )?(solver input: )?", "", outcome["reason"])
    head = re.split(r"[:(;]", text, maxsplit=1)[0].strip()
    head = re.sub(r"[-+]?\d[\d.,eE-]*", "N", head)
    return f"{outcome['kind']}: {head[:90]}"


def calibration(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Reliability table over answered rows: per confidence bin the count, mean confidence and
    observed accuracy; expected calibration error (weighted mean |accuracy - confidence|)."""
    answered = [r for r in rows if r["outcome"]["answered"]]
    conf = np.array([r["outcome"]["confidence"] for r in answered], dtype=float)
    right = np.array([r["right"] for r in answered], dtype=float)
    bins = []
    ece = 0.0
    for lo, hi in zip(CONF_BINS[:-1], CONF_BINS[1:]):
        m = (conf >= lo) & ((conf < hi) if hi < 1.0 else (conf <= hi))
        if not m.any():
            bins.append({"lo": float(lo), "hi": float(hi), "n": 0, "confidence": None, "accuracy": None})
            continue
        acc, mc = float(right[m].mean()), float(conf[m].mean())
        ece += m.sum() / max(len(conf), 1) * abs(acc - mc)
        bins.append({"lo": float(lo), "hi": float(hi), "n": int(m.sum()), "confidence": mc, "accuracy": acc})
    return {"n_answered": len(answered), "ece": float(ece) if len(conf) else None, "bins": bins}


#: variant -> the share of particles at R >= 12 Å to answer right (the targets of the benchmark)
PARTICLE_TARGETS = {"relaxed": 1.0, "md300": 0.95, "md600": 0.90, "vacancies": 0.90, "antisites": 0.90}
TARGET_RADIUS_ANGSTROM = 12.0


def targets(rows: list[dict[str, Any]], cal: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target: what, the measured value, the goal, met or not."""
    out: list[dict[str, Any]] = []

    def add(what: str, value: float | None, goal: str, met: bool) -> None:
        out.append({"target": what, "value": value, "goal": goal, "met": bool(met)})

    crystals = [r for r in rows if r["sample"]["group"] == "crystal"]
    if crystals:
        acc = sum(r["right"] for r in crystals) / len(crystals)
        add("public crystals: exact space group", acc, ">= 0.97", acc >= 0.97)
    big = [r for r in rows if r["sample"]["group"] == "particle"
           and r["sample"]["radius_angstrom"] >= TARGET_RADIUS_ANGSTROM]
    for variant, goal in PARTICLE_TARGETS.items():
        rs = [r for r in big if r["sample"]["variant"] == variant]
        if rs:
            acc = sum(r["right"] for r in rs) / len(rs)
            add(f"particles R >= {TARGET_RADIUS_ANGSTROM:g} Å, {variant}: right space group", acc, f">= {goal:g}",
                acc >= goal)
    for variant in sorted({r["sample"]["variant"] for r in big}):
        rs = [r for r in big if r["sample"]["variant"] == variant and r["ptm_right"] is not None]
        if rs:
            ours, theirs = sum(r["right"] for r in rs) / len(rs), sum(r["ptm_right"] for r in rs) / len(rs)
            add(f"particles R >= {TARGET_RADIUS_ANGSTROM:g} Å, {variant}: at least PTM's rate ({theirs:.2f})", ours,
                f">= {theirs:.2f}", ours >= theirs)
    clusters = [r for r in rows if r["sample"]["group"] == "cluster"]
    if clusters:
        given = sum(r["outcome"]["answered"] for r in clusters)
        add("non-crystalline clusters: space groups given", given, "0", given == 0)
    wrong = sum(1 for r in rows if r["outcome"]["answered"] and not r["right"]
                and r["outcome"]["confidence"] >= HIGH_CONFIDENCE)
    add(f"wrong answers at confidence >= {HIGH_CONFIDENCE}", wrong, "0", wrong == 0)
    if cal["ece"] is not None:
        add("expected calibration error", cal["ece"], "<= 0.05", cal["ece"] <= 0.05)
    errs = [r["lattice_error"] for r in big if r["right"] and r["lattice_error"] is not None]
    if errs:
        med = float(np.median(errs))
        add(f"particles R >= {TARGET_RADIUS_ANGSTROM:g} Å: median lattice error against their own lattice", med,
            "<= 0.003", med <= 0.003)
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Every table of the page from the per-sample rows."""
    recog: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        s = r["sample"]
        cells[(s["variant"], f"{s['radius_angstrom']:g}")].append(r)
    for (variant, radius), rs in sorted(cells.items()):
        ptm = [r["ptm_right"] for r in rs if r["ptm_right"] is not None]
        recog[variant][radius] = {"n": len(rs), "identify": sum(r["right"] for r in rs),
                                  "ptm": sum(ptm) if ptm else None, "ptm_n": len(ptm)}
    lat: dict[str, dict[str, Any]] = {}
    by_variant: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r["right"] and r["lattice_error"] is not None:
            by_variant[r["sample"]["variant"]].append(r["lattice_error"])
    for v, errs in sorted(by_variant.items()):
        lat[v] = {"n": len(errs), "median": float(np.median(errs)), "p90": float(np.percentile(errs, 90))}
    wrong_high = [{"id": r["sample"]["id"], "expected": r["sample"]["expected_spacegroup"],
                   "found": r["outcome"]["spacegroup"], "confidence": r["outcome"]["confidence"]}
                  for r in rows if r["outcome"]["answered"] and not r["right"]
                  and r["outcome"]["confidence"] >= HIGH_CONFIDENCE]
    refusals = Counter(refusal_reason(r["outcome"]) for r in rows if not r["outcome"]["answered"])
    times: dict[str, dict[str, Any]] = {}
    for group in ("crystal", "particle", "cluster"):
        t = [r["outcome"]["seconds"] for r in rows if r["sample"]["group"] == group]
        p = [r["outcome"]["ptm"]["seconds"] for r in rows if r["sample"]["group"] == group and r["outcome"]["ptm"]]
        if t:
            times[group] = {"n": len(t), "median_s": float(np.median(t)), "p90_s": float(np.percentile(t, 90)),
                            "ptm_median_s": float(np.median(p)) if p else None}
    extra_keys = sorted({k for r in rows for k in r["outcome"]["extra"]})
    cal = calibration(rows)
    return {"recognition": recog, "calibration": cal, "targets": targets(rows, cal), "lattice_error": lat,
            "wrong_high_confidence": wrong_high, "refusals": dict(refusals.most_common()), "time": times,
            "optional_result_fields": extra_keys,
            "totals": {g: {"n": sum(1 for r in rows if r["sample"]["group"] == g),
                           "right": sum(r["right"] for r in rows if r["sample"]["group"] == g),
                           "crashes": sum(r["outcome"]["kind"] == "crash" for r in rows
                                          if r["sample"]["group"] == g)}
                       for g in ("crystal", "particle", "cluster")}}


# --- tables, page and plot --------------------------------------------------------------------------

VARIANT_ORDER = ("crystal", "relaxed", "md300", "md300-avg", "md600", "md600-avg", "vacancies", "antisites",
                 "noise", "icosahedron", "decahedron", "amorphous")


def _frac(k: int | None, n: int) -> str:
    return "—" if k is None or n == 0 else f"{k}/{n} ({k / n:.0%})"


def markdown_tables(results: dict[str, Any]) -> str:
    """The page body (Markdown tables) from a results document."""
    s = results["summary"]
    radii = sorted({r for v in s["recognition"].values() for r in v}, key=float)
    ptm_note = "" if results["ptm"] else " (OVITO not installed: no PTM column)"
    lines = ["## Targets", "", "| target | measured | goal | met |", "|---|---:|---:|---|"]
    for t in s.get("targets", []):
        v = t["value"]
        shown = f"{v:.4f}" if isinstance(v, float) else str(v)
        lines.append(f"| {t['target']} | {shown} | {t['goal']} | {'yes' if t['met'] else '**no**'} |")
    lines += ["", f"## Recognition per variant and radius{ptm_note}", "",
             "Right: the expected space group (crystals and particles); no space group (clusters). "
             "Each cell: identify | PTM (majority structure type, and ordering for the alloys).", "",
             "| variant | " + " | ".join(f"R = {r} Å" for r in radii) + " |",
             "|---|" + "---|" * len(radii)]
    for v in sorted(s["recognition"], key=lambda x: VARIANT_ORDER.index(x) if x in VARIANT_ORDER else 99):
        row = [v]
        for r in radii:
            c = s["recognition"][v].get(r)
            row.append("" if c is None else f"{_frac(c['identify'], c['n'])} \\| {_frac(c['ptm'], c['ptm_n'])}")
        lines.append("| " + " | ".join(row) + " |")
    cal = s["calibration"]
    ece = "—" if cal["ece"] is None else f"{cal['ece']:.3f}"
    lines += ["", "## Calibration", "", f"{cal['n_answered']} answers; expected calibration error **{ece}**.",
              "", "| confidence | answers | mean confidence | accuracy |", "|---|---:|---:|---:|"]
    for b in cal["bins"]:
        mc = "" if b["confidence"] is None else f"{b['confidence']:.3f}"
        acc = "" if b["accuracy"] is None else f"{b['accuracy']:.3f}"
        lines.append(f"| {b['lo']:.1f}–{b['hi']:.1f} | {b['n']} | {mc} | {acc} |")
    lines += ["", "![Calibration of identify's confidence](identify_calibration.png)", "",
              f"## Wrong answers at confidence ≥ {HIGH_CONFIDENCE}", ""]
    wrong = s["wrong_high_confidence"]
    if wrong:
        lines += [f"{len(wrong)} wrong answers.", "", "| particle | expected | found | confidence |",
                  "|---|---:|---:|---:|"]
        lines += [f"| {w['id']} | {w['expected'] if w['expected'] is not None else 'none'} | {w['found']} | "
                  f"{w['confidence']:.3f} |" for w in wrong[:40]]
    else:
        lines.append("None.")
    lines += ["", "## Lattice error against the particle's own lattice", "",
              "Largest relative error of the sorted a, b, c, over right answers.", "",
              "| variant | answers | median | 90th percentile |", "|---|---:|---:|---:|"]
    for v, e in s["lattice_error"].items():
        lines.append(f"| {v} | {e['n']} | {e['median']:.3%} | {e['p90']:.3%} |")
    lines += ["", "## Refusals by reason", "", "| reason | count |", "|---|---:|"]
    lines += [f"| {reason.replace('|', '/')} | {n} |" for reason, n in s["refusals"].items()] or ["| none | 0 |"]
    lines += ["", "## Time per particle", "", "| group | particles | identify median (s) | identify p90 (s) | "
              "PTM median (s) |", "|---|---:|---:|---:|---:|"]
    for g, t in s["time"].items():
        ptm = "—" if t["ptm_median_s"] is None else f"{t['ptm_median_s']:.3f}"
        lines.append(f"| {g} | {t['n']} | {t['median_s']:.3f} | {t['p90_s']:.3f} | {ptm} |")
    if s["optional_result_fields"]:
        lines += ["", "Further result fields recorded in the results file: "
                  + ", ".join(f"`{k}`" for k in s["optional_result_fields"]) + "."]
    return "\n".join(lines) + "\n"


def write_page(results: dict[str, Any], page: Path) -> None:
    """The generated docs page (``page``, Markdown) and its calibration plot beside it."""
    from c2np.fileio import write_text

    totals = results["summary"]["totals"]
    n_crystals = len({r["sample"]["material"] for r in results["rows"] if r["sample"]["group"] == "crystal"})
    head = ["# identify on crystals and particles no one here made", "",
            "<!-- generated by benchmarks/identify.py from " + results["results_file"] + "; do not edit -->", "",
            "How the corpus is made and scored: [How identify works](../explanation/identify.md#the-benchmark). "
            f"Corpus: {n_crystals} public crystals ({totals['crystal']['n']} carvings), "
            f"{totals['particle']['n']} EMT particles, "
            f"{totals['cluster']['n']} non-crystalline clusters"
            f"{' (quick run)' if results['quick'] else ''}; c2np {results['c2np_version']}"
            f"{', OVITO ' + results['ptm'] if results['ptm'] else ''}.", "",
            "| group | right | crashes |", "|---|---:|---:|"]
    for g, t in totals.items():
        head.append(f"| {g} | {_frac(t['right'], t['n'])} | {t['crashes']} |")
    write_text(page, "\n".join(head) + "\n\n" + markdown_tables(results))
    plot_calibration(results, page.parent / "identify_calibration.png")


def plot_calibration(results: dict[str, Any], png: Path) -> None:
    """Reliability diagram: observed accuracy against mean confidence per bin (marker area: answers)."""
    from matplotlib.figure import Figure

    from c2np.fileio import atomic_path

    cal = results["summary"]["calibration"]
    fig = Figure(figsize=(9, 4))
    ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="perfect calibration")
    pts = [b for b in cal["bins"] if b["n"]]
    if pts:
        ax.scatter([b["confidence"] for b in pts], [b["accuracy"] for b in pts],
                   s=[20 + 200 * b["n"] / max(p["n"] for p in pts) for b in pts], color="C0", zorder=3,
                   label="identify (area: answers)")
        ax.plot([b["confidence"] for b in pts], [b["accuracy"] for b in pts], color="C0", lw=1)
    ax.set(xlim=(0, 1.02), ylim=(0, 1.02), xlabel="confidence (bin mean)", ylabel="observed accuracy",
           title=f"reliability (ECE {cal['ece']:.3f})" if cal["ece"] is not None else "reliability")
    ax.legend(loc="upper left", fontsize=8)
    bx.bar([(b["lo"] + b["hi"]) / 2 for b in cal["bins"]], [b["n"] for b in cal["bins"]], width=0.09, color="C0")
    bx.set(xlabel="confidence", ylabel="answers", title="answers per bin", xlim=(0, 1))
    fig.tight_layout()
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
