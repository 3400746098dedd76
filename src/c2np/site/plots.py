"""Interactive plots of the site as plotly figure documents (``{"data": [...], "layout":
{...}}``, plain JSON that plotly.js renders in the page).

Every value comes from results documents (or a training log); nothing is re-scored here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["palette", "line_styles", "metric_vs_radius", "id_vs_ood", "confusion", "loss_vs_fidelity",
           "CONFUSION_COLOURSCALE"]

_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf")
_FONT = {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 12}

Interval = tuple[float | None, float | None, float | None]  # mean, ci lo, ci hi


# plotly's names for the markers and dashes of c2np.report.MARKERS / LINESTYLES
_SYMBOLS = ("circle", "square", "triangle-up", "diamond", "triangle-down", "cross", "x", "star",
            "triangle-left", "triangle-right")
_DASHES = ("solid", "dash", "dashdot", "dot")
#: confusion counts: sequential blues from 0 (near white) to the largest count (dark)
CONFUSION_COLOURSCALE: tuple[tuple[float, str], ...] = (
    (0.0, "#f7fbff"), (0.125, "#deebf7"), (0.25, "#c6dbef"), (0.375, "#9ecae1"), (0.5, "#6baed6"),
    (0.625, "#4292c6"), (0.75, "#2171b5"), (0.875, "#08519c"), (1.0, "#08306b"))


def palette(models: Sequence[str]) -> dict[str, str]:
    """A fixed colour per model (sorted order), the same on every page."""
    return {m: _COLOURS[i % len(_COLOURS)] for i, m in enumerate(sorted(models))}


def line_styles(models: Sequence[str]) -> dict[str, tuple[str, str]]:
    """A fixed (marker symbol, dash) per model (sorted order), distinct pairs for up to 40
    models (:func:`c2np.report.style_index`), so that lines stay apart where colours repeat
    or lines overlap."""
    from c2np.report import style_index

    out = {}
    for i, m in enumerate(sorted(models)):
        mi, li = style_index(i)
        out[m] = (_SYMBOLS[mi], _DASHES[li])
    return out


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    base = {"title": {"text": title, "font": {"size": 14}}, "font": _FONT,
            "margin": {"l": 60, "r": 20, "t": 50, "b": 50}, "legend": {"orientation": "v"},
            "plot_bgcolor": "#ffffff", "paper_bgcolor": "#ffffff"}
    base.update(extra)
    return base


def _err(points: Sequence[Interval]) -> dict[str, Any]:
    plus = [None if m is None or hi is None else hi - m for m, _, hi in points]
    minus = [None if m is None or lo is None else m - lo for m, lo, _ in points]
    return {"type": "data", "array": plus, "arrayminus": minus, "visible": True, "thickness": 1}


def metric_vs_radius(series: Mapping[str, Mapping[int, Interval]], *, metric: str, label: str,
                     id_radii: Sequence[int], ood_radii: Sequence[int],
                     colours: Mapping[str, str], styles: Mapping[str, tuple[str, str]] | None = None,
                     radii: Sequence[int] | None = None) -> dict[str, Any]:
    """A metric against the sphere radius R (Å), one line per model (colour, marker symbol and
    dash of ``styles``) with 95 % intervals; the x axis spans ``radii`` (the radii of the
    results; default: those in ``series``), and the ID (blue) / OOD (red) shading covers only
    those."""
    shown = sorted({int(r) for r in radii} if radii is not None
                   else {int(r) for pts in series.values() for r in pts})
    styles = styles or line_styles(list(series))
    data = []
    for model in sorted(series):
        pts = series[model]
        rs = sorted(pts)
        symbol, dash = styles.get(model, ("circle", "solid"))
        data.append({"type": "scatter", "mode": "lines+markers", "name": model,
                     "x": rs, "y": [pts[r][0] for r in rs], "error_y": _err([pts[r] for r in rs]),
                     "line": {"color": colours.get(model), "width": 1.5, "dash": dash},
                     "marker": {"size": 7, "symbol": symbol},
                     "hovertemplate": f"{model}<br>R = %{{x}} Å<br>{metric} = %{{y:.4g}}<extra></extra>"})
    shapes, notes = [], []
    for split_radii, colour, name in ((id_radii, "rgba(31,119,180,0.13)", "ID"),
                                      (ood_radii, "rgba(214,39,40,0.13)", "OOD")):
        inside = [r for r in split_radii if r in shown]
        for r in inside:
            shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": r - 0.5, "x1": r + 0.5,
                           "y0": 0, "y1": 1, "fillcolor": colour, "line": {"width": 0}, "layer": "below"})
        if inside:
            notes.append({"x": min(inside), "y": 1.0, "xref": "x", "yref": "paper", "text": name,
                          "showarrow": False, "yanchor": "bottom", "font": {"size": 10}})
    xaxis: dict[str, Any] = {"title": {"text": "sphere radius R (Å)"}, "gridcolor": "#eee",
                             "dtick": 1 if len(shown) <= 12 else 2}
    if shown:
        xaxis["range"] = [shown[0] - 0.75, shown[-1] + 0.75]
    layout = _layout(f"{label} vs radius (blue: ID radii, red: OOD radii)", xaxis=xaxis,
                     yaxis={"title": {"text": label}, "gridcolor": "#eee"},
                     shapes=shapes, annotations=notes)
    return {"data": data, "layout": layout}


def id_vs_ood(values: Mapping[str, Mapping[str, Interval]], *, label: str,
              colours: Mapping[str, str]) -> dict[str, Any]:
    """Grouped bars: one group per model, one bar per split (ID, OOD), with 95 % intervals."""
    models = sorted(values)
    data = []
    for split, colour in (("id", "#1f77b4"), ("ood", "#d62728")):
        pts = [values[m].get(split, (None, None, None)) for m in models]
        if all(p[0] is None for p in pts):
            continue
        data.append({"type": "bar", "name": split.upper(), "x": models, "y": [p[0] for p in pts],
                     "error_y": _err(pts), "marker": {"color": colour},
                     "hovertemplate": f"%{{x}} · {split.upper()}: %{{y:.4g}}<extra></extra>"})
    layout = _layout(f"{label}: in-distribution vs out-of-distribution radii", barmode="group",
                     xaxis={"tickangle": -30, "automargin": True},
                     yaxis={"title": {"text": label}, "gridcolor": "#eee", "automargin": True})
    return {"data": data, "layout": layout}


def confusion(true_sg: Sequence[int], pred_sg: Sequence[int | None], *, title: str) -> dict[str, Any]:
    """Space-group confusion heatmap: rows the true space groups, columns the predicted ones
    (plus ``fail`` for an unusable prediction); cell = number of samples."""
    rows = sorted({int(t) for t in true_sg})
    cols_sg = sorted(set(rows) | {int(p) for p in pred_sg if p is not None})
    cols = [str(s) for s in cols_sg] + ["fail"]
    index = {s: j for j, s in enumerate(cols_sg)}
    z = [[0] * len(cols) for _ in rows]
    for t, p in zip(true_sg, pred_sg):
        z[rows.index(int(t))][len(cols) - 1 if p is None else index[int(p)]] += 1
    data = [{"type": "heatmap", "z": z, "x": cols, "y": [str(r) for r in rows],
             "colorscale": [list(p) for p in CONFUSION_COLOURSCALE], "zmin": 0,
             "zmax": max(1, max((max(r) for r in z), default=1)), "reversescale": False,
             "texttemplate": "%{z}", "showscale": True, "colorbar": {"title": {"text": "samples"}},
             "hovertemplate": "true %{y} → predicted %{x}: %{z}<extra></extra>"}]
    layout = _layout(title, xaxis={"title": {"text": "predicted space group"}, "type": "category"},
                     yaxis={"title": {"text": "true space group"}, "type": "category",
                            "autorange": "reversed"})
    return {"data": data, "layout": layout}


def loss_vs_fidelity(logs: Mapping[str, Sequence[Mapping[str, float]]], *, fidelity_key: str,
                     fidelity_label: str, colours: Mapping[str, str]) -> dict[str, Any]:
    """The paper's diagnostic from training logs: validation loss against fidelity, one point
    per epoch (left), and fidelity per epoch (right), one colour per model."""
    data: list[dict[str, Any]] = []
    for model in sorted(logs):
        rows = [r for r in logs[model] if fidelity_key in r]
        if not rows:
            continue
        c = colours.get(model)
        epochs = [r.get("epoch") for r in rows]
        fid = [r[fidelity_key] for r in rows]
        data.append({"type": "scatter", "mode": "lines+markers", "name": model, "legendgroup": model,
                     "x": [r.get("val_loss") for r in rows], "y": fid, "text": [f"epoch {e:g}" for e in epochs],
                     "line": {"color": c, "width": 1}, "xaxis": "x", "yaxis": "y",
                     "hovertemplate": f"{model} %{{text}}<br>val loss %{{x:.4g}}<br>"
                                      f"{fidelity_key} %{{y:.4g}}<extra></extra>"})
        data.append({"type": "scatter", "mode": "lines+markers", "name": model, "legendgroup": model,
                     "showlegend": False, "x": epochs, "y": fid, "line": {"color": c, "width": 1},
                     "xaxis": "x2", "yaxis": "y2"})
    layout = _layout("loss vs fidelity (does a lower loss mean a better particle?)",
                     xaxis={"domain": [0, 0.45], "title": {"text": "validation loss"}, "gridcolor": "#eee"},
                     yaxis={"title": {"text": fidelity_label}, "gridcolor": "#eee"},
                     xaxis2={"domain": [0.55, 1], "title": {"text": "epoch"}, "anchor": "y2", "gridcolor": "#eee"},
                     yaxis2={"anchor": "x2", "title": {"text": fidelity_label}, "gridcolor": "#eee"})
    return {"data": data, "layout": layout}
