"""Tables of the site: leaderboard rows with raw scores, 95 % intervals, normalised scores
and failure counts; their CSV and JSON downloads; their sortable HTML.

A table always carries the reference baselines of its task
(:data:`c2np.report.REFERENCE_BASELINES`) on its rows; a baseline without results appears
as a row marked "not in the inputs", never silently dropped.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from c2np.report import REFERENCE_BASELINES, LeaderboardRow
from c2np.site.pages import esc, format_value

__all__ = ["Column", "Table", "leaderboard_table", "summary_table", "all_metrics_table",
           "table_html", "MISSING_NOTE"]

MISSING_NOTE = "not in the inputs"


@dataclass(frozen=True)
class Column:
    """One column.

    Attributes:
        key: record key (and CSV / JSON column name).
        label: header text.
        kind: ``text``, ``int``, ``number`` or ``metric`` (a record value
            ``{"mean", "ci95"}``, shown with its interval; CSV columns ``key``,
            ``key_ci95_lo``, ``key_ci95_hi``).
        unit: unit of a metric ("" when dimensionless).
        better: ``higher`` / ``lower`` / "" (shown as an arrow).
        link: the column holds model ids that link to model pages.
        shown: False for a column that is in the CSV / JSON downloads only (its values are
            on the page in another cell, or the same on every row).
        detail: key of a number shown in small print under a metric cell (its normalised
            score), "" for none.
        wrap: the column's text may wrap (long category labels).
    """

    key: str
    label: str
    kind: str = "text"
    unit: str = ""
    better: str = ""
    link: bool = False
    shown: bool = True
    detail: str = ""
    wrap: bool = False


@dataclass(frozen=True)
class Table:
    """A table: an id (its download file stem), a title, columns and records."""

    table_id: str
    title: str
    columns: tuple[Column, ...]
    records: tuple[Mapping[str, Any], ...]
    note: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)

    def flat_records(self) -> list[dict[str, Any]]:
        """Records with metric cells split into mean and interval columns."""
        out = []
        for r in self.records:
            flat: dict[str, Any] = {}
            for c in self.columns:
                v = r.get(c.key)
                if c.kind == "metric":
                    cell = v if isinstance(v, Mapping) else {}
                    ci = cell.get("ci95") or (None, None)
                    flat[c.key] = cell.get("mean")
                    flat[f"{c.key}_ci95_lo"], flat[f"{c.key}_ci95_hi"] = ci[0], ci[1]
                else:
                    flat[c.key] = v
            out.append(flat)
        return out

    def to_csv(self) -> str:
        """The table as CSV text (header = flat column names; empty cell = missing)."""
        flat = self.flat_records()
        names = list(flat[0]) if flat else [c.key for c in self.columns]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(names)
        for r in flat:
            w.writerow(["" if r.get(n) is None else (repr(r[n]) if isinstance(r[n], float) else r[n])
                        for n in names])
        return buf.getvalue()

    def to_json(self) -> str:
        """The table as JSON: ``{table, title, note, meta, columns, rows}``."""
        cols = [{"key": c.key, "label": c.label, "kind": c.kind, "unit": c.unit, "better": c.better}
                for c in self.columns]
        return json.dumps({"table": self.table_id, "title": self.title, "note": self.note,
                           "meta": dict(self.meta), "columns": cols, "rows": self.flat_records()},
                          indent=1, allow_nan=False)


def _metric_columns(names: Sequence[str], info: Mapping[str, Mapping[str, Any]], *,
                    normalised: bool) -> list[Column]:
    """A column per metric; with ``normalised``, its normalised score as a download-only
    column that the page shows under the metric's cell."""
    cols = []
    for n in names:
        m = info.get(n, {})
        unit = "" if m.get("unit") in (None, "1") else str(m.get("unit"))
        better = str(m.get("better") or "")
        norm = f"{n}_normalised"
        cols.append(Column(n, n + (f" ({unit})" if unit else ""), "metric", unit, better,
                           detail=norm if normalised else ""))
        if normalised:
            cols.append(Column(norm, f"{n} normalised", "number", "", better, shown=False))
    return cols


