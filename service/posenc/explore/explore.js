// The explorer page: asks the service for each figure (a Vega-Lite spec with the library's numbers) and
// draws it with the vendored Vega (interactive: zoom, hover values, export). Two sources, A and B, are
// drawn side by side in every view; the Lab view has two of its own (`posenc lab` results files); the Pick panel
// asks `posenc pick` (POST /v1/pick) which encoding suits a job and shows the answer with its evidence. The page's
// state lives in its URL (the share link's format is in docs/explorer.md, "Share links"). Talks only to the
// service that served it; user input goes into text nodes and JSON bodies, never into HTML.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];
const SLOTS = ["a", "b"];
const SOURCE_FIELDS = ["config", "spec", "specs", "table", "source.table"];
const EMBED = { renderer: "canvas", actions: false, ast: true, defaultStyle: false,
  tooltip: { disableDefaultStyle: true } };
let audited = null; // the spec the last audited cache was built from (source B may compare with it)

class RequestError extends Error {
  constructor(err, status) {
    super(err.message);
    this.field = err.field || "";
    this.status = status;
  }
}

async function call(path, options) {
  const response = await fetch(path, options);
  const text = await response.text();
  let body = null;
  try { body = JSON.parse(text); } catch (e) { body = null; }
  if (!response.ok) throw new RequestError(body && body.error ? body.error : { message: `HTTP ${response.status}` }, response.status);
  return body;
}

// --- sources -------------------------------------------------------------------------------------------------
function choice(slot) { return $(`input[name=source-${slot}]:checked`).value; }

function sourceOf(slot) {
  const box = $(`.source[data-slot=${slot}]`), kind = choice(slot), name = slot.toUpperCase();
  if (kind === "none") return null;
  if (kind === "audited") return { spec: { ...audited, label: "audited cache" } };
  if (kind === "table") {
    const table = $(".table", box).value;
    if (!table) throw new Error(`${name}: no table is served: paste a config.json or specs instead`);
    return { table };
  }
  const raw = $(`.${kind}`, box).value.trim();
  if (!raw) throw new Error(`${name}: paste ${kind === "config" ? "a config.json" : "a JSON list of specs"} first`);
  let doc;
  try { doc = JSON.parse(raw); } catch (e) { throw new Error(`${name}: ${kind} is not valid JSON (${e.message})`); }
  return kind === "config" ? { config: doc } : { specs: doc };
}

function isSourceError(err) {
  if (err.status === 404) return true;
  return SOURCE_FIELDS.some((f) => err.field === f || err.field.startsWith(f + "."));
}

// --- views ---------------------------------------------------------------------------------------------------
// A view's (or the Pick form's) parameters: numbers, true/false for a checkbox (the spectrum's and decay's
// "overlay"), a select's choice as text; a blank number or a select's default ("") is left out.
function params(view) {
  const out = {};
  $$(".params input, .params select", view).forEach((input) => {
    if (input.type === "checkbox") out[input.name] = input.checked;
    else if (input.value !== "") out[input.name] = input.type === "number" ? Number(input.value) : input.value;
  });
  return out;
}

function setParam(input, value) {
  if (input.type === "checkbox") input.checked = value === true;
  else input.value = value;
}

function slotsOf(view, active) {
  const holder = $(".slots", view);
  while (holder.children.length > active.length) holder.lastElementChild.remove();
  while (holder.children.length < active.length) holder.appendChild($("#slot").content.firstElementChild.cloneNode(true));
  return active.map((slot, i) => {
    const el = holder.children[i];
    el.dataset.slot = slot;
    $(".slot-name", el).textContent = active.length > 1 ? slot.toUpperCase() : "";
    return el;
  });
}

function clearSlot(el, state) {
  if (el.vegaView) { el.vegaView.finalize(); el.vegaView = null; }
  $(".chart", el).replaceChildren();
  ["summary", "note", "error"].forEach((c) => { $(`.${c}`, el).textContent = ""; });
  el.figure = null;
  el.dataset.state = state;
}

function summaryText(summary) {
  if (summary.text) return summary.text;
  return (summary.panels || []).map((p) => p.text).join("\n");
}

function drawnWidth(chart) {
  const canvas = $("canvas", chart);
  return canvas ? canvas.getBoundingClientRect().width : 0;
}

