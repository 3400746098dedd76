"""Build the static report site from :class:`~c2np.site.sources.SiteModel` records.

Layout of ``SITE_DIR``::

    index.html                  overview: dataset, one summary table per task, models
    task-forward.html           task 1: tables per split, plots, viewer links
    task-inverse.html           task 2: tables per split, plots, confusion
    models/<slug>.html          one page per model: model.yml, its rows beside the baselines
    viewer/<slug>.html          task-1 particle viewer of a model (needs the store)
    tables/<id>.csv|json        every table, for download
    assets/                     plotly.min.js (from the plotly wheel), site.js, viewer.js, site.css
    site.json                   manifest: pages, tables, notes, versions

Nothing is fetched from the network; every page works from ``file://``. Every number comes
from the results documents (the harness); the viewer's per-atom classes come from
:func:`c2np.metrics.tolerance_matching`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from c2np.errors import C2NPInputError
from c2np.fileio import atomic_write
from c2np.metrics import HEADLINE, PRIMARY
from c2np.report import (
    METRIC_LABELS,
    RADIUS_PLOTS,
    REFERENCE_BASELINES,
    LeaderboardRow,
    normalise,
    row_from_results,
    split_rank,
)
from c2np.site import plots
from c2np.site.pages import SITE_SCHEMA, esc, json_script, page, plot_slot
from c2np.site.sources import BASELINE_KINDS, SiteModel, read_forward_samples, read_predicted_spacegroups
from c2np.site.tables import (
    Table,
    all_metrics_table,
    leaderboard_table,
    structure_type_site_table,
    summary_table,
    table_html,
)
from c2np.site.viewer import ViewerSample, viewer_payload

__all__ = ["SiteSummary", "build_site", "viewer_page", "model_slug", "TASK_TITLES"]

TASK_TITLES = {"forward": "Task 1 (forward): unit cell + R → nanoparticle",
               "inverse": "Task 2 (inverse): nanoparticle → lattice + space group"}
_ASSETS = ("site.js", "viewer.js", "site.css")


@dataclass(frozen=True)
class SiteSummary:
    """What :func:`build_site` wrote.

    Attributes:
        out_dir, index: the site folder and its ``index.html``.
        pages, tables, viewers: written files (absolute paths).
        notes: things the site could not show, and why (also on the pages).
        bytes_total: size of the site in bytes.
        seconds: wall time.
    """

    out_dir: Path
    index: Path
    pages: tuple[Path, ...]
    tables: tuple[Path, ...]
    viewers: tuple[Path, ...]
    notes: tuple[str, ...]
    bytes_total: int
    seconds: float


def model_slug(model_id: str) -> str:
    """A file-name stem for a model id: the id itself when it is a safe name (letters,
    digits, ``.``, ``_``, ``-``, not starting with ``.``), else a sanitised form plus a hash
    of the id (so two ids never share a page)."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}", model_id):
        return model_id
    clean = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("._")[:48] or "model"
    return f"{clean}-{hashlib.sha256(model_id.encode()).hexdigest()[:10]}"


def _split_key(split: str) -> tuple[int, str]:
    return (split_rank(split), split)


def _uniform(models: Sequence[SiteModel], what: str, get: Callable[[Mapping[str, Any]], Any]) -> Any:
    values: dict[Any, str] = {}
    for m in models:
        for d in m.results:
            values.setdefault(get(d), m.model_id)
    if len(values) > 1:
        listed = "; ".join(f"{v!r} (e.g. {m!r})" for v, m in values.items())
        raise C2NPInputError(f"the results mix several {what}s: {listed}; build one site per {what}")
    return next(iter(values)) if values else None


def _subset_label(doc: Mapping[str, Any]) -> str:
    """The rows a results document scored: ``eval, N rotation(s) per (material, R)`` or ``full``
    (so that a site never mixes row sets)."""
    subset = str(doc["subset"])
    n = (doc.get("subset_definition") or {}).get("rotations_per_material_radius")
    if subset != "eval" or n is None:
        return subset
    return f"eval, {int(n)} rotation{'s' if int(n) != 1 else ''} per (material, R)"


