// sweeper dashboard: polls the JSON API, draws with plotly.js (served by the dashboard itself).
"use strict";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const COLORS = {success: "#1a9850", failure: "#d73027", diverged: "#7b3294", other: "#999999"};
const WORDS = {success: "succeeded", failure: "did not", diverged: "diverged", other: "failed/stopped"};
const POLL_MS = 1500;
const app = {sweep: params.get("sweep"), state: null, view: 0, drawn: null, phase: null,
             cell: null, failedTotal: -1, searchRevision: null, axesKey: null, timer: null,
             // the view a link restores (syncUrl writes it back as it changes)
             chosen: params.get("x") ? {x: params.get("x"), y: params.get("y"),
                                         facet: params.get("facet") || "none"} : null,
             outcome: params.get("outcome"), pendingCell: params.get("cell"),
             where: params.get("where") || "", sort: params.get("sort"),
             offset: Math.min(1e9, Math.max(0, parseInt(params.get("offset") || "0", 10) || 0)),
             order: params.get("order") === "desc" ? "desc" : "asc", colour: params.get("colour"),
             selected: (params.get("rows") || "").split(",").filter(Boolean), table: null,
             tableKey: null,
             // how curves are drawn (both plots): metrics, smoothing, log y, mean and band
             metrics: (params.get("metrics") || "").split(",").filter(Boolean),
             smooth: Math.min(0.95, Math.max(0, parseFloat(params.get("smooth") || "0") || 0)),
             logy: params.get("logy") === "1", band: params.get("band") === "1"};
window.sweeperDashboard = app;

async function api(path, args) {
  const query = new URLSearchParams(args || {});
  if (params.get("token")) query.set("token", params.get("token"));
  const response = await fetch(`/api/${path}?${query}`);
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(child ?? ""));
  }
  return node;
}

function fmt(v, digits = 3) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toPrecision(digits);
  if (typeof v === "boolean") return v ? "yes" : "no";
  return String(v);
}

function setStatus(text) { $("status").textContent = text; }

// ------------------------------------------------------------------ start and poll
// The first requests leave as soon as this script runs, while plotly.js is still parsed.
const early = {sweeps: api("sweeps")};
early.state = early.sweeps.then(({first, sweeps}) => {
  const sweep = app.sweep || first || sweeps[0];
  return sweep ? api("state", {sweep}) : null;
}).catch(() => null);
early.sweeps.catch(() => null);
early.phase = early.state.then((state) => {  // the default view, fetched in parallel as well
  const d = state && state.default;
  if (!d || !d.x || !d.y || !state.stored) return null;
  const args = {sweep: state.sweep, x: d.x, y: d.y, facet: d.facet || "none", outcome: state.outcome,
                min_seeds: "3"};
  return api("phase", args).then((data) => ({args, data}));
}).catch(() => null);

// The sweeps under the results root; the one to open is the server's choice (the sweep named
// on its command line, else the one whose driver runs, else the latest updated).
async function loadSweeps(request) {
  const {sweeps, first} = await request;
  const select = $("sweep");
  select.replaceChildren(...sweeps.map((s) => el("option", {value: s}, s)));
  app.sweep = app.sweep || first || sweeps[0] || null;
  if (app.sweep) select.value = app.sweep;
}

async function start() {
  try {
    const select = $("sweep");
    select.addEventListener("change", () => {
      app.sweep = select.value; app.view += 1; app.axesKey = null; app.cell = null;
      app.chosen = null; app.selected = []; app.where = ""; app.sort = null; app.offset = 0;
      app.tableKey = null; app.failedTotal = -1; $("cell-section").hidden = true;
      app.metrics = []; $("metrics").replaceChildren(); poll();
    });
    for (const id of ["x", "y", "facet", "outcome", "min-seeds"]) {
      $(id).addEventListener("change", () => {
        app.chosen = {x: $("x").value, y: $("y").value, facet: $("facet").value};
        app.view += 1; poll();
      });
    }
    if (params.get("min_seeds")) $("min-seeds").value = params.get("min_seeds");
    $("where").value = app.where;
    $("where").addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        app.where = $("where").value.trim(); app.offset = 0;
        drawTable().then(() => {  // the drill-down follows the filter the table accepted
          if (app.cell && app.shownWhere === app.where) openCell(app.cell.index, true, false);
        });
      }
    });
    $("page-previous").addEventListener("click", () => {
      app.offset = Math.max(0, app.offset - TABLE_PAGE); drawTable();
    });
    $("page-next").addEventListener("click", () => { app.offset += TABLE_PAGE; drawTable(); });
    $("colour").addEventListener("change", () => {
      app.colour = $("colour").value; syncUrl(); drawOverlay();
    });
    $("clear-selection").addEventListener("click", () => { app.selected = []; drawTable(); });
    await loadSweeps(early.sweeps);
    await curveControls();
  } catch (error) {
    setStatus(`error: ${error.message}`);
    return;
  }
  poll();
}

async function poll() {
  clearTimeout(app.timer);
  if (!app.sweep) {  // none yet: ask again until one lands (no reload needed)
    setStatus("no sweep under this results root yet");
    app.timer = setTimeout(() => loadSweeps(api("sweeps")).catch(() => null).then(poll), 2000);
    return;
  }
  try {
    const prefetched = early.state ? await early.state : null;
    early.state = null;
    const state = prefetched && prefetched.sweep === app.sweep ? prefetched
      : await api("state", {sweep: app.sweep});
    app.state = state;
    if (state.stored) await fillMetrics();  // (a sweep opened before its first write)
    drawProgress(state);
    // the header says what the bar says, from the same state, before the (slower) redraw
    setStatus(`${state.progress.stored} trials stored; updated ${new Date().toLocaleTimeString()}`);
    fillControls(state);
    // what is drawn is named by the store's revision and the view's version, both read before
    // the draw: a control changed while an earlier poll draws changes the version, so that
    // earlier poll's end cannot mark the new view as drawn (the change would be lost)
    const drawing = `${state.revision}|${app.view}`;
    if (drawing !== app.drawn) {
      await drawPhase();
      app.drawn = drawing;
      document.body.dataset.revision = String(state.revision);
      if (app.pendingCell) {  // a link's cell: found by its conditions once the map is drawn
        const wanted = app.pendingCell;
        app.pendingCell = null;
        const cell = app.phase && app.phase.cells.find((c) => JSON.stringify(c.conditions) === wanted);
        if (cell) await openCell(cell.index, false, false);
      } else if (app.cell) await openCell(app.cell.index, true);
      await drawTable();
      await drawSearch();
    }
    if (state.counts.failed !== app.failedTotal) {
      await drawFailed();
      app.failedTotal = state.counts.failed;
    }
  } catch (error) {
    setStatus(`error: ${error.message}`);
  }
  clearTimeout(app.timer);  // a control's change polls at once: one loop, however they overlap
  app.timer = setTimeout(poll, POLL_MS);
}