// Draws the figure's panels side by side within the slot's box. What a panel needs besides its plot (axes,
// a heatmap's colour legend, the spacing) differs by figure, so it is measured: a first drawing at a guessed
// width tells the overhead, and the panels are redrawn to fill the box exactly (titles cut at their panel's
// width, so they do not widen it). Panels that would be narrower than MIN_PANEL wrap onto more rows instead.
const MIN_PANEL = 200;
async function embed(el, drawn, kind, request) {
  const chart = $(".chart", el);
  const box = Math.max(320, chart.clientWidth || el.clientWidth || 600);
  const spec = drawn.vega, panels = spec.hconcat, n = panels.length;
  const render = async (width) => {
    if (el.vegaView) { el.vegaView.finalize(); el.vegaView = null; }
    panels.forEach((panel) => { // a title longer than its panel would widen it: cut at the panel's width
      panel.width = width;
      if (panel.title && typeof panel.title === "object") panel.title.limit = width;
    });
    el.vegaView = (await vegaEmbed(chart, spec, { ...EMBED, expr: vega.expressionInterpreter })).view;
  };
  const guess = Math.max(MIN_PANEL, Math.floor(box / n) - 130);
  await render(guess);
  const overhead = (drawnWidth(chart) - n * guess) / n; // per panel
  const columns = Math.max(1, Math.min(n, Math.floor(box / (MIN_PANEL + overhead))));
  if (columns < n) { delete spec.hconcat; spec.concat = panels; spec.columns = columns; }
  let width = Math.max(MIN_PANEL, Math.floor(box / columns - overhead));
  if (width !== guess || columns < n) await render(width);
  for (let tries = 0; tries < 2 && drawnWidth(chart) > box && width > MIN_PANEL; tries++) { // axes that grew
    width = Math.max(MIN_PANEL, width - Math.ceil((drawnWidth(chart) - box) / columns));
    await render(width);
  }
  el.figure = { kind, data: drawn.data, request }; // the request again, as CSV, is the CSV export
}

