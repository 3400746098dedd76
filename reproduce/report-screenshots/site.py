"""Size and rendering time of the offline report's 3D particle viewer at R = 30 Å, in
headless Chromium (Debian's chromium + chromium-driver; WebGL on SwiftShader, i.e. on the
CPU), plus the screenshots in docs/.

A real benchmark run feeds the site: shipped KMgH3 and NaMgH3, radii 8, 10, 28, 30 Å
(train 8 and 28, ID 10, OOD 30; paper protocol, eval subset: 8 rotations per material and
radius), every baseline, ``c2np.benchmark.run_benchmark`` -> ``report/``. The viewer of
each task-1 baseline is timed on its R = 30 sample (about 9,000 atoms per side, 18,000
points): first render on page load, then every layout x colouring redraw, then camera
a mouse drag that rotates the scene (frame intervals).

Run: ``PYTHONPATH=src nice -n 10 python reproduce/report-screenshots/site.py --out /tmp/report_bench
[--repeats 5] [--screenshots docs]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

_REDRAW = """var done = arguments[arguments.length - 1];
var v = C2NP.viewers[0];
v.controls.sample.value = arguments[0]; v.controls.layout.value = arguments[1];
v.controls.colour.value = arguments[2]; v.controls.atoms.value = arguments[3];
var t0 = performance.now();
v.draw().then(function () { done(performance.now() - t0); }, function (e) { done(-1); });"""

def drag(driver, moves: int) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """Rotate the first scene with a mouse drag of ``moves`` steps (selenium actions): wall
    ms per step, and the median and 90th percentile of the page's frame intervals (ms)."""
    import numpy as np
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    driver.execute_script("window.__f = []; (function loop(t) { window.__f.push(t);"
                          " window.__raf = requestAnimationFrame(loop); })(performance.now());")
    target = driver.find_element(By.CSS_SELECTOR, ".viewer-plot .gl-container")
    chain = ActionChains(driver, duration=0).move_to_element_with_offset(target, -250, 0).click_and_hold()
    for _ in range(moves):
        chain.move_by_offset(8, 2)
    t0 = time.perf_counter()
    chain.release().perform()
    wall = (time.perf_counter() - t0) * 1000 / moves
    frames = np.diff(driver.execute_script("cancelAnimationFrame(window.__raf); return window.__f;"))
    return wall, float(np.median(frames)), float(np.percentile(frames, 90))


def build(out: Path, log) -> Path:  # type: ignore[no-untyped-def]
    from c2np.benchmark import run_benchmark
    from c2np.cli.dataset import load_cells
    from c2np.store import build_store

    cells = load_cells(None, "KMgH3,NaMgH3")
    store = build_store(cells, out / "dataset.h5", "paper", radii_angstrom=[8, 10, 28, 30], progress=False)
    t0 = time.perf_counter()
    s = run_benchmark(store, out, splits=("id", "ood"), n_resamples=200, progress=False, log=log)
    log(f"benchmark + report: {time.perf_counter() - t0:.1f} s")
    assert s.report_index is not None
    return s.report_index.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--turns", type=int, default=30, help="mouse steps of the drag")
    ap.add_argument("--screenshots", type=Path, default=None, help="folder for report_*.png")
    ap.add_argument("--reuse", action="store_true", help="use the site already in OUT/report")
    ap.add_argument("--screenshot-model", default="memorisation", help="viewer shown in report_viewer.png")
    ap.add_argument("--only-screenshots", action="store_true", help="skip the timings")
    args = ap.parse_args(argv)
    log = lambda m: print(f"· {m}", file=sys.stderr)  # noqa: E731
    site = args.out / "report" if args.reuse else build(args.out, log)

    from c2np.site.browser import Browser

    manifest = json.loads((site / "site.json").read_text())
    plotly_bytes = (site / "assets" / "plotly.min.js").stat().st_size
    total = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    print(f"site: {len(manifest['pages'])} pages, {len(manifest['viewers'])} viewers, {total / 1e6:.2f} MB in all, "
          f"of which plotly.min.js {plotly_bytes / 1e6:.2f} MB (shared by every page)\n")
    rows = []
    with Browser(width=1400, height=1000) as b:
        for model, rel in sorted(manifest["viewers"].items()):
            if args.only_screenshots and model != args.screenshot_model:
                continue
            page = site / rel
            loads, firsts = [], []
            for _ in range(1 if args.only_screenshots else args.repeats):
                st = b.open(page, timeout_s=120)
                assert st.ready == "1" and st.errors == 0, st
                loads.append(st.seconds * 1000)
                firsts.append(st.viewer_ms or float("nan"))
            payloads = b.driver.execute_script(
                "return JSON.parse(document.getElementById('viewer-data').textContent).map(function (p) {"
                " return [p.sample_id, p.radius_angstrom, p.ref.n, p.pred.n, JSON.stringify(p).length]; })")
            k = max(range(len(payloads)), key=lambda i: (payloads[i][1], payloads[i][2]))
            sid, radius, n_ref, n_pred, payload_bytes = payloads[k]
            modes = {}
            reps = 1 if args.only_screenshots else args.repeats
            for layout in ("side", "overlay"):
                for colour in ("element", "error"):
                    ms = [b.driver.execute_async_script(_REDRAW, str(k), layout, colour, "all")
                          for _ in range(reps)]
                    modes[(layout, colour)] = statistics.median(ms)
            surface = statistics.median(b.driver.execute_async_script(_REDRAW, str(k), "side", "element", "surface")
                                        for _ in range(reps))
            b.driver.execute_async_script(_REDRAW, str(k), "side", "element", "all")
            turn = drag(b.driver, args.turns)
            rows.append((model, sid, radius, n_ref, n_pred, page.stat().st_size, payload_bytes,
                         statistics.median(loads), statistics.median(firsts), modes, surface, turn))
            if args.screenshots is not None and model == args.screenshot_model:
                b.driver.execute_async_script(_REDRAW, str(k), "side", "error", "all")
                b.driver.execute_async_script("var d = arguments[arguments.length - 1];"
                                              "requestAnimationFrame(function () { d(1); });")
                b.screenshot(args.screenshots / "report_viewer.png")
        if args.screenshots is not None:
            b.open(site / "index.html")
            b.screenshot(args.screenshots / "report_index.png")
    print("| viewer | R = 30 sample | atoms (ref / pred) | page (MB) | sample payload (MB) | page load to ready (ms) "
          "| first render (ms) | redraw side / overlay, by element (ms) | redraw side / overlay, by error (ms) "
          "| surface only (ms) | drag-rotate: ms per mouse step, frame interval median / p90 (ms) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (model, sid, _radius, n_ref, n_pred, size, pay, load, first, modes, surface, turn) in rows:
        print(f"| {model} | {sid} | {n_ref} / {n_pred} | {size / 1e6:.2f} | {pay / 1e6:.2f} | {load:.0f} | {first:.0f} "
              f"| {modes[('side', 'element')]:.0f} / {modes[('overlay', 'element')]:.0f} "
              f"| {modes[('side', 'error')]:.0f} / {modes[('overlay', 'error')]:.0f} | {surface:.0f} "
              f"| {turn[0]:.0f}; {turn[1]:.0f} / {turn[2]:.0f} |")
    import os

    print(f"\nmedian of {1 if args.only_screenshots else args.repeats}; drag: {args.turns} mouse steps, side by side, "
          "by element, hover off; first render = on page load (the first payload, an ID sample); "
          "redraws = the R = 30 sample; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