function fillControls(state) {
  const d = state.default;
  const columns = state.axes.map((a) => [a.column, `${a.label} (${a.column})`]);
  for (const c of [d.x, d.y, d.facet]) {  // a default may be a fixed column (one row)
    if (c && !columns.some(([k]) => k === c)) columns.push([c, c]);
  }
  const key = `${state.sweep}|${columns.map(([k]) => k).join(",")}|${state.outcomes.join(",")}`;
  if (key === app.axesKey) return;
  const redraw = app.axesKey !== null;
  app.axesKey = key;
  if (redraw) app.view += 1;
  const options = (includeNone) => [
    ...(includeNone ? [el("option", {value: "none"}, "none")] : []),
    ...columns.map(([k, label]) => el("option", {value: k}, label))];
  const previous = {x: $("x").value, y: $("y").value, facet: $("facet").value, outcome: $("outcome").value};
  $("x").replaceChildren(...options(false));
  $("y").replaceChildren(...options(false));
  $("facet").replaceChildren(...options(true));
  $("outcome").replaceChildren(...state.outcomes.map((o) => el("option", {value: o}, o)));
  const has = (v) => columns.some(([k]) => k === v);
  const chosen = app.chosen || {};  // what the user picked stays picked
  const x = has(chosen.x) ? chosen.x : d.x || (columns[0] || [""])[0];
  let y = has(chosen.y) && chosen.y !== x ? chosen.y : d.y;
  if (!y || y === x) y = (columns.find(([k]) => k !== x) || [""])[0];
  $("x").value = x;
  $("y").value = y;
  const facet = chosen.facet && (chosen.facet === "none" || has(chosen.facet)) ? chosen.facet : d.facet || "none";
  $("facet").value = facet === x || facet === y ? "none" : facet;
  const offered = (o) => [...$("outcome").options].some((option) => option.value === o);
  $("outcome").value = offered(previous.outcome) ? previous.outcome
    : offered(app.outcome) ? app.outcome : state.outcome;
}

// ------------------------------------------------------------------ progress
function bar(fraction) {
  const outer = el("span", {class: "bar"});
  const inner = el("span");
  inner.style.width = `${Math.round(100 * Math.max(0, Math.min(1, fraction)))}%`;
  outer.append(inner);
  return outer;
}

// The sweep's progress as `sweeper status` says it (one definition, server-side): stored,
// running and pending of the whole plan across runs and resumes, and the driver's state.
function drawProgress(state) {
  const p = state.progress;
  const planned = p.planned ? ` of ${p.planned} planned` : "";
  const pending = p.pending === null || p.pending === undefined ? "" : `, ${p.pending} pending`;
  const live = p.state === "running" || p.state === "stalled";
  const age = !live || p.age_s === null || p.age_s === undefined ? "" : ` (driver seen ${Math.round(p.age_s)} s ago)`;
  const text = `${p.state}: ${p.done} done, ${p.failed} failed, ${p.running} running${pending}${planned}${age}`;
  const done = p.planned ? p.stored / p.planned : 1;
  $("progress").replaceChildren(bar(done), text);
  $("progress").dataset.done = String(p.done);
  $("progress").dataset.stored = String(p.stored);
  $("progress").dataset.state = p.state;
  $("packs").replaceChildren(...p.packs.map((pack) => el("div", {},
    bar(pack.steps ? pack.step / pack.steps : 0),
    `pack ${String(pack.pack).slice(0, 8)}: ${pack.trials} trials at step ${pack.step} of ${pack.steps}`)));
}

// ------------------------------------------------------------------ phase diagram
// A grid's axis is drawn as the grid: one evenly spaced cell per value, the tick labels the
// values (kind "category"); a continuous axis cut into bins keeps its numeric or log scale.
function axisType(axis) { return axis.kind === "category" ? "category" : axis.kind; }
function axisCoords(axis) { return axis.kind === "category" ? axis.values.map(String) : axis.edges; }
function axisRange(axis) {
  if (axis.kind === "category") return [-0.5, axis.values.length - 0.5];
  const lo = axis.edges[0], hi = axis.edges[axis.edges.length - 1];
  return axis.kind === "log" ? [Math.log10(lo), Math.log10(hi)] : [lo, hi];
}
function centre(axis, i) { return axis.kind === "category" ? String(axis.values[i]) : axis.raw[i]; }
function axisLayout(axis, extra) {
  const out = {type: axisType(axis), showgrid: false, zeroline: false, range: axisRange(axis), ...extra};
  if (axis.kind === "category") {
    Object.assign(out, {categoryorder: "array", categoryarray: axis.values.map(String),
                        tickmode: "array", tickvals: axis.values.map(String), ticktext: axis.values.map(String)});
  }
  return out;
}
// A cell's box in the coordinates shapes take (a category's index; log10 on a log axis), inset
// by a share of its width: an outline drawn there leaves the cell's text readable.
function cellSpan(axis, i, inset) {
  let lo = i - 0.5, hi = i + 0.5;
  if (axis.kind !== "category") {
    lo = axis.edges[i]; hi = axis.edges[i + 1];
    if (axis.kind === "log") { lo = Math.log10(lo); hi = Math.log10(hi); }
  }
  const pad = (hi - lo) * inset;
  return [lo + pad, hi - pad];
}
function shapeCoord(axis, v) { return axis.kind === "log" ? Math.log10(v) : v; }
function outline(shapes, data, cells, xa, ya, style) {
  for (const c of cells) {
    const [x0, x1] = cellSpan(data.x, c.ix, style.inset), [y0, y1] = cellSpan(data.y, c.iy, style.inset);
    shapes.push({type: "rect", xref: xa, yref: ya, x0, x1, y0, y1, layer: "above",
                 line: {color: style.color, width: style.width, dash: style.dash}, fillcolor: "rgba(0,0,0,0)"});
  }
}
const UNRELIABLE = {color: "#ff7f00", width: 2.5, dash: "dash", inset: 0.04, name: "unreliable (interval spans 0.5)"};
const RECOVERED = {color: "#00a000", width: 2.5, dash: "solid", inset: 0.1, name: "recovered"};
function legendEntry(style, xa, ya) {  // an outline's entry in the legend (shapes have none)
  return {type: "scatter", mode: "markers", x: [null], y: [null], xaxis: xa, yaxis: ya, name: style.name,
          marker: {symbol: "square-open", size: 12, color: style.color, line: {width: 2}},
          showlegend: true, hoverinfo: "skip"};
}

