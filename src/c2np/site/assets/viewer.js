/* c2np particle viewer: predicted and reference particle with plotly scatter3d (WebGL).
 * Data: <script type="application/json"> with a list of payloads (c2np.site.viewer).
 * Controls: sample, layout (side by side / overlay), colour (element / error class),
 * atoms (all / surface shell / interior). Every text from data goes in via textContent. */
(function () {
  "use strict";
  function bytes(b64) {
    var s = atob(b64), out = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) { out[i] = s.charCodeAt(i); }
    return out;
  }
  function decodeSide(side) {
    var raw = bytes(side.pos);
    return {n: side.n, pos: new Float32Array(raw.buffer, 0, side.n * 3),
            el: bytes(side.el), cls: bytes(side.cls), surf: bytes(side.surf)};
  }
  function decode(p) {
    if (!p._decoded) { p._decoded = {ref: decodeSide(p.ref), pred: decodeSide(p.pred)}; }
    return p._decoded;
  }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs) { if (Object.prototype.hasOwnProperty.call(attrs, k)) { e.setAttribute(k, attrs[k]); } }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function choice(parent, label, name, options) {
    var wrap = el("label", {"class": "control"});
    wrap.appendChild(document.createTextNode(label + " "));
    var sel = el("select", {"name": name});
    for (var i = 0; i < options.length; i++) {
      sel.appendChild(el("option", {"value": options[i][0]}, options[i][1]));
    }
    wrap.appendChild(sel);
    parent.appendChild(wrap);
    return sel;
  }
  function traces(p, opts) {
    var d = decode(p), out = [];
    var sides = [["ref", "reference"], ["pred", "predicted"]];
    for (var s = 0; s < sides.length; s++) {
      var key = sides[s][0], side = d[key];
      var byClass = opts.colour === "error";
      var groups = byClass ? p.classes[key] : p.elements.map(function (e) { return e.symbol; });
      var buckets = groups.map(function () { return []; });
      for (var i = 0; i < side.n; i++) {
        var surf = side.surf[i] === 1;
        if ((opts.atoms === "surface" && !surf) || (opts.atoms === "interior" && surf)) { continue; }
        buckets[byClass ? side.cls[i] : side.el[i]].push(i);
      }
      for (var g = 0; g < groups.length; g++) {
        var idx = buckets[g];
        if (idx.length === 0) { continue; }
        var x = new Float32Array(idx.length), y = new Float32Array(idx.length), z = new Float32Array(idx.length);
        var size = 0;
        for (var j = 0; j < idx.length; j++) {
          var a = idx[j];
          x[j] = side.pos[3 * a]; y[j] = side.pos[3 * a + 1]; z[j] = side.pos[3 * a + 2];
          size += p.elements[side.el[a]].size;
        }
        var overlayRef = opts.layout === "overlay" && key === "ref";
        out.push({
          type: "scatter3d", mode: "markers", x: x, y: y, z: z,
          name: sides[s][1] + ": " + groups[g] + " (" + idx.length + ")",
          legendgroup: key, hoverinfo: opts.hover ? "name" : "skip",
          scene: opts.layout === "side" && key === "pred" ? "scene2" : "scene",
          marker: {size: size / idx.length, color: byClass ? p.classes.colours[g] : p.elements[g].colour,
                   symbol: overlayRef ? "circle-open" : "circle", opacity: overlayRef ? 0.45 : 0.9,
                   line: {width: 0}}
        });
      }
    }
    return out;
  }
  function sceneLayout(r, domain, hover) {
    var ax = function (t) {
      return {title: {text: t + " (Å)"}, range: [-r, r], showbackground: false, gridcolor: "#ddd", zeroline: false};
    };
    return {domain: {x: domain, y: [0, 1]}, aspectmode: "cube", xaxis: ax("x"), yaxis: ax("y"), zaxis: ax("z"),
            camera: {eye: {x: 1.5, y: 1.5, z: 1.1}}, hovermode: hover ? "closest" : false};
  }
  function layout(p, opts) {
    var r = p.radius_angstrom + 2.0;
    var lay = {margin: {l: 0, r: 0, t: 30, b: 0}, showlegend: true, legend: {x: 0, y: 1, font: {size: 11}},
               paper_bgcolor: "#ffffff", uirevision: opts.layout, hovermode: opts.hover ? "closest" : false};
    if (opts.layout === "side") {
      lay.scene = sceneLayout(r, [0, 0.5], opts.hover);
      lay.scene2 = sceneLayout(r, [0.5, 1], opts.hover);
      lay.annotations = [
        {text: "reference", x: 0.25, y: 1.0, xref: "paper", yref: "paper", showarrow: false, yanchor: "bottom"},
        {text: "predicted", x: 0.75, y: 1.0, xref: "paper", yref: "paper", showarrow: false, yanchor: "bottom"}];
    } else {
      lay.scene = sceneLayout(r, [0, 1], opts.hover);
      lay.annotations = [{text: "overlay: reference open circles, prediction filled", x: 0.5, y: 1.0,
                          xref: "paper", yref: "paper", showarrow: false, yanchor: "bottom"}];
    }
    return lay;
  }
  function afterFrames() {
    return new Promise(function (resolve) {
      requestAnimationFrame(function () { requestAnimationFrame(resolve); });
    });
  }
  function linkCameras(plot) {
    var syncing = false;
    plot.on("plotly_relayout", function (ev) {
      if (syncing || !plot.layout.scene2) { return; }
      var update = null;
      if (ev["scene.camera"]) { update = {"scene2.camera": ev["scene.camera"]}; }
      else if (ev["scene2.camera"]) { update = {"scene.camera": ev["scene2.camera"]}; }
      if (!update) { return; }
      syncing = true;
      Promise.resolve(window.Plotly.relayout(plot, update)).then(function () { syncing = false; },
                                                                  function () { syncing = false; });
    });
  }

  window.C2NP.initViewer = function (root) {
    var payloads = window.C2NP.readJSON(root.getAttribute("data-payloads"));
    var controls = el("div", {"class": "viewer-controls"});
    var sample = choice(controls, "sample", "sample", payloads.map(function (p, i) {
      return [String(i), p.split.toUpperCase() + " · " + p.sample_id + " (R = " + p.radius_angstrom + " Å)"];
    }));
    var lay = choice(controls, "layout", "layout", [["side", "side by side"], ["overlay", "overlaid"]]);
    var colour = choice(controls, "colour", "colour", [["element", "by element"], ["error", "by error (0.1 / 0.5 Å)"]]);
    var atoms = choice(controls, "atoms", "atoms", [["all", "all atoms"], ["surface", "surface shell"],
                                                    ["interior", "interior"]]);
    var hover = choice(controls, "hover labels", "hover", [["off", "off (faster)"], ["on", "on"]]);
    var info = el("p", {"class": "viewer-info"});
    var plot = el("div", {"class": "viewer-plot"});
    root.appendChild(controls);
    root.appendChild(info);
    root.appendChild(plot);
    var first = true;
    function opts() {
      return {layout: lay.value, colour: colour.value, atoms: atoms.value, hover: hover.value === "on"};
    }
    function describe(p, ms) {
      var sc = p.scores, parts = [p.model + " · " + p.sample_id,
        "reference " + p.ref.n + " atoms, predicted " + p.pred.n + " atoms",
        "matched within 0.1 Å: " + p.matched["0.1"] + ", within 0.5 Å: " + p.matched["0.5"]];
      if (sc["f1@0.1"] !== undefined) { parts.push("F1@0.1 " + sc["f1@0.1"].toFixed(3) + ", F1@0.5 " + sc["f1@0.5"].toFixed(3)); }
      parts.push("surface shell: outer " + p.surface_depth_angstrom + " Å");
      if (ms !== undefined) { parts.push("rendered in " + ms.toFixed(0) + " ms"); }
      info.textContent = parts.join(" · ");
    }
    function draw() {
      var p = payloads[Number(sample.value)], o = opts();
      var t0 = performance.now();
      var data = traces(p, o);
      return Promise.resolve(window.Plotly.react(plot, data, layout(p, o), window.C2NP.plotConfig))
        .then(afterFrames).then(function () {
          var ms = performance.now() - t0;
          root.setAttribute("data-render-ms", ms.toFixed(1));
          if (first) {
            first = false;
            document.body.setAttribute("data-c2np-viewer-ms", ms.toFixed(1));
            linkCameras(plot);
          }
          describe(p, ms);
        });
    }
    function redraw() { draw().catch(function (e) { window.C2NP.countError(e && e.message || e); }); }
    sample.addEventListener("change", redraw);
    lay.addEventListener("change", redraw);
    colour.addEventListener("change", redraw);
    atoms.addEventListener("change", redraw);
    hover.addEventListener("change", redraw);
    window.C2NP.viewers.push({root: root, draw: draw, controls: {sample: sample, layout: lay, colour: colour, atoms: atoms, hover: hover}});
    return draw();
  };
})();