class _Writer:
    """Writes site files atomically and remembers them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.written: list[Path] = []

    def text(self, rel: str, content: str) -> Path:
        return self.bytes(rel, content.encode("utf-8"))

    def bytes(self, rel: str, content: bytes) -> Path:
        path = self.root / rel
        if path.exists() and not path.is_file():
            raise C2NPInputError(f"{path}: exists and is not a regular file; not replacing it")
        with atomic_write(path, "wb") as fh:
            fh.write(content)
        os.chmod(path, 0o666 & ~_umask())
        self.written.append(path)
        return path

    def copy(self, src: Path, rel: str) -> Path:
        return self.bytes(rel, src.read_bytes())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _plotly_js() -> Path:
    """plotly.min.js as shipped inside the plotly wheel."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise C2NPInputError(f"{path}: plotly.min.js is missing from the installed plotly package")
    return path


class _Site:
    """State shared by the page builders of one site."""

    def __init__(self, models: Sequence[SiteModel], out: Path, store: Any, title: str,
                 log: Callable[[str], None]) -> None:
        self.models = {m.model_id: m for m in models}
        self.out = out
        self.store = store
        self.title = title
        self.log = log
        self.notes: list[str] = []
        self.w = _Writer(out)
        self.tables: list[Path] = []
        self.viewers: dict[str, Path] = {}
        self.rows: list[LeaderboardRow] = normalise(
            [row_from_results(d) for m in models for d in m.results])
        self.kinds = {**BASELINE_KINDS, **{m.model_id: m.kind for m in models}}
        self.info: dict[str, dict[str, Any]] = {}
        for m in models:
            for d in m.results:
                for k, v in d.get("metric_info", {}).items():
                    self.info.setdefault(str(d["task"]), {}).setdefault(k, v)
        every_model = list(self.models) + [b for bs in REFERENCE_BASELINES.values() for b in bs]
        self.colours = plots.palette(every_model)
        self.styles = plots.line_styles(every_model)
        # the radii the plots span: the store's, else those the results cover
        self.radii = (sorted({int(r) for r in store.recipes.radius_angstrom}) if store is not None else
                      sorted({int(r) for m in models for d in m.results for r in d["metrics"]["per_radius"]}))
        self.protocol_name = _uniform(models, "protocol", lambda d: d["protocol"])
        self.fingerprint = _uniform(models, "dataset fingerprint", lambda d: d["dataset"]["fingerprint"])
        self.subset = _uniform(models, "subset", _subset_label)
        from c2np.splits import get_protocol

        try:
            self.protocol = get_protocol(str(self.protocol_name))
        except (KeyError, ValueError) as exc:
            raise C2NPInputError(f"results name an unknown protocol {self.protocol_name!r}") from exc
        if store is not None and store.fingerprint != self.fingerprint:
            raise C2NPInputError(f"{store.path}: store fingerprint {store.fingerprint[:12]}… differs "
                                 f"from the results' {str(self.fingerprint)[:12]}…")

    # -- helpers ---------------------------------------------------------------------------
    def tasks(self) -> list[str]:
        have = {r.task for r in self.rows}
        return [t for t in REFERENCE_BASELINES if t in have]

    def splits(self, task: str) -> list[str]:
        return sorted({r.split for r in self.rows if r.task == task}, key=_split_key)

    def href(self, root: str) -> Callable[[str], str | None]:
        def link(model_id: str) -> str | None:
            return f"{root}models/{model_slug(model_id)}.html" if model_id in self.models else None

        return link

    def table(self, t: Table, root: str) -> str:
        self.tables.append(self.w.text(f"tables/{t.table_id}.csv", t.to_csv()))
        self.tables.append(self.w.text(f"tables/{t.table_id}.json", t.to_json()))
        return table_html(t, downloads_prefix=root, href=self.href(root))

    def docs(self, task: str, model: str | None = None) -> list[tuple[str, Mapping[str, Any]]]:
        out = []
        for m in self.models.values():
            if model is not None and m.model_id != model:
                continue
            out += [(m.model_id, d) for d in m.results if d["task"] == task]
        return out

    def missing_banner(self, task: str) -> str:
        have = {r.model for r in self.rows if r.task == task}
        missing = [b for b in REFERENCE_BASELINES[task] if b not in have]
        if not missing:
            return ""
        note = (f"{TASK_TITLES[task]}: reference baseline(s) {', '.join(missing)} are not in the inputs; "
                "their rows are marked, and normalised scores that need them are undefined.")
        if note not in self.notes:
            self.notes.append(note)
        return f'<p class="banner">{esc(note)}</p>'

    # -- plots -----------------------------------------------------------------------------
    def radius_plot(self, task: str, metric: str, plot_id: str, models: Sequence[str] | None = None) -> str:
        series: dict[str, dict[int, plots.Interval]] = {}
        for model, d in self.docs(task):
            if models is not None and model not in models:
                continue
            for r, groups in d["metrics"]["per_radius"].items():
                s = groups.get(metric)
                if s is not None:
                    ci = s.get("ci95") or (None, None)
                    series.setdefault(model, {})[int(r)] = (s["mean"], ci[0], ci[1])
        if not series:
            return ""
        fig = plots.metric_vs_radius(series, metric=metric, label=METRIC_LABELS.get(metric, metric),
                                     id_radii=list(self.protocol.id_radii_angstrom),
                                     ood_radii=list(self.protocol.ood_radii_angstrom), colours=self.colours,
                                     styles=self.styles, radii=self.radii)
        return plot_slot(fig, plot_id)

    def id_ood_plot(self, task: str, metric: str, plot_id: str) -> str:
        vals: dict[str, dict[str, plots.Interval]] = {}
        for r in self.rows:
            if r.task == task and r.split in ("id", "ood") and r.metrics.get(metric) is not None:
                ci = r.ci95.get(metric) or (None, None)
                vals.setdefault(r.model, {})[r.split] = (r.metrics[metric], ci[0], ci[1])
        if not vals:
            return ""
        return plot_slot(plots.id_vs_ood(vals, label=METRIC_LABELS.get(metric, metric), colours=self.colours),
                         plot_id, height_px=380)

    def confusion_plot(self, model: str, split: str, plot_id: str) -> str:
        m = self.models[model]
        path = m.predictions.get(("inverse", split))
        doc = next((d for d in m.results if d["task"] == "inverse" and d["split"] == split), None)
        if path is None or doc is None:
            return ""
        try:
            pred = read_predicted_spacegroups(path)
        except C2NPInputError as exc:
            self.notes.append(f"confusion matrix of {model} ({split}) not drawn: {exc}")
            return f'<p class="banner">{esc(self.notes[-1])}</p>'
        from c2np.tasks import opaque_sample_id

        targets = doc.get("targets", {})
        fp = doc["dataset"]["fingerprint"]
        true_sg, pred_sg = [], []
        for sid in doc["samples"]["sample_id"]:
            mat = sid.split("/")[0]
            if mat in targets:
                true_sg.append(int(targets[mat]["spacegroup"]))
                pred_sg.append(pred[sid] if sid in pred else pred.get(opaque_sample_id(fp, sid)))
        if not true_sg:
            return ""
        fig = plots.confusion(true_sg, pred_sg, title=f"space-group confusion: {model}, {split.upper()}")
        return plot_slot(fig, plot_id, height_px=360)

    def loss_plot(self, task: str, plot_id: str, models: Sequence[str] | None = None) -> str:
        from c2np.models.diagnostic import FIDELITY, read_log_csv

        logs = {}
        for m in self.models.values():
            if (models is None or m.model_id in models) and task in m.training_logs:
                try:
                    logs[m.model_id] = read_log_csv(m.training_logs[task])
                except (C2NPInputError, OSError) as exc:
                    self.notes.append(f"training log of {m.model_id} ({task}) not drawn: {exc}")
        if not logs:
            return ""
        key, label = FIDELITY[task]
        return plot_slot(plots.loss_vs_fidelity(logs, fidelity_key=key, fidelity_label=label,
                                                colours=self.colours), plot_id, height_px=400)

    # -- viewer ----------------------------------------------------------------------------
    def viewer_samples(self, doc: Mapping[str, Any]) -> list[str]:
        """The largest- and smallest-radius sample of a split (first in id order on ties)."""
        ids = list(doc["samples"]["sample_id"])
        if not ids:
            return []
        radii = self.store.recipes.radius_angstrom[self.store.rows_for_ids(ids)]
        by_r = sorted(zip((int(r) for r in radii), ids))
        big = max(r for r, _ in by_r)
        picks = [next(s for r, s in by_r if r == big), by_r[0][1]]
        return list(dict.fromkeys(picks))

    def build_viewer(self, model: SiteModel) -> Path | None:
        if self.store is None:
            return None
        docs = sorted((d for d in model.results if d["task"] == "forward"), key=lambda d: _split_key(d["split"]))
        payloads, page_notes = [], []
        for d in docs:
            path = model.predictions.get(("forward", d["split"]))
            if path is None:
                page_notes.append(f"{d['split']}: prediction file not on disk")
                continue
            wanted = self.viewer_samples(d)
            try:
                found = read_forward_samples(path, wanted)
            except C2NPInputError as exc:
                page_notes.append(f"{d['split']}: {exc}")
                continue
            index = {sid: i for i, sid in enumerate(d["samples"]["sample_id"])}
            for sid in wanted:
                row = int(self.store.rows_for_ids([sid])[0])
                zg, xg = self.store.particle_arrays(row)
                zp, xp = found.get(sid, ((), ()))
                scores = {k: d["samples"][k][index[sid]] for k in ("f1@0.1", "f1@0.5", "chamfer", "matched_rmsd")
                          if k in d["samples"]}
                if sid not in found:
                    page_notes.append(f"{sid}: no prediction in the file (scored as a failure); "
                                      "the reference is shown alone")
                sample = ViewerSample(sid, model.model_id, d["split"],
                                      float(self.store.recipes.radius_angstrom[row]),
                                      _arr(zp, "i8"), _arr(xp, "f8").reshape(-1, 3), zg, xg, scores)
                try:
                    payloads.append(viewer_payload(sample))
                except C2NPInputError as exc:
                    page_notes.append(str(exc))
        if not payloads:
            if page_notes:
                self.notes.append(f"viewer of {model.model_id} not built: " + "; ".join(page_notes))
            return None
        slug = model_slug(model.model_id)
        path = self.w.text(f"viewer/{slug}.html", viewer_page(
            payloads, title=f"Particle viewer: {model.model_id}", notes=page_notes,
            intro=f'Model <a href="../models/{esc(slug)}.html">{esc(model.model_id)}</a>. Predicted and '
                  "reference particle of the largest and smallest radius of each split."))
        self.viewers[model.model_id] = path
        return path


