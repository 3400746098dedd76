"""Screenshots of report pages for the docs: headless Chromium (Debian's chromium +
chromium-driver through selenium, window 1400 x 1000, as a reader's laptop), each page
captured once it has rendered every plot, saved as a palette PNG under 300 KB.

Run: ``PYTHONPATH=src python reproduce/report-screenshots/screenshots.py SITE PAGE=OUT.png ...``, e.g.
``... /tmp/site index.html=docs/report_index.png task-forward.html=docs/report_task.png``.
A page name may end in ``#ID`` to scroll that element to the top first.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

MAX_BYTES = 300_000


def small_png(png: bytes, out: Path) -> int:
    """Write ``png`` to ``out`` as an optimised palette PNG (fewer colours until it is under
    :data:`MAX_BYTES`); returns the size in bytes."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    for colours in (256, 128, 64, 32):
        buf = io.BytesIO()
        img.quantize(colors=colours, method=Image.Quantize.MEDIANCUT).save(buf, format="PNG", optimize=True)
        if buf.tell() < MAX_BYTES:
            break
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(buf.getvalue())
    return len(buf.getvalue())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site", type=Path)
    ap.add_argument("shots", nargs="+", help="PAGE[#ELEMENT]=OUT.png")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=1000)
    args = ap.parse_args()
    from c2np.site.browser import Browser

    with Browser(width=args.width, height=args.height) as b:
        for shot in args.shots:
            page, out = shot.split("=", 1)
            page, _, anchor = page.partition("#")
            state = b.open(args.site / page)
            if state.errors or state.ready != "1":
                print(f"{page}: not ready ({state.messages})", file=sys.stderr)
                return 1
            if anchor:
                b.driver.execute_script("document.getElementById(arguments[0]).scrollIntoView(true);", anchor)
            size = small_png(b.driver.get_screenshot_as_png(), Path(out))
            wide = b.driver.execute_script("return document.documentElement.scrollWidth > window.innerWidth;")
            print(f"{page}{'#' + anchor if anchor else ''} -> {out}: {size / 1e3:.0f} kB, "
                  f"{'scrolls sideways' if wide else 'no sideways scroll'} at {args.width} px")
    return 0


if __name__ == "__main__":
    sys.exit(main())
