"""Plots of the report, checked on the figure objects (matplotlib Figures and the site's
plotly figure documents), not on pixels: radius axes limited to the store's radii, a distinct
marker / line style per model, tick labels inside the figure, a sequential confusion scale
where more is darker."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import to_rgb

from c2np.report import (
    confusion_figure,
    id_vs_ood_figure,
    metric_vs_radius_figure,
    plot_metric_vs_radius,
    style_index,
)
from c2np.site import plots
from c2np.splits import PAPER, STRICT

LONG = ["diffcsp-flowmm+templates+refine+pool", "mattergen+templates+refine", "analytic-carve",
        "composition-lookup", "a-model-with-an-even-longer-name+sites+sphere+snap"]


def _series(models, radii):
    rng = np.random.default_rng(0)
    return {m: {r: float(rng.random()) for r in radii} for m in models}


def _luminance(colour) -> float:
    r, g, b = to_rgb(colour)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_radius_plot_spans_only_the_store_radii() -> None:
    radii = [6, 7, 10, 11, 12]
    fig = metric_vs_radius_figure(_series(LONG[:3], radii), "F1", PAPER, radii_angstrom=radii)
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    assert 5 < lo < 6 and 12 < hi < 13
    shaded = [p.get_x() + p.get_width() / 2 for p in ax.patches]  # axvspan rectangles
    assert shaded and all(6 <= x <= 12 for x in shaded)
    # ID radii 10, 11 and OOD radii 6, 7 of the store are shaded; none of 17..30
    assert sorted(round(x) for x in shaded) == [6, 7, 10, 11]
    assert all(6 <= t <= 12 for t in ax.get_xticks())


def test_radius_plot_without_store_radii_uses_the_radii_with_data() -> None:
    fig = metric_vs_radius_figure(_series(["a", "b"], [13, 14, 15]), "F1", STRICT)
    lo, hi = fig.axes[0].get_xlim()
    assert 12 < lo < 13 and 15 < hi < 16
    assert not fig.axes[0].patches  # no ID / OOD radius among them


def test_every_model_has_its_own_marker_and_line_style() -> None:
    models = [f"model-{i:02d}" for i in range(25)]
    fig = metric_vs_radius_figure(_series(models, [6, 8, 10]), "F1", PAPER)
    lines = fig.axes[0].get_lines()
    assert len(lines) == 25
    pairs = {(ln.get_marker(), ln.get_linestyle()) for ln in lines}
    assert len(pairs) == 25
    assert len({ln.get_linestyle() for ln in lines[:4]}) == 4  # dashes differ among the first models too
    assert len({style_index(i) for i in range(40)}) == 40


def test_site_radius_plot_styles_and_range() -> None:
    series = {m: {r: (0.5, 0.4, 0.6) for r in (6, 8, 10, 12)} for m in LONG}
    fig = plots.metric_vs_radius(series, metric="f1@0.1", label="F1", id_radii=PAPER.id_radii_angstrom,
                                 ood_radii=PAPER.ood_radii_angstrom, colours=plots.palette(LONG),
                                 radii=[6, 8, 10, 12])
    pairs = {(t["marker"]["symbol"], t["line"]["dash"]) for t in fig["data"]}
    assert len(pairs) == len(LONG)
    lo, hi = fig["layout"]["xaxis"]["range"]
    assert 5 < lo < 6 and 12 < hi < 13
    xs = sorted((sh["x0"] + sh["x1"]) / 2 for sh in fig["layout"]["shapes"])
    assert xs == [6, 10]  # OOD 6 and ID 10 only: nothing shaded beyond the radii shown


def _draw(fig):
    """Lay ``fig`` out and draw it as saving does (Agg); returns its renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _inside(fig) -> bool:
    renderer = _draw(fig)
    box = fig.bbox
    for ax in fig.axes:
        ticks = []
        for axis in (ax.xaxis, ax.yaxis):  # labels of ticks inside the view (the drawn ones)
            lo, hi = sorted(axis.get_view_interval())
            ticks += [t.label1 for t in axis.get_major_ticks() if lo - 1e-9 <= t.get_loc() <= hi + 1e-9]
        for label in ticks + [ax.xaxis.label, ax.yaxis.label, ax.title]:
            if not label.get_text():
                continue
            ext = label.get_window_extent(renderer)
            if ext.x0 < box.x0 - 0.5 or ext.y0 < box.y0 - 0.5 or ext.x1 > box.x1 + 0.5 or ext.y1 > box.y1 + 0.5:
                return False
    return True


def test_bar_chart_labels_are_inside_the_figure() -> None:
    values = {m: {"id": 0.9, "ood": 0.7} for m in LONG}
    assert _inside(id_vs_ood_figure(values, "joint accuracy (paper tolerance)"))


def test_radius_plot_legend_and_labels_are_inside_the_figure() -> None:
    fig = metric_vs_radius_figure(_series(LONG, [6, 8, 10]), "atom F1 at 0.1 Å", PAPER)
    assert _inside(fig)
    leg = fig.axes[0].get_legend().get_window_extent(_draw(fig))
    assert leg.x1 <= fig.bbox.x1 + 0.5 and leg.x0 >= fig.bbox.x0 - 0.5


def test_confusion_scale_is_sequential_more_is_darker() -> None:
    true = [221, 221, 221, 221, 62, 62, 99]
    pred = [221, 221, 221, 62, 62, None, 99]
    fig = confusion_figure(true, pred)
    im = fig.axes[0].images[0]
    lo, hi = im.get_clim()
    assert lo == 0 and hi == 3
    cmap = im.get_cmap()
    steps = [_luminance(cmap(x)) for x in np.linspace(0, 1, 9)]
    assert steps == sorted(steps, reverse=True) and steps[0] > 0.9  # zero nearly white, darker upward
    assert _luminance(im.to_rgba(np.array([[0]]))[0, 0]) > _luminance(im.to_rgba(np.array([[3]]))[0, 0])
    assert _inside(fig)


def test_site_confusion_scale_is_sequential_more_is_darker() -> None:
    fig = plots.confusion([221, 221, 62], [221, None, 62], title="t")
    trace = fig["data"][0]
    scale = trace["colorscale"]
    assert isinstance(scale, list) and not trace.get("reversescale")
    lum = [_luminance(c) for _, c in scale]
    assert lum == sorted(lum, reverse=True) and lum[0] > 0.9
    assert trace["zmin"] == 0 and trace["zmax"] == 1


@pytest.mark.parametrize("radii", [[6, 7, 10], [13, 23]])
def test_plot_metric_vs_radius_writes_a_png(tmp_path, radii) -> None:
    out = plot_metric_vs_radius(_series(["x"], radii), "F1", STRICT, tmp_path / "p.png", radii_angstrom=radii)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