def _is_empty(value: Any) -> bool:
    """A cell without a value: None, or a metric cell without a mean."""
    return value is None or (isinstance(value, Mapping) and value.get("mean") is None)


def drop_empty_columns(columns: Sequence[Column], records: Sequence[Mapping[str, Any]]) -> tuple[Column, ...]:
    """``columns`` without those that have no value on any row (a column of dashes); the
    model column always stays. A normalised score shown under a dropped metric goes too."""
    keep = [c for c in columns if c.link or any(not _is_empty(r.get(c.key)) for r in records)]
    kept = {c.key for c in keep}
    return tuple(c if not c.detail or c.detail in kept else replace(c, detail="") for c in keep)


def _category_columns() -> tuple[Column, Column]:
    return Column("model", "model", link=True), Column("kind", "category", wrap=True)


def _order(rows: Sequence[LeaderboardRow], headline: str) -> list[LeaderboardRow]:
    def key(r: LeaderboardRow) -> tuple[int, float, str]:
        v = r.metrics.get(headline)
        hib = r.higher_is_better.get(headline, True)
        if v is None:
            return (1, 0.0, r.model)
        return (0, -float(v) if hib else float(v), r.model)

    return sorted(rows, key=key)


def leaderboard_table(rows: Sequence[LeaderboardRow], task: str, split: str,
                      metrics: Sequence[str], *, kinds: Mapping[str, str],
                      info: Mapping[str, Mapping[str, Any]], table_id: str, title: str,
                      models: Sequence[str] | None = None) -> Table:
    """Headline table of (task, split): one row per model (``models``, or all; the task's
    reference baselines always), ordered by the first metric (best first), with each
    metric's failure-penalised mean and 95 % interval, its normalised score, n and failures.
    ``rows`` must already be normalised (:func:`c2np.report.normalise`)."""
    mine = [r for r in rows if r.task == task and r.split == split
            and (models is None or r.model in models or r.model in REFERENCE_BASELINES[task])]
    records: list[dict[str, Any]] = []
    for r in _order(mine, metrics[0]):
        rec: dict[str, Any] = {"model": r.model, "kind": kinds.get(r.model, "model"), "split": split,
                               "n": r.n_samples, "n_failed": r.n_failed}
        for n in metrics:
            rec[n] = {"mean": r.metrics.get(n), "ci95": r.ci95.get(n)}
            rec[f"{n}_normalised"] = r.normalised.get(n)
        records.append(rec)
    present = {r.model for r in mine}
    for b in REFERENCE_BASELINES[task]:
        if b not in present:
            records.append({"model": b, "kind": f"{kinds.get(b, 'baseline')}: {MISSING_NOTE}",
                            "split": split, "n": None, "n_failed": None})
    cols = (*_category_columns(), Column("split", "split", shown=False),
            Column("n", "n", "int"), Column("n_failed", "failed", "int"),
            *_metric_columns(metrics, info, normalised=True))
    return Table(table_id, title, drop_empty_columns(cols, records), tuple(records),
                 note="failure-penalised mean [95 % bootstrap interval], under it the normalised "
                      "score (0 = floor baseline, 1 = ceiling; see c2np.report); failures count at "
                      "their worst value",
                 meta={"task": task, "split": split})


def structure_type_site_table(rows: Sequence[LeaderboardRow], split: str, metric: str, *,
                              kinds: Mapping[str, str], info: Mapping[str, Mapping[str, Any]],
                              table_id: str, title: str) -> Table | None:
    """Task 2 per structure type on ``split``: a row per model (ordered as the headline
    table), a column per structure type (seen types first, each marked seen or unseen by the
    store's training materials, with its number of rows) holding ``metric`` and its 95 %
    interval; None when no model's results have more than one type."""
    mine = [r for r in rows if r.task == "inverse" and r.split == split and len(r.per_structure_type) > 1]
    if not mine:
        return None
    trained = set(mine[0].structure_types_in_training)
    types = sorted({t for r in mine for t in r.per_structure_type}, key=lambda t: (t not in trained, t))
    n = {t: next(int(r.per_structure_type[t][metric]["n"]) for r in mine
                 if metric in r.per_structure_type.get(t, {})) for t in types}
    records: list[dict[str, Any]] = []
    for r in _order(mine, metric):
        rec: dict[str, Any] = {"model": r.model, "kind": kinds.get(r.model, "model"), "split": split}
        for t in types:
            g = r.per_structure_type.get(t, {}).get(metric)
            rec[t] = None if g is None else {"mean": g.get("mean"), "ci95": g.get("ci95")}
        records.append(rec)
    better = str(info.get(metric, {}).get("better") or "")
    cols = (*_category_columns(), Column("split", "split", shown=False),
            *(Column(t, f"{t} ({'seen' if t in trained else 'unseen'}, n={n[t]})", "metric", better=better)
              for t in types))
    return Table(table_id, title, cols, tuple(records),
                 note=f"{metric} per structure type: failure-penalised mean [95 % bootstrap interval]; "
                      "'unseen': no training material of the store has that type",
                 meta={"task": "inverse", "split": split, "metric": metric})


