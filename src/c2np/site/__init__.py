"""The offline HTML report: a self-contained static site built from results documents.

* :mod:`c2np.site.sources`: what a site is built from (results documents, read through one
  reader, grouped per model with its ``model.yml``, prediction files and training log);
* :mod:`c2np.site.tables`: sortable tables with raw and normalised scores, CIs and failure
  counts, and their CSV / JSON downloads;
* :mod:`c2np.site.plots`: the interactive plots (plotly figure documents);
* :mod:`c2np.site.viewer`: the 3D particle viewer's data (per-atom error classes from
  :func:`c2np.metrics.tolerance_matching`);
* :mod:`c2np.site.pages`: the HTML shell (every user string escaped);
* :mod:`c2np.site.builder`: which pages exist and writing them, with the bundled assets
  (plotly.js from the plotly wheel), so that ``index.html`` opens from ``file://``;
* :mod:`c2np.site.browser`: headless Chromium checks of a built site (tests, benchmarks).

See docs/report.md. Nothing here is imported by ``import c2np``.
"""

from __future__ import annotations

__all__: list[str] = []