def viewer_page(payloads: Sequence[Mapping[str, Any]], *, title: str, intro: str = "",
                notes: Sequence[str] = ()) -> str:
    """A viewer page (placed one folder below the site root) for ``payloads``
    (:func:`c2np.site.viewer.viewer_payload`); ``intro`` is trusted HTML, ``notes`` are
    escaped."""
    notes_html = "".join(f'<p class="banner">{esc(n)}</p>' for n in notes)
    body = (f"<p>{intro} Drawn with plotly scatter3d (WebGL): drag to rotate, scroll to zoom; "
            "side by side, the two scenes turn together. Error colours: green = matched within "
            "0.1 Å, orange = matched within 0.5 Å, red = unmatched reference atom / extra predicted "
            "atom (the maximum one-to-one same-element matchings that atom precision, recall and F1 "
            "count). Surface shell: atoms farther than R − 3 Å from the centre.</p>" + notes_html +
            '<div class="c2np-viewer" id="viewer" data-payloads="viewer-data"></div>'
            + json_script(list(payloads), "viewer-data"))
    return page(title, body, root="../", scripts=("viewer.js",))


def _arr(values: Any, dtype: str) -> Any:
    import numpy as np

    return np.asarray(values, dtype=dtype)


def _meta_rows(items: Sequence[tuple[str, Any]]) -> str:
    return '<table class="meta">' + "".join(
        f"<tr><td>{esc(k)}</td><td><code>{esc(v)}</code></td></tr>" for k, v in items) + "</table>"