async function drawPhase() {
  // Two changes in a row (outcome, then min seeds) start two draws whose answers may come
  // back in either order: only the latest draw may write the map and its title.
  const draw = app.phaseDraw = (app.phaseDraw || 0) + 1;
  const x = $("x").value, y = $("y").value;
  if (!app.state || !app.state.stored) { $("phase-title").textContent = "no trials stored yet"; return; }
  if (!x || !y || x === y) { $("phase-title").textContent = "choose two different axes"; return; }
  const facet = $("facet").value;
  const args = {sweep: app.sweep, x, y, facet: facet === x || facet === y ? "none" : facet,
                outcome: $("outcome").value, min_seeds: String($("min-seeds").value || 3)};
  const prefetched = early.phase ? await early.phase : null;
  early.phase = null;
  const data = prefetched && JSON.stringify(prefetched.args) === JSON.stringify(args)
    && prefetched.data.revision === app.state.revision ? prefetched.data : await api("phase", args);
  if (draw !== app.phaseDraw) return;
  if (data.empty) { $("phase-title").textContent = "no trials stored yet"; return; }
  app.phase = data;
  $("phase-title").textContent = data.title;
  const recovery = data.recovery || [];
  const rows = recovery.length ? 2 : 1;
  const n = data.facets.length, gap = n > 1 ? 0.06 : 0, width = (1 - gap * (n - 1)) / n;
  const rowDomain = rows === 2 ? [[0.56, 1], [0, 0.4]] : [[0, 1]];
  const traces = [], shapes = [];
  const layout = {margin: {l: 70, r: 20, t: 30, b: 60}, height: rows === 2 ? 820 : 420,
                  plot_bgcolor: "#dddddd", showlegend: true, legend: {orientation: "h", y: rows === 2 ? -0.1 : -0.22},
                  annotations: [], shapes};
  const dense = data.x.values.length * data.y.values.length * data.facets.length > 300;
  const name = (k) => [k === 0 ? "x" : `x${k + 1}`, k === 0 ? "y" : `y${k + 1}`];
  data.facets.forEach((f, k) => {
    const [xa, ya] = name(k);
    const g = f.grid;
    const z = g.p.map((row, iy) => row.map((p, ix) => (g.n[iy][ix] >= data.min_seeds ? p : null)));
    // "*": seeds another cell trained (an equivalent config, trained once: shared_with)
    const shared = (iy, ix) => (g.n_shared && g.n_shared[iy][ix] ? "*" : "");
    const text = g.n.map((row, iy) => row.map((nn, ix) => (g.n_trials[iy][ix] ? `${g.successes[iy][ix]}/${nn}${shared(iy, ix)}` : "")));
    const hover = g.n.map((row, iy) => row.map((nn, ix) => {
      const lo = g.p_low[iy][ix], hi = g.p_high[iy][ix];
      return `${data.x.label} = ${data.x.values[ix]}<br>${data.y.label} = ${data.y.values[iy]}<br>` +
             `${g.successes[iy][ix]}/${nn} seeds (${g.n_trials[iy][ix]} trials)` +
             (shared(iy, ix) ? `<br>* ${g.n_shared[iy][ix]} share an equivalent cell's training` : "") +
             (lo === null ? "" : `<br>p in [${fmt(lo, 2)}, ${fmt(hi, 2)}]`) + `<br>${g.state[iy][ix]}`;
    }));
    // a grey layer under every sampled cell (too few seeds for a colour: still clickable)
    const sampled = g.n_trials.map((row) => row.map((t) => (t ? 1 : null)));
    const greyText = text.map((row, iy) => row.map((t, ix) => (z[iy][ix] === null ? t : "")));
    traces.push({type: "heatmap", x: axisCoords(data.x), y: axisCoords(data.y), z: sampled, zmin: 0, zmax: 1,
                 colorscale: [[0, "#bdbdbd"], [1, "#bdbdbd"]], showscale: false, text: greyText,
                 texttemplate: dense ? "" : "%{text}", textfont: {color: "black"}, hovertext: hover, hoverinfo: "text",
                 customdata: f.index, xaxis: xa, yaxis: ya, showlegend: false, xgap: 1, ygap: 1});
    const shownText = text.map((row, iy) => row.map((t, ix) => (z[iy][ix] === null ? "" : t)));
    traces.push({type: "heatmap", x: axisCoords(data.x), y: axisCoords(data.y), z, zmin: 0, zmax: 1,
                 colorscale: "Viridis", showscale: k === 0,
                 colorbar: {title: {text: "p"}, len: rows === 2 ? 0.44 : 0.9, y: rows === 2 ? 0.78 : 0.5},
                 text: shownText, texttemplate: dense ? "" : "%{text}", hovertext: hover, hoverinfo: "text",
                 customdata: f.index, xaxis: xa, yaxis: ya, name: f.label, showlegend: false,
                 xgap: 1, ygap: 1});
    const here = data.cells.filter((c) => inFacet(data, c, k));
    outline(shapes, data, here.filter((c) => c.state === "unreliable"), xa, ya, UNRELIABLE);
    outline(shapes, data, here.filter((c) => c.recovered), xa, ya, RECOVERED);
    // the boundary between cells: shapes, which take a category axis's positions between
    // its values (a trace's x would be read as category names)
    for (const b of data.boundary.filter((s) => s.facet === k)) {
      shapes.push({type: "line", xref: xa, yref: ya, x0: shapeCoord(data.x, b.x[0]), x1: shapeCoord(data.x, b.x[1]),
                   y0: shapeCoord(data.y, b.y[0]), y1: shapeCoord(data.y, b.y[1]), layer: "above",
                   line: {color: "black", width: 3}});
    }
    if (k === 0) {
      traces.push({type: "scatter", mode: "lines", x: [null], y: [null], xaxis: xa, yaxis: ya,
                   line: {color: "black", width: 3}, name: "boundary p = 0.5", hoverinfo: "skip"},
                  legendEntry(UNRELIABLE, xa, ya), legendEntry(RECOVERED, xa, ya));
    }
    const domain = [k * (width + gap), k * (width + gap) + width];
    layout[k === 0 ? "xaxis" : `xaxis${k + 1}`] = axisLayout(data.x, {domain, title: {text: data.x.label}, anchor: ya});
    layout[k === 0 ? "yaxis" : `yaxis${k + 1}`] = axisLayout(data.y, {anchor: xa, domain: rowDomain[0],
                                                                      title: {text: k === 0 ? data.y.label : ""}});
    layout.annotations.push({text: f.label, xref: "paper", yref: "paper", x: domain[0] + width / 2,
                             y: rows === 2 ? 1.04 : 1.07, showarrow: false, font: {size: 14}});
  });
  // The recovery map: under each facet value's panel but the base's, p(value) - p(base).
  recovery.forEach((r, j) => {
    const k = n + j, [xa, ya] = name(k);
    const text = r.delta.map((row) => row.map((d) => (d === null ? "" : `${d > 0 ? "+" : ""}${d.toFixed(2)}`)));
    traces.push({type: "heatmap", x: axisCoords(data.x), y: axisCoords(data.y), z: r.delta, zmin: -1, zmax: 1,
                 colorscale: "RdBu", reversescale: true, showscale: j === 0,  // the PNG's: + blue
                 colorbar: {title: {text: "p difference"}, len: 0.4, y: 0.2},
                 text, texttemplate: dense ? "" : "%{text}", hoverinfo: "text",
                 hovertext: text.map((row, iy) => row.map((t, ix) => `${data.x.label} = ${data.x.values[ix]}<br>` +
                   `${data.y.label} = ${data.y.values[iy]}<br>${r.label}: ${t || "too few seeds"}`)),
                 xaxis: xa, yaxis: ya, showlegend: false, xgap: 1, ygap: 1});
    const recovered = [];
    r.recovered.forEach((row, iy) => row.forEach((v, ix) => { if (v === true) recovered.push({ix, iy}); }));
    outline(shapes, data, recovered, xa, ya, RECOVERED);
    const domain = [r.facet * (width + gap), r.facet * (width + gap) + width];
    layout[`xaxis${k + 1}`] = axisLayout(data.x, {domain, title: {text: data.x.label}, anchor: ya});
    layout[`yaxis${k + 1}`] = axisLayout(data.y, {anchor: xa, domain: rowDomain[1],
                                                  title: {text: r.facet === 0 || j === 0 ? data.y.label : ""}});
    layout.annotations.push({text: r.label, xref: "paper", yref: "paper", x: domain[0] + width / 2,
                             y: 0.43, showarrow: false, font: {size: 13}});
  });
  const div = $("phase");
  await Plotly.react(div, traces, layout, {displaylogo: false, responsive: true});
  div.dataset.recovery = String(recovery.length);
  if (!div.dataset.bound) {
    div.dataset.bound = "1";
    div.on("plotly_click", (event) => {
      const point = event.points && event.points[0];
      if (!point) return;
      const index = Array.isArray(point.customdata) ? point.customdata[0] : point.customdata;
      if (index !== undefined && index !== null && index >= 0) openCell(index, false);
    });
  }
  syncUrl();
  const sampled = data.cells.filter((c) => c.n_trials > 0);
  div.dataset.cells = String(sampled.length);
  if (!app.firstView) app.firstView = performance.now();
  div.dataset.trials = String(sampled.reduce((s, c) => s + c.n_trials, 0));
}