def summary_table(rows: Sequence[LeaderboardRow], task: str, splits: Sequence[str], metric: str, *,
                  kinds: Mapping[str, str], info: Mapping[str, Mapping[str, Any]], table_id: str,
                  title: str) -> Table:
    """One row per model of ``task``: ``metric`` per split (mean, 95 % interval, normalised,
    failures), ordered by the first split's value; the reference baselines always."""
    by_model: dict[str, dict[str, LeaderboardRow]] = {}
    for row in rows:
        if row.task == task and row.split in splits:
            by_model.setdefault(row.model, {})[row.split] = row
    first = [by_model[m][splits[0]] for m in by_model if splits[0] in by_model[m]]
    order = [x.model for x in _order(first, metric)]
    order += sorted(m for m in by_model if m not in order)
    records: list[dict[str, Any]] = []
    for m in order:
        rec: dict[str, Any] = {"model": m, "kind": kinds.get(m, "model")}
        for s in splits:
            r = by_model[m].get(s)
            rec[f"{s}:{metric}"] = {"mean": r.metrics.get(metric), "ci95": r.ci95.get(metric)} if r else None
            rec[f"{s}:{metric}_normalised"] = r.normalised.get(metric) if r else None
            rec[f"{s}:n_failed"] = r.n_failed if r else None
            rec[f"{s}:n"] = r.n_samples if r else None
        records.append(rec)
    for b in REFERENCE_BASELINES[task]:
        if b not in by_model:
            records.append({"model": b, "kind": f"{kinds.get(b, 'baseline')}: {MISSING_NOTE}"})
    m_info = info.get(metric, {})
    unit = "" if m_info.get("unit") in (None, "1") else f" ({m_info.get('unit')})"
    better = str(m_info.get("better") or "")
    cols: list[Column] = list(_category_columns())
    for s in splits:
        cols += [Column(f"{s}:{metric}", f"{s.upper()} {metric}{unit}", "metric", better=better,
                        detail=f"{s}:{metric}_normalised"),
                 Column(f"{s}:{metric}_normalised", f"{s.upper()} normalised", "number", better=better,
                        shown=False),
                 Column(f"{s}:n", f"{s.upper()} n", "int"),
                 Column(f"{s}:n_failed", f"{s.upper()} failed", "int")]
    return Table(table_id, title, drop_empty_columns(cols, records), tuple(records),
                 note="failure-penalised mean [95 % bootstrap interval], under it the normalised score "
                      "(0 = floor, 1 = ceiling); splits in scoring order; \"not scored\": the model has "
                      "no results on that split (a submission lists the splits it answers), not a failure",
                 meta={"task": task, "metric": metric, "splits": list(splits)})