def _index_page(s: _Site) -> str:
    parts = [_meta_rows([("protocol", s.protocol_name), ("subset", s.subset),
                         ("dataset fingerprint", s.fingerprint), ("models", len(s.models))])]
    parts.append("<p>Every number comes from the evaluation harness (failure-penalised means with 95 % "
                 "bootstrap intervals); the reference baselines are on the rows of every table. Click "
                 "a column header to sort; every table downloads as CSV and JSON.</p>")
    for task in s.tasks():
        metric = PRIMARY[task].value
        parts.append(f'<h2><a href="task-{task}.html">{esc(TASK_TITLES[task])}</a></h2>')
        parts.append(s.missing_banner(task))
        parts.append(s.table(summary_table(s.rows, task, s.splits(task), metric, kinds=s.kinds,
                                           info=s.info.get(task, {}), table_id=f"summary_{task}",
                                           title=f"headline: {metric}"), ""))
        parts.append(s.id_ood_plot(task, metric, f"index-{task}-id-ood"))
    parts.append("<h2>Models</h2><ul class=\"models\">")
    for mid in sorted(s.models):
        viewer = (f' · <a href="viewer/{esc(model_slug(mid))}.html">particle viewer</a>'
                  if mid in s.viewers else "")
        parts.append(f'<li><a href="models/{esc(model_slug(mid))}.html">{esc(mid)}</a> '
                     f'<span class="note">({esc(s.kinds.get(mid, "model"))})</span>{viewer}</li>')
    parts.append("</ul>")
    return "\n".join(p for p in parts if p)