function inFacet(data, cell, k) {
  if (!data.facet) return true;
  const f = data.facets[k];
  return f.index[cell.iy][cell.ix] === cell.index;
}

// Where a cell's centre is on screen (for tests and scripts).
app.cellCenter = function (index) {
  const div = $("phase"), data = app.phase, layout = div._fullLayout;
  const cell = data.cells.find((c) => c.index === index);
  const k = data.facets.findIndex((f, kk) => inFacet(data, cell, kk));
  const xa = layout[k === 0 ? "xaxis" : `xaxis${k + 1}`], ya = layout[k === 0 ? "yaxis" : `yaxis${k + 1}`];
  const box = div.getBoundingClientRect();
  const px = xa.l2p(xa.d2l(centre(data.x, cell.ix))) + xa._offset;
  const py = ya.l2p(ya.d2l(centre(data.y, cell.iy))) + ya._offset;
  return {x: box.left + px, y: box.top + py};  // viewport coordinates, as a click takes them
};

// ------------------------------------------------------------------ a cell's seeds
// A click on a cell shows its seeds and adds its trials to the overlay (`select`: false when
// the map is redrawn, or a link restores the cell with its own selection).
async function openCell(index, refresh, select = !refresh) {
  const cell = app.phase && app.phase.cells.find((c) => c.index === index);
  if (!cell) return;
  app.cell = cell;
  const data = await api("cell", {sweep: app.sweep, cell: JSON.stringify(cell.conditions),
                                  metrics: app.metrics.join(","), where: app.shownWhere || ""});
  const label = cell.conditions.map((c) => (c.lo !== undefined ? `${c.column} in [${fmt(c.lo)}, ${fmt(c.hi)}${c.closed ? "]" : ")"}`
                                                                  : `${c.column} = ${fmt(c.value)}`)).join(", ");
  $("cell-title").textContent = `${label}: ${data.successes}/${data.counted} ${data.outcome.replace("_", " ")}` +
                                (data.shown < data.total ? ` (curves of ${data.shown} of ${data.total})` : "") +
                                (data.filtered ? ` (${data.filtered} hidden by the table's filter)` : "");
  const m = data.metrics.length, gap = 0.08, width = (1 - gap * (m - 1)) / m;
  const traces = [], seen = new Set();
  const layout = {margin: {l: 60, r: 20, t: 30, b: 50}, height: 340, shapes: [], annotations: [],
                  legend: {orientation: "h", y: -0.25}};
  const classOf = Object.fromEntries(data.trials.map((t) => [t.trial_id, t]));
  data.metrics.forEach((metric, k) => {
    const xa = k === 0 ? "x" : `x${k + 1}`, ya = k === 0 ? "y" : `y${k + 1}`;
    for (const [tid, curve] of Object.entries(data.curves)) {
      const t = classOf[tid] || {class: "other"};
      const first = !seen.has(t.class) && k === 0;
      if (first) seen.add(t.class);
      traces.push({type: "scatter", mode: "lines", x: curve.step, y: smoothed(curve[metric.name]), xaxis: xa, yaxis: ya,
                   line: {color: COLORS[t.class], width: 1.3, dash: t.class === "diverged" ? "dash" : "solid"},
                   opacity: 0.8, name: WORDS[t.class], legendgroup: t.class, showlegend: first,
                   hovertemplate: `seed ${fmt(t.seed)} (${t.status})<br>step %{x}: %{y:.3f}<extra></extra>`});
    }
    const domain = [k * (width + gap), k * (width + gap) + width];
    layout[k === 0 ? "xaxis" : `xaxis${k + 1}`] = {domain, anchor: ya, title: {text: "step"}};
    layout[k === 0 ? "yaxis" : `yaxis${k + 1}`] = yAxis(metric, xa);
    if (metric.threshold !== null && metric.threshold !== undefined) {
      layout.shapes.push({type: "line", xref: `${xa} domain`, yref: ya, x0: 0, x1: 1,
                          y0: metric.threshold, y1: metric.threshold, line: {dash: "dot", color: "black", width: 1}});
    }
    layout.annotations.push({text: metric.label, xref: "paper", yref: "paper", x: domain[0] + width / 2,
                             y: 1.08, showarrow: false});
  });
  $("cell-section").hidden = false;
  await Plotly.react($("curves"), traces, layout, {displaylogo: false, responsive: true});
  $("cell-section").dataset.curves = String(Object.keys(data.curves).length);
  $("cell-section").dataset.cell = String(index);
  drawTrialsTable(data);
  if (select) {
    app.selected = [...new Set([...app.selected, ...data.trials.map((t) => t.trial_id)])];
    markSelected();
    await drawOverlay();
  }
  syncUrl();
  if (!refresh) $("cell-section").scrollIntoView({block: "start"});
}

