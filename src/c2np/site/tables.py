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
from dataclasses import dataclass, field
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
    """

    key: str
    label: str
    kind: str = "text"
    unit: str = ""
    better: str = ""
    link: bool = False


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
    cols = []
    for n in names:
        m = info.get(n, {})
        unit = "" if m.get("unit") in (None, "1") else str(m.get("unit"))
        better = str(m.get("better") or "")
        cols.append(Column(n, n + (f" ({unit})" if unit else ""), "metric", unit, better))
        if normalised:
            cols.append(Column(f"{n}_normalised", f"{n} normalised", "number", "", better))
    return cols


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
    cols = (Column("model", "model", link=True), Column("kind", "category"), Column("split", "split"),
            Column("n", "n", "int"), Column("n_failed", "failed", "int"),
            *_metric_columns(metrics, info, normalised=True))
    return Table(table_id, title, tuple(cols), tuple(records),
                 note="failure-penalised mean [95 % bootstrap interval]; normalised: 0 = floor "
                      "baseline, 1 = ceiling (see c2np.report); failures count at their worst value",
                 meta={"task": task, "split": split})


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
    cols: list[Column] = [Column("model", "model", link=True), Column("kind", "category")]
    for s in splits:
        cols += [Column(f"{s}:{metric}", f"{s.upper()} {metric}{unit}", "metric", better=better),
                 Column(f"{s}:{metric}_normalised", f"{s.upper()} normalised", "number", better=better),
                 Column(f"{s}:n", f"{s.upper()} n", "int"),
                 Column(f"{s}:n_failed", f"{s.upper()} failed", "int")]
    return Table(table_id, title, tuple(cols), tuple(records),
                 note="failure-penalised mean [95 % bootstrap interval]; normalised: 0 = floor, "
                      "1 = ceiling", meta={"task": task, "metric": metric, "splits": list(splits)})


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
    cols = (Column("model", "model", link=True), Column("kind", "category"), Column("n", "n", "int"),
            Column("n_failed", "failed", "int"), *_metric_columns(names, info, normalised=False))
    return Table(table_id, title, tuple(cols), tuple(records),
                 note="failure-penalised mean [95 % bootstrap interval]",
                 meta={"task": task, "split": split})


def _sort_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    return esc(repr(float(value)) if isinstance(value, (int, float)) else value)


def _cell(c: Column, value: Any, href: Callable[[str], str | None]) -> str:
    if c.kind == "metric":
        cell = value if isinstance(value, Mapping) else {}
        mean = cell.get("mean")
        ci = cell.get("ci95")
        ci_txt = (f' <span class="ci">[{format_value(ci[0])}, {format_value(ci[1])}]</span>'
                  if ci else "")
        return f'<td class="num" data-sort="{_sort_value(mean)}">{format_value(mean)}{ci_txt}</td>'
    if c.kind in ("int", "number"):
        txt = "–" if value is None else (str(int(value)) if c.kind == "int" else format_value(value))
        return f'<td class="num" data-sort="{_sort_value(value)}">{txt}</td>'
    text = "" if value is None else str(value)
    link = href(text) if c.link and text else None
    body = f'<a href="{esc(link)}">{esc(text)}</a>' if link else esc(text)
    return f'<td data-sort="{esc(text)}">{body}</td>'


def table_html(table: Table, *, downloads_prefix: str, href: Callable[[str], str | None]) -> str:
    """The table as a sortable HTML block with its CSV / JSON download links
    (``downloads_prefix`` + ``tables/<id>.csv``). Clicking a header sorts by that column
    (``site.js``); every text is escaped."""
    head = []
    for c in table.columns:
        arrow = {"higher": " ↑", "lower": " ↓"}.get(c.better, "")
        tip = {"higher": "higher is better", "lower": "lower is better"}.get(c.better, "")
        typ = "number" if c.kind in ("int", "number", "metric") else "text"
        head.append(f'<th data-type="{typ}" data-key="{esc(c.key)}" title="{esc(tip)}" tabindex="0">'
                    f'{esc(c.label)}{arrow}</th>')
    body = []
    for r in table.records:
        missing = MISSING_NOTE in str(r.get("kind", ""))
        cls = ' class="missing"' if missing else ""
        body.append(f"<tr{cls}>" + "".join(_cell(c, r.get(c.key), href) for c in table.columns) + "</tr>")
    tid = esc(table.table_id)
    dl = (f'<a href="{esc(downloads_prefix)}tables/{tid}.csv" download>CSV</a> · '
          f'<a href="{esc(downloads_prefix)}tables/{tid}.json" download>JSON</a>')
    note = f'<p class="note">{esc(table.note)}</p>' if table.note else ""
    return (f'<section class="table-block"><h3>{esc(table.title)}</h3>'
            f'<p class="downloads">download: {dl}</p>{note}'
            f'<div class="table-scroll"><table class="c2np-table" id="table-{tid}">'
            f'<thead><tr>{"".join(head)}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'
            f"</section>")
