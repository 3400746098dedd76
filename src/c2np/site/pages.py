"""The HTML shell of every page: escaping, the page frame, embedded JSON and plot slots.

Every string that comes from a user (model names, file names, ``model.yml`` text, sample
ids) goes through :func:`esc` before it enters HTML; JSON embedded in a page goes through
:func:`json_script`, which cannot close its ``<script>`` element.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any

__all__ = ["esc", "json_script", "page", "plot_slot", "format_value", "SITE_SCHEMA"]

SITE_SCHEMA = "c2np.site/1"


def esc(text: Any) -> str:
    """``text`` as HTML text or attribute value (``& < > " '`` escaped)."""
    return html.escape(str(text), quote=True)


def json_script(data: Any, element_id: str) -> str:
    """A ``<script type="application/json">`` element holding ``data``; ``<``, ``>`` and
    ``&`` are written as JSON escapes, so no content can end the element early."""
    text = json.dumps(data, allow_nan=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{esc(element_id)}">{text}</script>'


def plot_slot(figure: dict[str, Any], plot_id: str, *, height_px: int = 420) -> str:
    """A plot placeholder rendered by ``site.js`` with plotly (figure = {data, layout})."""
    return (f'<div class="c2np-plot" id="{esc(plot_id)}" data-figure="{esc(plot_id)}-fig" '
            f'style="height:{int(height_px)}px"></div>' + json_script(figure, f"{plot_id}-fig"))


def format_value(value: float | None) -> str:
    """A number for a table cell: 3 decimals, scientific when very small or large; an en
    dash when missing."""
    if value is None:
        return "–"
    v = float(value)
    if not math.isfinite(v):
        return "–"
    if v == 0.0 or 1e-3 <= abs(v) < 1e4:
        out = f"{v:.3f}"
        return "0.000" if out == "-0.000" else out
    return f"{v:.2e}"


_NAV = (("index.html", "Overview"), ("task-forward.html", "Task 1: forward"),
        ("task-inverse.html", "Task 2: inverse"))


def page(title: str, body: str, *, root: str = "", scripts: Sequence[str] = (),
         subtitle: str = "") -> str:
    """A complete HTML page. ``root`` is the relative path to the site root ("" or "../");
    ``body`` is trusted HTML built by this package; ``title`` and ``subtitle`` are escaped.
    ``scripts``: extra asset names under ``assets/``. The body carries
    ``data-c2np-ready`` / ``data-c2np-errors``, maintained by ``site.js``."""
    nav = " ".join(f'<a href="{root}{href}">{esc(label)}</a>' for href, label in _NAV)
    extra = "".join(f'<script src="{root}assets/{esc(s)}"></script>' for s in scripts)
    sub = f'<p class="subtitle">{esc(subtitle)}</p>' if subtitle else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="{SITE_SCHEMA}">
<title>{esc(title)}</title>
<link rel="stylesheet" href="{root}assets/site.css">
</head>
<body data-c2np-ready="0" data-c2np-errors="0">
<script src="{root}assets/site.js"></script>
<nav class="top">{nav}</nav>
<main>
<h1>{esc(title)}</h1>
{sub}
{body}
</main>
<script src="{root}assets/plotly.min.js"></script>
{extra}
<script>C2NP.start();</script>
</body>
</html>
"""
