/* c2np site runtime: error counting, readiness flag, plots, sortable tables.
 * <body data-c2np-ready> becomes "1" once every plot and viewer has rendered without error;
 * data-c2np-errors counts errors caught by window.onerror (and rejected promises);
 * data-c2np-done becomes "1" when every render task has settled (rendered or failed). */
(function () {
  "use strict";
  var errors = 0, pending = 0, started = false, messages = [];
  function body() { return document.body; }
  function set(name, value) { var b = body(); if (b) { b.setAttribute(name, String(value)); } }
  function countError(message) {
    errors += 1;
    messages.push(String(message));
    set("data-c2np-errors", errors);
  }
  window.onerror = function (message, source, line) {
    countError(message + " (" + source + ":" + line + ")");
    return false;
  };
  window.addEventListener("unhandledrejection", function (event) {
    countError("unhandled rejection: " + (event.reason && event.reason.message || event.reason));
  });
  function check() {
    if (!started || pending > 0) { return; }
    set("data-c2np-done", 1);
    if (errors === 0) { set("data-c2np-ready", 1); }
  }
  function track(promise) {
    pending += 1;
    return Promise.resolve(promise).then(function (value) {
      pending -= 1; check(); return value;
    }, function (err) {
      countError(err && err.message || err); pending -= 1; check();
    });
  }
  function readJSON(id) {
    var el = document.getElementById(id);
    if (!el) { throw new Error("no embedded data #" + id); }
    return JSON.parse(el.textContent);
  }
  var plotConfig = {displaylogo: false, responsive: true, showLink: false,
                    modeBarButtonsToRemove: ["sendDataToCloud"]};

  function renderPlots() {
    var slots = document.querySelectorAll(".c2np-plot");
    for (var i = 0; i < slots.length; i++) {
      var div = slots[i];
      var fig = readJSON(div.getAttribute("data-figure"));
      track(window.Plotly.newPlot(div, fig.data, fig.layout, plotConfig));
    }
  }

  /* Sortable tables: click (or Enter on) a header; numbers by data-sort, missing last. */
  function sortTable(table, col, th) {
    var tbody = table.tBodies[0];
    var numeric = th.getAttribute("data-type") === "number";
    var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    var heads = table.tHead.rows[0].cells;
    for (var h = 0; h < heads.length; h++) { heads[h].removeAttribute("aria-sort"); }
    th.setAttribute("aria-sort", dir);
    var rows = Array.prototype.slice.call(tbody.rows);
    var sign = dir === "ascending" ? 1 : -1;
    rows.sort(function (a, b) {
      var x = a.cells[col].getAttribute("data-sort"), y = b.cells[col].getAttribute("data-sort");
      if (x === "" && y === "") { return 0; }
      if (x === "") { return 1; }
      if (y === "") { return -1; }
      if (numeric) { return sign * (parseFloat(x) - parseFloat(y)); }
      return sign * x.localeCompare(y);
    });
    for (var r = 0; r < rows.length; r++) { tbody.appendChild(rows[r]); }
  }
  function initTables() {
    var tables = document.querySelectorAll("table.c2np-table");
    for (var t = 0; t < tables.length; t++) {
      (function (table) {
        var heads = table.tHead.rows[0].cells;
        for (var c = 0; c < heads.length; c++) {
          (function (col, th) {
            th.addEventListener("click", function () { sortTable(table, col, th); });
            th.addEventListener("keydown", function (e) {
              if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortTable(table, col, th); }
            });
          })(c, heads[c]);
        }
      })(tables[t]);
    }
  }

  window.C2NP = {
    track: track,
    readJSON: readJSON,
    countError: countError,
    plotConfig: plotConfig,
    errors: function () { return errors; },
    messages: messages,
    viewers: [],
    start: function () {
      set("data-c2np-errors", errors);
      try {
        if (!window.Plotly) { throw new Error("plotly.js did not load"); }
        initTables();
        renderPlots();
        var views = document.querySelectorAll(".c2np-viewer");
        for (var v = 0; v < views.length; v++) { track(window.C2NP.initViewer(views[v])); }
      } catch (err) {
        countError(err && err.message || err);
      }
      started = true;
      check();
    }
  };
})();