function drawTrialsTable(data) {
  const configCols = data.trials.length ? Object.keys(data.trials[0].config) : [];
  const finals = data.metrics.map((m) => `final_${m.name}`);
  const head = el("tr", {}, ...["trial", "seed", "status", data.outcome, "step", ...finals, "attempts", ...configCols, "error"]
    .map((h) => el("th", {}, h)));
  const rows = data.trials.map((t) => el("tr", {class: t.class},
    el("td", {}, t.trial_id), el("td", {}, fmt(t.seed)), el("td", {}, t.status), el("td", {}, fmt(t.outcome)),
    el("td", {}, fmt(t.steps)), ...finals.map((f) => el("td", {}, fmt(t[f]))), el("td", {}, fmt(t.attempts)),
    ...configCols.map((c) => el("td", {}, fmt(t.config[c]))),
    el("td", {class: "error"}, t.error ? t.error.trim().split("\n").slice(-1)[0] : "")));
  $("cell-trials").replaceChildren(el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows)));
}

// ------------------------------------------------------------------ the trials table
// Every trial with `sweeper query`'s default columns, filtered by its where language and
// sorted server-side; a bad expression is shown as the server's one line.
// The server sends one page of TABLE_PAGE rows (a sweep of thousands of trials is not sent
// whole at every pack); sort and filter apply to all of them before the page is cut.
const TABLE_PAGE = 1000;
async function drawTable() {
  if (!app.sweep || !app.state || !app.state.stored) return;
  const args = {sweep: app.sweep, offset: String(app.offset), limit: String(TABLE_PAGE)};
  if (app.where) args.where = app.where;
  if (app.sort) { args.sort = app.sort; args.order = app.order; }
  $("where").value = app.where;
  const draw = app.tableDraw = (app.tableDraw || 0) + 1;  // only the latest answer is drawn
  let data;
  try {
    data = await api("trials", args);
    if (draw !== app.tableDraw) return;
  } catch (error) {
    if (draw !== app.tableDraw) return;
    $("where-error").textContent = error.message;
    $("where-error").hidden = false;
    $("trials-section").dataset.error = error.message;
    syncUrl();
    return;
  }
  $("where-error").hidden = true;
  delete $("trials-section").dataset.error;
  app.shownWhere = app.where;  // the filter the table shows (a refused one keeps the last)
  if (data.matched && app.offset >= data.matched) {  // fewer rows now (a filter, a link)
    app.offset = Math.floor((data.matched - 1) / TABLE_PAGE) * TABLE_PAGE;
    return drawTable();
  }
  app.table = data;
  const idAt = data.columns.indexOf("trial_id");
  const head = el("tr", {}, el("th", {}, "✓"), ...data.columns.map((c) => {
    const arrow = c === app.sort ? (app.order === "desc" ? " ▼" : " ▲") : "";
    const th = el("th", {class: "sortable", title: "sort"}, c + arrow);
    th.dataset.column = c;
    th.addEventListener("click", () => {
      app.order = app.sort === c && app.order === "asc" ? "desc" : "asc";
      app.sort = c;
      app.offset = 0;
      drawTable();
    });
    return th;
  }));
  const rows = data.rows.map((row) => {
    const id = row[idAt];
    const box = el("input", {type: "checkbox"});
    box.checked = app.selected.includes(id);
    box.addEventListener("change", () => {
      app.selected = box.checked ? [...app.selected, id] : app.selected.filter((t) => t !== id);
      markSelected();
      drawOverlay();
      syncUrl();
    });
    const tr = el("tr", {}, el("td", {}, box), ...row.map((v, i) => {
      const td = el("td", {class: "value", title: "keep only this value"}, fmt(v));
      td.addEventListener("click", () => filterBy(data.columns[i], v));
      return td;
    }));
    tr.dataset.trial = id;
    return tr;
  });
  $("trials").replaceChildren(el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows)));
  const paged = data.matched > data.rows.length;
  const shown = paged ? `rows ${data.offset + 1}–${data.offset + data.rows.length} of ` : "";
  $("trials-count").textContent = app.where ? `(${shown}${data.matched} of ${data.total} where ${app.where})`
    : `(${shown}${data.matched})`;
  $("pager").hidden = !paged;
  $("page-previous").disabled = data.offset === 0;
  $("page-next").disabled = data.offset + data.rows.length >= data.matched;
  $("trials-section").dataset.rows = String(data.rows.length);
  $("trials-section").dataset.matched = String(data.matched);
  $("trials-section").dataset.offset = String(data.offset);
  markSelected();
  fillColour();
  syncUrl();
  await drawOverlay();
}

// A value clicked: the where expression keeps only the trials with it (and what it kept).
function filterBy(column, value) {
  const name = /^[A-Za-z_][A-Za-z0-9_.]*$/.test(column) ? column : `\`${column}\``;
  const term = value === null || value === undefined ? `${name} is null`
    : typeof value === "string" ? `${name} == '${value.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`
    : `${name} == ${value}`;
  app.where = app.where ? `(${app.where}) and ${term}` : term;
  app.offset = 0;
  drawTable();
}

function markSelected() {
  for (const tr of document.querySelectorAll("#trials tbody tr")) {
    const on = app.selected.includes(tr.dataset.trial);
    tr.classList.toggle("selected", on);
    tr.querySelector("input").checked = on;
  }
  $("clear-selection").disabled = !app.selected.length;
}

function fillColour() {
  const columns = app.table ? app.table.columns.filter((c) => c !== "trial_id" && !c.startsWith("final_")) : [];
  const key = columns.join(",");
  if ($("colour").dataset.key === key) return;
  $("colour").dataset.key = key;
  $("colour").replaceChildren(...columns.map((c) => el("option", {value: c}, c)));
  const fallback = columns.find((c) => c === "model.heads") || columns.find((c) => c.startsWith("model."))
    || columns[0];
  app.colour = columns.includes(app.colour) ? app.colour : fallback;
  if (app.colour) $("colour").value = app.colour;
}

const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
                 "#e377c2", "#7f7f7f", "#bcbd22"];