def all_metrics_table(rows: Sequence[LeaderboardRow], task: str, split: str, *,
                      kinds: Mapping[str, str], info: Mapping[str, Mapping[str, Any]],
                      table_id: str, title: str) -> Table:
    """Every metric of (task, split) for every model (mean and 95 % interval)."""
    mine = [r for r in rows if r.task == task and r.split == split]
    names = [n for n in info if any(n in r.metrics for r in mine)]
    records = []
    for r in sorted(mine, key=lambda x: x.model):
        rec: dict[str, Any] = {"model": r.model, "kind": kinds.get(r.model, "model"),
                               "n": r.n_samples, "n_failed": r.n_failed}
        for n in names:
            rec[n] = {"mean": r.metrics.get(n), "ci95": r.ci95.get(n)}
        records.append(rec)
    cols = (*_category_columns(), Column("n", "n", "int"),
            Column("n_failed", "failed", "int"), *_metric_columns(names, info, normalised=False))
    return Table(table_id, title, drop_empty_columns(cols, records), tuple(records),
                 note="failure-penalised mean [95 % bootstrap interval]",
                 meta={"task": task, "split": split})


def _sort_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    return esc(repr(float(value)) if isinstance(value, (int, float)) else value)


def _breakable(text: str) -> str:
    """Escaped ``text`` that may wrap after ``_``, ``+`` and ``:`` (long metric and model names)."""
    out = esc(text)
    for ch in ("_", "+", ":"):
        out = out.replace(ch, ch + "<wbr>")
    return out


def _cell(c: Column, value: Any, href: Callable[[str], str | None], detail: Any = None) -> str:
    if c.kind == "metric":
        if value is None:  # no results on this split: not a failure (failures are scored)
            return ('<td class="num na" data-sort="" title="no results on this split">not scored</td>')
        cell = value if isinstance(value, Mapping) else {}
        mean = cell.get("mean")
        ci = cell.get("ci95")
        ci_txt = (f' <span class="ci">[{format_value(ci[0])}, {format_value(ci[1])}]</span>'
                  if ci else "")
        norm = (f'<span class="norm" title="normalised score">{format_value(detail)}</span>'
                if c.detail and detail is not None else "")
        return f'<td class="num" data-sort="{_sort_value(mean)}">{format_value(mean)}{ci_txt}{norm}</td>'
    if c.kind in ("int", "number"):
        txt = "" if value is None else (str(int(value)) if c.kind == "int" else format_value(value))
        return f'<td class="num" data-sort="{_sort_value(value)}">{txt}</td>'
    text = "" if value is None else str(value)
    link = href(text) if c.link and text else None
    body = f'<a href="{esc(link)}">{_breakable(text)}</a>' if link else _breakable(text)
    cls = ' class="wrap"' if c.wrap or c.link else ""
    return f'<td{cls} data-sort="{esc(text)}">{body}</td>'


def table_html(table: Table, *, downloads_prefix: str, href: Callable[[str], str | None]) -> str:
    """The table as a sortable HTML block with its CSV / JSON download links
    (``downloads_prefix`` + ``tables/<id>.csv``). Clicking a header sorts by that column
    (``site.js``); every text is escaped."""
    head = []
    shown = [c for c in table.columns if c.shown]
    for c in shown:
        arrow = {"higher": " ↑", "lower": " ↓"}.get(c.better, "")
        tip = {"higher": "higher is better", "lower": "lower is better"}.get(c.better, c.better)
        typ = "number" if c.kind in ("int", "number", "metric") else "text"
        head.append(f'<th data-type="{typ}" data-key="{esc(c.key)}" title="{esc(tip)}" tabindex="0">'
                    f'{_breakable(c.label)}{arrow}</th>')
    body = []
    for r in table.records:
        missing = MISSING_NOTE in str(r.get("kind", ""))
        cls = ' class="missing"' if missing else ""
        body.append(f"<tr{cls}>" + "".join(_cell(c, r.get(c.key), href, r.get(c.detail) if c.detail else None)
                                            for c in shown) + "</tr>")
    tid = esc(table.table_id)
    dl = (f'<a href="{esc(downloads_prefix)}tables/{tid}.csv" download>CSV</a> · '
          f'<a href="{esc(downloads_prefix)}tables/{tid}.json" download>JSON</a>')
    note = f'<p class="note">{esc(table.note)}</p>' if table.note else ""
    return (f'<section class="table-block"><h3>{esc(table.title)}</h3>'
            f'<p class="downloads">download: {dl}</p>{note}'
            f'<div class="table-scroll"><table class="c2np-table" id="table-{tid}">'
            f'<thead><tr>{"".join(head)}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'
            f"</section>")