def _task_page(s: _Site, task: str) -> str:
    parts = [s.missing_banner(task)]
    metrics = [m.value for m in HEADLINE[task]]
    info = s.info.get(task, {})
    for split in s.splits(task):
        parts.append(f"<h2>{esc(split.upper())} split</h2>")
        parts.append(s.table(leaderboard_table(s.rows, task, split, metrics, kinds=s.kinds, info=info,
                                               table_id=f"{task}_{split}",
                                               title=f"{split.upper()}: headline metrics"), ""))
        all_t = all_metrics_table(s.rows, task, split, kinds=s.kinds, info=info,
                                  table_id=f"{task}_{split}_all", title=f"{split.upper()}: every metric")
        parts.append(f"<details><summary>every metric ({split.upper()})</summary>{s.table(all_t, '')}</details>")
        if task == "inverse":
            st = structure_type_site_table(s.rows, split, metrics[0], kinds=s.kinds, info=info,
                                           table_id=f"{task}_{split}_types",
                                           title=f"{split.upper()}: {metrics[0]} per structure type")
            if st is not None:
                parts.append(s.table(st, ""))
    parts.append("<h2>Plots</h2>")
    for metric in RADIUS_PLOTS[task]:
        parts.append(s.radius_plot(task, metric.value, f"{task}-{metric.value}-radius".replace("@", "_")))
    parts.append(s.id_ood_plot(task, PRIMARY[task].value, f"{task}-id-ood"))
    if task == "inverse":
        inv = [m for m in s.models.values() if any(k[0] == "inverse" for k in m.predictions)]
        inv.sort(key=lambda m: (m.model_id != "solver", m.model_id))
        for m in inv[:1]:
            for split in s.splits(task):
                parts.append(s.confusion_plot(m.model_id, split, f"confusion-{model_slug(m.model_id)}-{split}"))
    loss = s.loss_plot(task, f"{task}-loss-fidelity")
    parts.append(loss or '<p class="note">loss vs fidelity: no model in the inputs has a training log '
                         f'(<code>&lt;submission&gt;/{task}/training_log.csv</code>).</p>')
    if task == "forward":
        parts.append("<h2>Particle viewer</h2>")
        if s.viewers:
            parts.append("<ul class=\"models\">" + "".join(
                f'<li><a href="viewer/{esc(model_slug(mid))}.html">{esc(mid)}</a></li>' for mid in sorted(s.viewers))
                + "</ul>")
        else:
            parts.append('<p class="note">No viewer: it needs the dataset store (<code>--store</code>) and '
                         "the prediction files on disk.</p>")
    return "\n".join(p for p in parts if p)