// The selected trials' curves on shared axes (one panel per metric), coloured by the chosen
// column's value, each line named by its seed (and that value) in the legend.
async function drawOverlay() {
  const div = $("overlay");
  if (!app.selected.length) {
    div.hidden = true;
    div.dataset.traces = "0";
    if (window.Plotly) Plotly.purge(div);
    return;
  }
  const args = {sweep: app.sweep, trials: app.selected.join(",")};
  if (app.metrics.length) args.metrics = app.metrics.join(",");
  const data = await api("curves", args);
  const colour = app.colour;
  const info = (tid) => data.trials[tid] || {};
  const rowOf = {};
  if (app.table) {
    const at = app.table.columns.indexOf("trial_id");
    for (const row of app.table.rows) rowOf[row[at]] = row;
  }
  const valueOf = (tid) => {
    if (colour in info(tid)) return info(tid)[colour];
    const row = rowOf[tid];
    return row && app.table ? row[app.table.columns.indexOf(colour)] : null;
  };
  const ids = app.selected.filter((tid) => data.curves[tid]);
  const values = [...new Set(ids.map((tid) => fmt(valueOf(tid))))].sort((a, b) =>
    (Number.isNaN(+a) || Number.isNaN(+b) ? a.localeCompare(b) : +a - +b));
  const colourOf = (tid) => PALETTE[values.indexOf(fmt(valueOf(tid))) % PALETTE.length];
  const m = data.metrics.length, gap = 0.08, width = (1 - gap * (m - 1)) / m;
  const traces = [];
  const layout = {margin: {l: 60, r: 20, t: 30, b: 50}, height: 360, annotations: [],
                  legend: {title: {text: app.band ? `${colour}: mean, band lowest to highest`
                                                  : `seed (colour: ${colour})`}}};
  data.metrics.forEach((metric, k) => {
    const xa = k === 0 ? "x" : `x${k + 1}`, ya = k === 0 ? "y" : `y${k + 1}`;
    if (app.band) {
      for (const value of values) {
        const group = ids.filter((tid) => fmt(valueOf(tid)) === value);
        traces.push(...bandTraces(group.map((tid) => data.curves[tid]), metric.name, xa, ya,
                                  colourOf(group[0]), `${colour} ${value} (${group.length})`, k === 0));
      }
    } else {
      for (const tid of ids) {
        const curve = data.curves[tid];
        traces.push({type: "scatter", mode: "lines", x: curve.step, y: smoothed(curve[metric.name]), xaxis: xa, yaxis: ya,
                     line: {color: colourOf(tid), width: 1.4}, opacity: 0.85,
                     name: `seed ${fmt(info(tid).seed)} · ${colour} ${fmt(valueOf(tid))}`,
                     legendgroup: tid, showlegend: k === 0,
                     hovertemplate: `seed ${fmt(info(tid).seed)}, ${colour} = ${fmt(valueOf(tid))}` +
                                    `<br>step %{x}: %{y:.3f}<extra>${tid}</extra>`});
      }
    }
    const domain = [k * (width + gap), k * (width + gap) + width];
    layout[k === 0 ? "xaxis" : `xaxis${k + 1}`] = {domain, anchor: ya, title: {text: "step"}};
    layout[k === 0 ? "yaxis" : `yaxis${k + 1}`] = yAxis(metric, xa);
    layout.annotations.push({text: metric.label, xref: "paper", yref: "paper", x: domain[0] + width / 2,
                             y: 1.08, showarrow: false});
  });
  div.hidden = false;
  await Plotly.react(div, traces, layout, {displaylogo: false, responsive: true});
  div.dataset.traces = String(traces.length);
  div.dataset.curves = String(ids.length);
}

// ------------------------------------------------------------------ how curves are drawn
// A metric picker, smoothing, a log y axis and mean-and-band per colour value, for both plots
// (a clicked cell's seeds and the overlay), each kept in the address.
async function fillMetrics() {
  const picker = $("metrics");
  if (!app.sweep || picker.options.length) return;
  try {
    const found = await api("metrics", {sweep: app.sweep});
    const chosen = app.metrics.length ? app.metrics : found.default;
    picker.replaceChildren(...found.metrics.map((m) => el("option", {value: m}, m)));
    for (const option of picker.options) option.selected = chosen.includes(option.value);
  } catch (error) { /* nothing stored yet: filled at a later poll */ }
}

async function curveControls() {
  const picker = $("metrics");
  await fillMetrics();
  $("smooth").value = String(app.smooth);
  $("smooth-value").textContent = String(app.smooth);
  $("logy").checked = app.logy;
  $("band").checked = app.band;
  const redraw = () => {
    syncUrl();
    drawOverlay();
    if (app.cell) openCell(app.cell.index, true, false);
  };
  picker.addEventListener("change", () => {
    app.metrics = [...picker.selectedOptions].map((o) => o.value);
    redraw();
  });
  $("smooth").addEventListener("change", () => {
    app.smooth = parseFloat($("smooth").value) || 0;
    $("smooth-value").textContent = String(app.smooth);
    redraw();
  });
  $("logy").addEventListener("change", () => { app.logy = $("logy").checked; redraw(); });
  $("band").addEventListener("change", () => { app.band = $("band").checked; redraw(); });
}

// An exponential moving average with its start debiased (TensorBoard's smoothing): weight
// `app.smooth` on the past; 0 draws the values as logged.
function smoothed(values) {
  const a = app.smooth;
  if (!a || !values) return values;
  let last = 0, weight = 0;
  return values.map((v) => {
    if (v === null || v === undefined || Number.isNaN(v)) return v;
    last = a * last + (1 - a) * v;
    weight = a * weight + (1 - a);
    return last / weight;
  });
}

function yAxis(metric, xa) {
  const unit = !metric.name.startsWith("loss");
  if (app.logy) return {anchor: xa, type: "log", title: {text: `${metric.label} (log)`}};
  return {anchor: xa, range: unit ? [-0.02, 1.02] : undefined, title: {text: metric.label}};
}

// One colour value's trials as a mean line over the band from their lowest to their highest
// value at each step (steps all of them logged), each curve smoothed first.
function bandTraces(curves, name, xa, ya, colour, label, legend) {
  const steps = [...new Set(curves.flatMap((c) => c.step))].sort((a, b) => a - b);
  const at = curves.map((c) => {
    const ys = smoothed(c[name]);
    return Object.fromEntries(c.step.map((s, i) => [s, ys[i]]));
  });
  const column = (s) => at.map((m) => m[s]).filter((v) => v !== null && v !== undefined && !Number.isNaN(v));
  const kept = steps.filter((s) => column(s).length);
  const low = kept.map((s) => Math.min(...column(s))), high = kept.map((s) => Math.max(...column(s)));
  const mean = kept.map((s) => column(s).reduce((x, y) => x + y, 0) / column(s).length);
  const common = {type: "scatter", mode: "lines", x: kept, xaxis: xa, yaxis: ya, legendgroup: label};
  return [{...common, y: low, line: {width: 0, color: colour}, showlegend: false, hoverinfo: "skip"},
          {...common, y: high, line: {width: 0, color: colour}, fill: "tonexty", opacity: 0.25,
           fillcolor: colour, showlegend: false, hoverinfo: "skip"},
          {...common, y: mean, line: {width: 2, color: colour}, name: label, showlegend: legend,
           hovertemplate: `${label}<br>step %{x}: mean %{y:.3f}<extra></extra>`}];
}