function post(path, body) {
  return call(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

async function drawSlot(view, el, source, kind) {
  clearSlot(el, "loading");
  try {
    const request = { path: `/explore/figures/${kind}`, body: { source, params: params(view), format: "vega" } };
    const drawn = await post(request.path, request.body);
    await embed(el, drawn, kind, request);
    $(".summary", el).textContent = summaryText(drawn.summary);
    el.dataset.state = "drawn";
  } catch (e) {
    if (e instanceof RequestError && isSourceError(e)) { clearSlot(el, "error"); throw e; }
    clearSlot(el, e.field === "source" ? "empty" : "error");
    $(e.field === "source" ? ".note" : ".error", el).textContent = e.field === "source" ? `nothing to draw: ${e.message}` : e.message;
  }
}

function settle(view) {
  const states = $$(".slot", view).map((el) => el.dataset.state);
  view.dataset.state = states.includes("error") ? "error" : states.includes("drawn") ? "drawn" : "empty";
}

async function drawView(view, sources) {
  const active = SLOTS.filter((s) => sources[s] !== null);
  const els = slotsOf(view, active);
  view.dataset.state = "loading";
  for (const [i, slot] of active.entries()) await drawSlot(view, els[i], sources[slot], view.dataset.figure);
  settle(view);
}

function readSources() {
  const sources = {};
  SLOTS.forEach((slot) => { sources[slot] = sourceOf(slot); });
  return sources;
}

// A source that cannot be drawn leaves no figure on screen: every figure drawn before is of another source.
function clearViews() {
  $$(".view[data-figure]").forEach((v) => { $$(".slot", v).forEach((el) => clearSlot(el, "error")); v.dataset.state = "error"; });
}

async function drawAll() {
  const error = $("#source-error");
  error.textContent = "";
  let sources;
  try { sources = readSources(); } catch (e) { error.textContent = e.message; clearViews(); return; }
  saveState();
  document.body.dataset.state = "drawing";
  for (const view of $$(".view[data-figure]")) {
    try { await drawView(view, sources); } catch (e) {
      const slot = SLOTS.find((s) => sources[s] !== null && $$(`.slot[data-slot=${s}][data-state=error]`, view).length);
      error.textContent = `${(slot || "a").toUpperCase()}: ${e.message}`; // one error per request, shown once
      clearViews();
      break;
    }
  }
  document.body.dataset.state = "drawn";
}

async function redrawView(view) {
  $("#source-error").textContent = "";
  let sources;
  try { sources = readSources(); } catch (e) { $("#source-error").textContent = e.message; clearViews(); return; }
  saveState();
  try { await drawView(view, sources); } catch (e) { $("#source-error").textContent = e.message; clearViews(); }
}

// --- exports -------------------------------------------------------------------------------------------------
function download(name, url) {
  const a = document.createElement("a");
  a.href = url; a.download = name;
  document.body.appendChild(a); a.click(); a.remove();
}

// CSV is written by the service (posenc.plots.model.Figure.to_csv, as `posenc plot --out x.csv`): the figure's
// request again, in that format.
async function csvOf(figure) {
  return (await post(figure.request.path, { ...figure.request.body, format: "csv" })).csv;
}

async function exportSlot(el, what) {
  const name = `${el.figure.kind}${el.dataset.slot ? "-" + el.dataset.slot : ""}`;
  if (what === "png" || what === "svg") return download(`${name}.${what}`, await el.vegaView.toImageURL(what, what === "png" ? 2 : 1));
  const text = what === "csv" ? await csvOf(el.figure) : JSON.stringify(el.figure.data, null, 1);
  const url = URL.createObjectURL(new Blob([text], { type: what === "csv" ? "text/csv" : "application/json" }));
  download(`${name}.${what}`, url);
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// --- state in the URL ----------------------------------------------------------------------------------------
function saveState() {
  const state = { p: {} };
  SLOTS.forEach((slot) => {
    const kind = choice(slot), box = $(`.source[data-slot=${slot}]`);
    state[slot] = { kind, value: kind === "table" ? $(".table", box).value : kind === "config" || kind === "specs" ? $(`.${kind}`, box).value : "" };
  });
  $$(".view[data-figure]").forEach((v) => { state.p[v.dataset.figure] = params(v); });
  state.lab = { a: labChoice("a"), b: labChoice("b") }; // which kind of source only: a file stays in this page
  if (picked) state.pick = picked;
  history.replaceState(null, "", "#" + encodeURIComponent(JSON.stringify(state)));
}

function restoreState() {
  if (location.hash.length < 2) return false;
  let state;
  try { state = JSON.parse(decodeURIComponent(location.hash.slice(1))); } catch (e) { return false; }
  SLOTS.forEach((slot) => {
    const s = state[slot], box = $(`.source[data-slot=${slot}]`);
    if (!s || s.kind === "audited") return;
    const radio = $(`input[name=source-${slot}][value=${CSS.escape(s.kind)}]`);
    if (!radio) return;
    radio.checked = true;
    if (s.kind === "table") $(".table", box).value = s.value;
    else if (s.kind === "config" || s.kind === "specs") $(`.${s.kind}`, box).value = s.value;
  });
  Object.entries(state.p || {}).forEach(([figure, values]) => {
    const view = $(`.view[data-figure=${CSS.escape(figure)}]`);
    if (view) Object.entries(values).forEach(([name, value]) => { const input = $(`.params input[name=${CSS.escape(name)}]`, view); if (input) setParam(input, value); });
  });
  SLOTS.forEach((slot) => {
    const radio = state.lab && $(`input[name=lab-${slot}][value=${CSS.escape(String(state.lab[slot]))}]`);
    if (radio) radio.checked = true;
  });
  if (state.pick && typeof state.pick === "object") {
    Object.entries(state.pick).forEach(([name, value]) => {
      const input = $(`#pick .params [name=${CSS.escape(name)}]`);
      if (input) setParam(input, value);
    });
    picked = params($("#pick")); // asked again once the page is ready
  }
  return true;
}

// --- audit ---------------------------------------------------------------------------------------------------
function reportText(r) {
  const c = r.cache;
  const lines = [
    `${r.status.toUpperCase()}: ${r.diagnosis.title} (confidence ${r.diagnosis.confidence})`,
    `fix: ${r.diagnosis.fix}`, "",
    `cache: ${c.rows} rows x ${c.columns} columns, ${c.dtype} (${c.source}), layout ${c.layout}, rotary dim ${c.rotary_dim},` +
      ` attention factor ${Number(c.attention_factor).toPrecision(6)}, position offset ${c.position_offset}, ${r.rows_checked} rows checked`,
    `inferred: ${r.inferred.description}`,
  ];
  if (r.expected) lines.push(`config: layer type ${r.expected.layer_type}, ${r.expected.spec.scaling.rope_type}, base ${r.expected.spec.base}`);
  lines.push("", "findings:");
  r.findings.forEach((f) => lines.push(`  [${f.severity}, ${f.confidence}] ${f.title}: ${f.evidence}`));
  lines.push("", `error against ${r.error_against}:`);
  r.error_by_position.forEach((e) => lines.push(`  positions ${e.from}..${e.to}: ${e.max_abs_error.toExponential(2)} (${e.rows_checked} rows)`));
  return lines.join("\n");
}

async function audit(file) {
  const error = $("#audit-error"), out = $("#audit-report"), view = $("#audit-view");
  error.textContent = ""; out.textContent = "";
  slotsOf(view, []); // the previous report and figure go first, whatever comes next
  document.body.dataset.audit = "running";
  try {
    const form = new FormData();
    form.append("file", file, file.name);
    form.append("start", $("#audit-start").value || "0");
    const config = $(".source[data-slot=a] .config").value.trim();
    if (config && choice("a") === "config" && $("#audit-use-config").checked) form.append("config", config);
    const report = await call("/v1/audit", { method: "POST", body: form });
    out.textContent = reportText(report);
    const [el] = slotsOf(view, ["a"]);
    const request = { path: "/explore/figures/audit", body: { report, format: "vega" } };
    const drawn = await post(request.path, request.body);
    await embed(el, drawn, "audit", request);
    el.dataset.state = "drawn";
    audited = report.built_from.spec;
    $("input[name=source-b][value=audited]").disabled = false;
    document.body.dataset.audit = "done";
  } catch (e) {
    error.textContent = e.message;
    document.body.dataset.audit = "error";
  }
}

// --- the Lab view: `posenc lab` results files ---------------------------------------------------------------
// A: the documented run (the service has it: no file to send) or a results file; B: nothing or a results file.
// A chosen file is read here and sent as JSON with each request; the URL records only which kinds are chosen.
const labFiles = { a: null, b: null }; // the File chosen for each slot
let labDrawing = Promise.resolve(); // drawings run one after another: the last choice is what stays on screen

function labChoice(slot) { return $(`input[name=lab-${slot}]:checked`).value; }

async function drawLabSlot(el, slot) {
  clearSlot(el, "loading");
  const kind = labChoice(slot), file = kind === "file" ? labFiles[slot] : null;
  const name = kind === "documented" ? "the documented run" : file ? file.name : "a results file";
  $(".slot-name", el).textContent = `${slot.toUpperCase()}: ${name}`;
  if (kind === "file" && !file) {
    clearSlot(el, "empty");
    $(".note", el).textContent = "choose or drop a results file (posenc lab --out results.json)";
    return;
  }
  try {
    const body = { format: "vega" };
    if (file) {
      const text = await file.text();
      try { body.results = JSON.parse(text); } catch (e) { throw new Error(`is not valid JSON (${e.message})`); }
    }
    const request = { path: "/explore/figures/lab", body };
    const drawn = await post(request.path, body);
    await embed(el, drawn, "lab", request);
    $(".summary", el).textContent = summaryText(drawn.summary);
    el.dataset.state = "drawn";
  } catch (e) {
    clearSlot(el, "error");
    $(".error", el).textContent = file ? `${file.name}: ${e.message}` : e.message;
  }
}

function drawLab() {
  labDrawing = labDrawing.then(async () => {
    const view = $("#lab"), active = SLOTS.filter((slot) => labChoice(slot) !== "none");
    view.dataset.state = "loading";
    const els = slotsOf(view, active);
    for (const [i, slot] of active.entries()) await drawLabSlot(els[i], slot);
    settle(view);
  });
  return labDrawing;
}

function wireLab() {
  $$("#lab input[type=radio]").forEach((radio) => radio.addEventListener("change", () => { saveState(); drawLab(); }));
  $$("#lab .lab-source").forEach((box) => {
    const slot = box.dataset.slot, input = $(".lab-file", box);
    const take = (file) => {
      labFiles[slot] = file;
      $(`input[name=lab-${slot}][value=file]`).checked = true;
      saveState();
      drawLab();
    };
    input.addEventListener("change", () => { if (input.files.length) take(input.files[0]); });
    box.addEventListener("dragover", (e) => { e.preventDefault(); box.classList.add("over"); });
    box.addEventListener("dragleave", () => box.classList.remove("over"));
    box.addEventListener("drop", (e) => {
      e.preventDefault(); box.classList.remove("over");
      if (e.dataTransfer.files.length) take(e.dataTransfer.files[0]);
    });
  });
}

// --- Pick: which encoding for a job (POST /v1/pick, posenc.pick) ---------------------------------------------
// The form's values as last asked are the share link's "pick" (null until asked); the answer is drawn into text
// nodes only. Source A's config.json goes with the question when it is pasted and "use source A's config.json" is
// ticked (as the audit's), making the goal "extend" unless one is chosen.
let picked = null;
let asking = 0; // the latest question: an earlier answer arriving after it is dropped

function make(tag, text, attrs = {}) {
  const el = document.createElement(tag);
  if (text !== undefined) el.textContent = text;
  Object.entries(attrs).forEach(([name, value]) => el.setAttribute(name, value));
  return el;
}

// Python's f"{v:.{d}f}" (the CLI's lines): toFixed rounds the exact binary value as Python does, but an exact tie
// (0.5625 to 3 places) up, where Python rounds it to even.
function fixed(v, d) {
  const up = v.toFixed(d);
  if (!/^50*$/.test(v.toFixed(d + 20).slice(-20))) return up; // the 20 digits after the d-th
  const down = (v - 5 * 10 ** -(d + 1)).toFixed(d);
  return Number(down.slice(-1)) % 2 === 0 ? down : up;
}

// A parameter or computed value as the CLI shows it: 6 significant digits, a long list by its first 4 values.
function shown(v) {
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6)));
  if (Array.isArray(v)) return `[${(v.length > 8 ? v.slice(0, 4) : v).map(shown).join(", ")}${v.length > 8 ? `, ... ${v.length} values` : ""}]`;
  return typeof v === "string" ? v : JSON.stringify(v);
}