def _model_page(s: _Site, m: SiteModel) -> str:
    slug = model_slug(m.model_id)
    parts = [_meta_rows([("model id", m.model_id), ("category", m.kind),
                         ("tasks", ", ".join(m.tasks) or "none")])]
    if m.model_id in s.viewers:
        parts.append(f'<p><a href="../viewer/{esc(slug)}.html">particle viewer</a></p>')
    for task in m.tasks:
        parts.append(f"<h2>{esc(TASK_TITLES[task])}</h2>")
        parts.append(s.missing_banner(task))
        for split in s.splits(task):
            if not any(r.model == m.model_id and r.task == task and r.split == split for r in s.rows):
                continue
            t = leaderboard_table(s.rows, task, split, [m.value for m in HEADLINE[task]], kinds=s.kinds,
                                  info=s.info.get(task, {}), table_id=f"model_{slug}_{task}_{split}",
                                  title=f"{split.upper()}: {m.model_id} beside the reference baselines",
                                  models=[m.model_id])
            parts.append(s.table(t, "../"))
        shown = [m.model_id, *REFERENCE_BASELINES[task]]
        parts.append(s.radius_plot(task, PRIMARY[task].value, f"{slug}-{task}-radius", models=shown))
        if task == "inverse":
            for split in s.splits(task):
                parts.append(s.confusion_plot(m.model_id, split, f"{slug}-confusion-{split}"))
        parts.append(s.loss_plot(task, f"{slug}-{task}-loss", models=[m.model_id]))
    parts.append("<h2>model.yml</h2>")
    parts.append(f'<pre class="yaml">{esc(m.model_yml)}</pre>' if m.model_yml is not None else
                 '<p class="note">No model.yml: this model entered the site from results files only.</p>')
    parts.append("<h2>Results documents</h2>")
    items = []
    for d in sorted(m.results, key=lambda d: (d["task"], _split_key(d["split"]))):
        pred = d.get("predictions") or {}
        items.append(f"<li>{esc(d['task'])} · {esc(d['split'])}: {esc(d['n_samples'])} samples, "
                     f"{esc(d['n_failed'])} failed; predictions "
                     f"<code>{esc(Path(str(pred.get('path') or 'in-memory')).name)}"
                     f"</code> sha256 <code>{esc(str(pred.get('sha256') or '–')[:16])}</code>; "
                     f"c2np {esc(d.get('versions', {}).get('c2np', '?'))}, {esc(d.get('created_utc', ''))}</li>")
        failed = d.get("failed_samples") or []
        if failed:
            shown_f = "".join(f"<li><code>{esc(f['sample_id'])}</code>: {esc(f['reason'])}</li>" for f in failed[:50])
            more = f"<li>… and {len(failed) - 50} more</li>" if len(failed) > 50 else ""
            items.append(f"<li><details><summary>{len(failed)} failed samples</summary><ul>{shown_f}{more}</ul>"
                         "</details></li>")
    parts.append("<ul>" + "".join(items) + "</ul>")
    return "\n".join(p for p in parts if p)


def build_site(models: Sequence[SiteModel], out_dir: str | os.PathLike[str], *, store: Any = None,
               title: str = "C2NP leaderboard", log: Callable[[str], None] | None = None) -> SiteSummary:
    """Write the site for ``models`` into ``out_dir``. ``store`` (a ``DatasetStore`` with the
    results' fingerprint) enables the particle viewer; without it the site has no viewer.
    Results that mix protocols, dataset fingerprints or subsets are bad input."""
    t0 = time.perf_counter()
    if not models:
        raise C2NPInputError("no models to put on the site")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise C2NPInputError(f"{out}: exists and is not a folder")
    say = log or (lambda _m: None)
    s = _Site(models, out, store, title, say)
    w = s.w
    w.copy(_plotly_js(), "assets/plotly.min.js")
    assets = Path(__file__).parent / "assets"
    for name in _ASSETS:
        w.copy(assets / name, f"assets/{name}")
    for m in s.models.values():
        if "forward" in m.tasks:
            say(f"site: particle viewer of {m.model_id}")
            s.build_viewer(m)
    pages = []
    for task in s.tasks():
        pages.append(w.text(f"task-{task}.html", page(TASK_TITLES[task], _task_page(s, task), root="",
                                                    subtitle=f"protocol {s.protocol_name}, subset {s.subset}")))
    for m in s.models.values():
        pages.append(w.text(f"models/{model_slug(m.model_id)}.html",
                            page(f"Model: {m.model_id}", _model_page(s, m), root="../")))
    index = w.text("index.html", page(s.title, _index_page(s), root="",
                                      subtitle="Crystal-to-Nanoparticle benchmark: leaderboard"))
    pages.insert(0, index)
    import plotly

    from c2np.version import __version__

    manifest = {"schema": SITE_SCHEMA, "title": s.title, "protocol": s.protocol_name, "subset": s.subset,
                "fingerprint": s.fingerprint, "models": sorted(s.models),
                "pages": [str(p.relative_to(out)) for p in pages],
                "viewers": {k: str(v.relative_to(out)) for k, v in sorted(s.viewers.items())},
                "tables": sorted(str(p.relative_to(out)) for p in s.tables), "notes": s.notes,
                "versions": {"c2np": __version__, "plotly.py": plotly.__version__},
                "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    w.text("site.json", json.dumps(manifest, indent=1))
    total = sum(p.stat().st_size for p in set(w.written))
    return SiteSummary(out, index, tuple(pages), tuple(s.tables), tuple(s.viewers.values()), tuple(s.notes),
                       total, time.perf_counter() - t0)