// ------------------------------------------------------------------ links that restore the view
// The address holds the sweep, axes, facet, outcome, min seeds, the open cell, the table's
// filter, sort, colour and selected rows; it is rewritten (replaceState) as any changes.
function syncUrl() {
  const q = new URLSearchParams();
  const set = (k, v) => { if (v !== null && v !== undefined && v !== "") q.set(k, v); };
  set("sweep", app.sweep);
  if (app.phase) {
    set("x", $("x").value); set("y", $("y").value); set("facet", $("facet").value);
    set("outcome", $("outcome").value);
    if ($("min-seeds").value !== "3") set("min_seeds", $("min-seeds").value);
  }
  if (app.cell) set("cell", JSON.stringify(app.cell.conditions));
  else if (app.pendingCell) set("cell", app.pendingCell);
  set("where", app.where);
  if (app.sort) { set("sort", app.sort); set("order", app.order); }
  if (app.offset) set("offset", app.offset);
  set("colour", app.colour);
  if (app.selected.length && app.selected.length <= 50) set("rows", app.selected.join(","));
  set("metrics", app.metrics.join(","));
  if (app.smooth) set("smooth", app.smooth);
  if (app.logy) set("logy", "1");
  if (app.band) set("band", "1");
  // the token is not written back: the cookie carries it, and a shared link should not
  const url = `${location.pathname}?${q}`;
  if (url !== `${location.pathname}${location.search}`) history.replaceState(null, "", url);
}

// ------------------------------------------------------------------ failed trials
async function drawFailed() {
  const data = await api("failed", {sweep: app.sweep});
  $("failed-count").textContent = `(${data.total})`;
  $("failed-section").dataset.total = String(data.total);
  if (!data.total) { $("failed").replaceChildren(el("p", {}, "No trial failed.")); return; }
  const configCols = Object.keys(data.trials[0].config);
  const head = el("tr", {}, ...["trial", "seed", "attempts", "host", ...configCols, "error"].map((h) => el("th", {}, h)));
  const rows = data.trials.map((t) => el("tr", {},
    el("td", {}, t.trial_id), el("td", {}, fmt(t.seed)), el("td", {}, fmt(t.attempts)), el("td", {}, fmt(t.host)),
    ...configCols.map((c) => el("td", {}, fmt(t.config[c]))), el("td", {class: "error"}, t.error || "")));
  $("failed").replaceChildren(el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows)));
}

// ------------------------------------------------------------------ random and Optuna searches
// The search views of every sweep (grid, random, Optuna, boundary), from /api/search: a slice
// per parameter, parallel coordinates (one line per counted trial), parameter importance and,
// for searches, the optimisation history.
async function drawSearch() {
  const data = await api("search", {sweep: app.sweep});
  if (!data.lines || !data.lines.length || !data.parameters.length) { $("search-section").hidden = true; return; }
  $("search-section").hidden = false;
  const what = data.yes_no ? `share ${data.objective.replace("_", " ")}` : `${data.objective}, ${data.direction}`;
  $("search-title").textContent = `Search (${data.type}): ${what}; ${data.lines.length} counted trials`;
  const config = {displaylogo: false, responsive: true};
  await Plotly.react($("objective"), ...sliceFigure(data), config);
  await Plotly.react($("parallel"), ...parallelFigure(data), config);
  await Plotly.react($("importance"), ...importanceFigure(data), config);
  $("history").hidden = !data.history;
  if (data.history) await Plotly.react($("history"), ...historyFigure(data), config);
  $("search-section").dataset.lines = String(data.lines.length);
}

// The outcome against each parameter's values: the share learned with its count per value
// (a yes/no outcome), or every trial's objective and the mean per value (a number).
function sliceFigure(data) {
  const p = data.parameters.length, cols = Math.min(p, 3), rows = Math.ceil(p / cols);
  const traces = [], layout = {height: 280 * rows, margin: {l: 60, r: 20, t: 30, b: 50}, showlegend: false,
                               grid: {rows, columns: cols, pattern: "independent"},
                               title: {text: "slices: the outcome against each parameter", font: {size: 13}}};
  data.parameters.forEach((param, k) => {
    const xa = k === 0 ? "x" : `x${k + 1}`, ya = k === 0 ? "y" : `y${k + 1}`;
    const slice = data.slices.find((s) => s.column === param.column);
    const category = param.kind === "category";
    const x = category ? ticks(param, slice.values.length, slice.values) : slice.values;
    const label = (v) => (category ? x[slice.values.findIndex((s) => String(s) === String(v))] : v);
    if (data.yes_no) {
      traces.push({type: "scatter", mode: "lines+markers+text", x, y: slice.mean, xaxis: xa, yaxis: ya,
                   text: slice.n.map((n) => `n=${n}`), textposition: "top center", textfont: {size: 10},
                   marker: {size: slice.n.map((n) => 5 + 2 * Math.sqrt(n)), color: slice.mean, colorscale: "Viridis", cmin: 0, cmax: 1},
                   line: {color: "#888"},
                   hovertemplate: `${param.label} = %{x}<br>share = %{y:.2f}<br>%{text}<extra></extra>`});
    } else {
      traces.push({type: "scatter", mode: "markers", x: data.lines.map((l) => label(l[param.column])),
                   y: data.lines.map((l) => l.objective), xaxis: xa, yaxis: ya,
                   marker: {size: 6, opacity: 0.6, color: data.lines.map((l) => l.objective), colorscale: "Viridis"},
                   hovertemplate: `${param.label} = %{x}<br>${data.objective} = %{y:.3g}<extra></extra>`},
                  {type: "scatter", mode: "lines", x, y: slice.mean, xaxis: xa, yaxis: ya, line: {color: "#333"},
                   hoverinfo: "skip"});
    }
    layout[k === 0 ? "xaxis" : `xaxis${k + 1}`] = {type: category ? "category" : param.kind, title: {text: param.label},
                                                   ...(category ? {categoryorder: "array", categoryarray: x} : {})};
    layout[k === 0 ? "yaxis" : `yaxis${k + 1}`] = {title: {text: k % cols === 0 ? (data.yes_no ? "share" : data.objective) : ""},
                                                   ...(data.yes_no ? {range: [-0.05, 1.15]} : {})};
  });
  return [traces, layout];
}