// A lab citation as the CLI prints it (posenc.pick.evidence.describe_point): file, JSON path, what was measured.
function labLine(e) {
  const value = e.value === null ? "n/a" : fixed(e.value, e.metric === "accuracy" ? 3 : 2);
  return `${e.file} ${e.path}: ${e.scheme}: ${e.task} ${e.metric} ${value} at length ${e.length} ` +
    `(${shown(e.length / e.train_len)}x the training length)`;
}

function evidenceItem(e) {
  const li = make("li", undefined, { "data-kind": e.kind });
  if (e.kind === "lab") {
    li.append(make("span", "lab", { class: "kind" }), " ",
      make("button", labLine(e), { type: "button", class: "cite", title: "the Lab view draws this file" }));
  } else if (e.kind === "source") {
    const link = make("a", e.title, { target: "_blank", rel: "noopener noreferrer", title: e.says });
    if (/^https?:\/\//.test(e.url)) link.href = e.url; // never a javascript: or other scheme
    li.append(make("span", e.id, { class: "kind" }), " ", link, `, ${e.where}`);
  } else {
    li.append(make("span", "config", { class: "kind" }), " ", make("code", `${e.key} = ${shown(e.value)}`),
      ` (${e.says})`);
  }
  return li;
}

function reasonItems(list, reasons) {
  list.replaceChildren(...reasons.map((r) => {
    const li = make("li", r.text);
    li.append(make("ul", undefined, { class: "evidence" }));
    li.lastChild.append(...r.evidence.map(evidenceItem));
    return li;
  }));
}

function fillTable(table, values) {
  table.replaceChildren(...Object.entries(values).map(([k, v]) => {
    const tr = make("tr");
    tr.append(make("th", k), make("td", shown(v)));
    return tr;
  }));
}

function drawPick(answer) {
  const box = $("#pick-answer"), rec = answer.recommendation;
  $(".pick-question", box).textContent = `posenc pick: ${answer.scenario.question}`;
  $(".pick-summary", box).textContent = rec.summary;
  fillTable($(".pick-parameters", box), rec.parameters || {});
  $(".pick-patch", box).hidden = !rec.config_patch;
  $("#pick-patch").textContent = rec.config_patch ? JSON.stringify(rec.config_patch, null, 2) : "";
  $(".pick-copied", box).textContent = "";
  reasonItems($(".pick-reasons", box), answer.reasons);
  $(".pick-notes", box).hidden = !answer.notes.length;
  reasonItems($(".pick-notes ol", box), answer.notes);
  $(".pick-computed", box).hidden = !Object.keys(answer.computed).length;
  fillTable($(".pick-computed table", box), answer.computed);
  const lab = answer.lab;
  $(".pick-lab", box).textContent = lab.file ? `lab evidence from ${lab.file} (budget ${lab.budget}, ${lab.cpu})` : "";
  box.hidden = false;
}

function pickError(e) {
  const field = e.field || "";
  let text = field && !e.message.startsWith(`${field}:`) ? `${field}: ${e.message}` : e.message;
  if (field.startsWith("hf_config")) text += " (source A's config.json)";
  $("#pick-error").textContent = text;
  const input = field && $(`#pick .params [name=${CSS.escape(field.startsWith("hf_config") ? "use_config" : field)}]`);
  if (input) input.setAttribute("aria-invalid", "true");
}

async function ask() {
  const panel = $("#pick"), mine = ++asking;
  picked = params(panel);
  saveState();
  $("#pick-error").textContent = "";
  $$("[aria-invalid]", panel).forEach((el) => el.removeAttribute("aria-invalid"));
  $("#pick-answer").hidden = true;
  panel.dataset.state = "asking";
  try {
    const { use_config: useConfig, ...body } = picked;
    if (useConfig && choice("a") === "config" && $(".source[data-slot=a] .config").value.trim()) body.hf_config = sourceOf("a").config;
    if (labChoice("a") === "file" && labFiles.a) { // reason from the run the Lab view shows, as --results does
      try { body.results = JSON.parse(await labFiles.a.text()); } catch (e) {
        throw new RequestError({ message: `${labFiles.a.name} (Lab A) is not valid JSON (${e.message})`, field: "results" }, 0);
      }
    }
    const answer = await post("/v1/pick", body);
    if (mine !== asking) return;
    drawPick(answer);
    panel.dataset.state = "answered";
  } catch (e) {
    if (mine !== asking) return;
    pickError(e);
    panel.dataset.state = "error";
  }
}

// The patch to the clipboard where the page may write it (a secure context: https, localhost); elsewhere the text
// is selected and the browser's own copy tried, and the note says what happened. Never an error.
async function copyPatch() {
  const pre = $("#pick-patch"), note = $(".pick-copied");
  try {
    if (!navigator.clipboard) throw new Error("no clipboard");
    await navigator.clipboard.writeText(pre.textContent);
    note.textContent = "copied";
  } catch (e) {
    getSelection().selectAllChildren(pre);
    let copied = false;
    try { copied = document.execCommand("copy"); } catch (err) { copied = false; }
    note.textContent = copied ? "copied" : "selected: press Ctrl+C (or ⌘C) to copy";
  }
}

function wirePick() {
  $("#pick-ask").addEventListener("click", ask);
  $("#pick-copy").addEventListener("click", copyPatch);
  $("#pick-answer").addEventListener("click", (e) => { // a lab citation: the Lab view draws its file
    if (e.target.closest("button.cite")) $("#lab").scrollIntoView();
  });
}

// --- wiring --------------------------------------------------------------------------------------------------
async function loadTables() {
  try {
    const { tables } = await call("/v1/tables");
    const ready = tables.filter((t) => t.state === "READY");
    $$(".table").forEach((select) => {
      ready.forEach((t) => {
        const option = document.createElement("option");
        option.value = t.name;
        option.textContent = `${t.name} (${t.kind})`;
        select.appendChild(option);
      });
      const rope = ready.find((t) => t.kind === "rope");
      if (rope) select.value = rope.name;
    });
  } catch (e) {
    $("#source-error").textContent = `tables: ${e.message}`;
  }
}

function wire() {
  $("#draw").addEventListener("click", drawAll);
  let timer = null;
  $$(".view[data-figure] .params input").forEach((input) => input.addEventListener("input", () => {
    clearTimeout(timer);
    const view = input.closest(".view");
    timer = setTimeout(() => redrawView(view), 400);
  }));
  $$(".source input[type=radio], .source select").forEach((el) => el.addEventListener("change", drawAll));
  document.addEventListener("click", (e) => {
    const button = e.target.closest("button[data-export]");
    if (!button) return;
    const el = button.closest(".slot");
    if (el && el.figure) exportSlot(el, button.dataset.export).catch((err) => { $(".error", el).textContent = err.message; });
  });
  const drop = $("#drop"), input = $("#audit-file");
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault(); drop.classList.remove("over");
    if (e.dataTransfer.files.length) audit(e.dataTransfer.files[0]);
  });
  input.addEventListener("change", () => { if (input.files.length) audit(input.files[0]); input.value = ""; });
}

wire();
wireLab();
wirePick();
loadTables().then(async () => {
  const restored = restoreState();
  document.body.dataset.ready = "yes";
  drawLab(); // the documented run needs no input: drawn at once, beside the other views
  if (picked) ask(); // a link with a question answers it
  if (restored) await drawAll();
});