// A categorical parameter's tick labels: the server's (`tick`, in the grid's order) when it
// names each value shown, else the values as they print here.
function ticks(param, count, values) {
  return param.values && param.values.length === count ? param.values : values.map((v) => fmt(v));
}

// Parallel coordinates drawn as SVG lines (plotly's parcoords needs WebGL, which a headless or
// remote browser may lack): one line per counted trial through its swept columns (a grid's
// and a choice's at their values, evenly spaced; a log axis in log10) and the outcome,
// coloured by the outcome. The layout's meta keeps the dimensions drawn (label, values, ticks).
function parallelFigure(data) {
  const dimensions = data.parameters.map((param) => {
    const raw = data.lines.map((l) => l[param.column]);
    if (param.kind === "category" || !raw.every((v) => typeof v === "number")) {
      const slice = data.slices.find((s) => s.column === param.column);
      const order = slice.values.map(String);
      for (const v of raw.map(String)) if (!order.includes(v)) order.push(v);
      return {label: param.column, values: raw.map((v) => order.indexOf(String(v))), categorical: true,
              tickvals: order.map((_, i) => i), ticktext: ticks(param, order.length, order)};
    }
    const values = param.kind === "log" ? raw.map((v) => Math.log10(v)) : raw;
    const lo = Math.min(...values), hi = Math.max(...values);
    const show = (v) => fmt(param.kind === "log" ? 10 ** v : v);
    return {label: param.column, values, tickvals: [lo, hi], ticktext: [show(lo), show(hi)]};
  });
  const outcome = data.lines.map((l) => l.objective);
  const olo = Math.min(...outcome), ohi = Math.max(...outcome);
  dimensions.push(data.yes_no ? {label: data.objective, values: outcome, tickvals: [0, 1], ticktext: ["no", "yes"], categorical: true}
                              : {label: data.objective, values: outcome, tickvals: [olo, ohi], ticktext: [fmt(olo), fmt(ohi)]});
  const unit = dimensions.map((d) => {
    const lo = Math.min(...d.tickvals), hi = Math.max(...d.tickvals);
    return (v) => (hi > lo ? (v - lo) / (hi - lo) : 0.5);
  });
  const palette = data.yes_no ? [COLORS.failure, COLORS.success] : ["#440154", "#3b528b", "#21918c", "#5ec962", "#fde725"];
  const group = (v) => (data.yes_no ? (v >= 0.5 ? 1 : 0)
    : ohi > olo ? Math.min(4, Math.floor(5 * (v - olo) / (ohi - olo))) : 2);
  const groups = palette.map(() => ({x: [], y: []}));
  data.lines.forEach((l, t) => {
    const g = groups[group(l.objective)];
    // a categorical axis spreads its lines a little about each value (a grid's would coincide)
    const spread = (((t * 0.618034) % 1) - 0.5) * 0.07;
    dimensions.forEach((d, i) => { g.x.push(i); g.y.push(unit[i](d.values[t]) + (d.categorical ? spread : 0)); });
    g.x.push(null); g.y.push(null);
  });
  const names = data.yes_no ? ["not", data.objective.replace("_", " ")]
    : palette.map((_, i) => `${data.objective} in ${["lowest", "low", "middle", "high", "highest"][i]} fifth`);
  const traces = groups.map((g, i) => ({type: "scatter", mode: "lines", x: g.x, y: g.y, connectgaps: false, name: names[i],
                                        line: {color: palette[i], width: 1.2}, opacity: 0.5, hoverinfo: "skip"}));
  const annotations = [], shapes = [];
  dimensions.forEach((d, i) => {
    annotations.push({x: i, y: 1.1, text: `<b>${d.label}</b>`, showarrow: false, xref: "x", yref: "y"});
    d.tickvals.forEach((v, j) => annotations.push({x: i, y: unit[i](v), text: d.ticktext[j], showarrow: false, xref: "x",
                                                   yref: "y", xanchor: "left", xshift: 4, font: {size: 10}}));
    shapes.push({type: "line", x0: i, x1: i, y0: 0, y1: 1, xref: "x", yref: "y", line: {color: "#444", width: 1}});
  });
  const title = data.yes_no ? `parallel coordinates: one line per trial (green: ${data.objective.replace("_", " ")}, red: not)`
                            : `parallel coordinates: one line per trial (colour: ${data.objective})`;
  return [traces, {height: 380, margin: {l: 40, r: 60, t: 50, b: 30}, legend: {orientation: "h", y: -0.05},
                   xaxis: {visible: false, range: [-0.3, dimensions.length - 0.6]},
                   yaxis: {visible: false, range: [-0.08, 1.16]}, annotations, shapes,
                   title: {text: title, font: {size: 13}}, meta: {dimensions}}];
}

function importanceFigure(data) {
  const entries = Object.entries(data.importance.values).reverse();  // most important on top
  const how = data.importance.method === "optuna" ? "Optuna's PED-ANOVA importance of the study"
    : "variance of the per-value mean outcome, as shares";
  return [[{type: "bar", orientation: "h", x: entries.map(([, v]) => v), y: entries.map(([k]) => k),
            marker: {color: "#3b528b"}, hovertemplate: "%{y}: %{x:.3f}<extra></extra>"}],
          {height: 80 + 28 * entries.length, margin: {l: 170, r: 20, t: 40, b: 40},
           title: {text: `parameter importance (${how})`, font: {size: 13}}, xaxis: {rangemode: "tozero"}}];
}

function historyFigure(data) {
  const h = data.history, order = h.objective.map((_, i) => i + 1);
  // one point per cell, as the search counts its trials (an Optuna trial: the mean over seeds)
  const text = h.trial_id.map((id, i) => `${id}, ${h.trials[i]} seed${h.trials[i] === 1 ? "" : "s"}`);
  return [[{type: "scatter", mode: "markers", x: order, y: h.objective, name: data.objective,
            marker: {size: 6, color: "#21918c", opacity: 0.7}, text,
            hovertemplate: "trial %{x} (%{text})<br>%{y:.3g}<extra></extra>"},
           {type: "scatter", mode: "lines", x: order, y: h.best, name: "best so far", line: {color: "#d73027", shape: "hv"}}],
          {height: 320, margin: {l: 60, r: 20, t: 40, b: 50}, legend: {orientation: "h", y: -0.25},
           title: {text: "optimisation history (stored order)", font: {size: 13}},
           xaxis: {title: {text: "trial"}}, yaxis: {title: {text: data.objective}}}];
}

document.addEventListener("DOMContentLoaded", start);
