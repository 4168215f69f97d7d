// The explorer page: asks the service for each figure (SVG drawn on the server) and shows it.
// Talks only to the service that served it; user input goes into text nodes, never into HTML.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);

async function call(path, options) {
  const response = await fetch(path, options);
  const text = await response.text();
  let body;
  try { body = JSON.parse(text); } catch (e) { body = null; }
  if (!response.ok) {
    const err = body && body.error ? body.error : { message: `HTTP ${response.status}` };
    throw new Error(err.field ? `${err.message}` : err.message);
  }
  return body;
}

function source() {
  const choice = document.querySelector("input[name=source]:checked").value;
  if (choice === "table") {
    const name = $("#table").value;
    if (!name) throw new Error("no table is served: paste a config.json or specs instead");
    return { table: name };
  }
  const raw = $(choice === "config" ? "#config" : "#specs").value.trim();
  if (!raw) throw new Error(`paste ${choice === "config" ? "a config.json" : "a JSON list of specs"} first`);
  let doc;
  try { doc = JSON.parse(raw); } catch (e) { throw new Error(`${choice}: not valid JSON (${e.message})`); }
  return choice === "config" ? { config: doc } : { specs: doc };
}

function params(view) {
  const out = {};
  view.querySelectorAll(".params input").forEach((input) => {
    if (input.value !== "") out[input.name] = Number(input.value);
  });
  return out;
}

function show(img, svg) {
  img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svg);
}

function summarize(kind, summary) {
  if (kind === "alibi") {
    return Object.entries(summary.variants).map(([name, v]) =>
      `${name}: ${v.flagged_heads.length ? "heads " + v.flagged_heads.join(", ") + " below 1 nat" : "no head below 1 nat"}`
    ).join("\n") + ` (context ${summary.context}, γ ${summary.gamma})`;
  }
  return (summary.panels || []).map((p) => {
    if (kind === "spectrum") {
      return `${p.label}: ${p.rope_type}, ${p.full_turns_before ?? "?"} frequencies turn fully within ${p.trained_context ?? "?"}` +
        (p.full_turns_after !== undefined && p.rope_type !== "default" ? `, ${p.full_turns_after} after scaling within ${p.extended_context ?? p.trained_context}` : "") +
        `, attention factor ${Number(p.attention_factor).toFixed(4)}`;
    }
    if (kind === "precision") {
      return `${p.label} at position ${p.max_position}: ` + Object.entries(p.error_at_max_position)
        .map(([k, v]) => `${k} ${Number(v).toExponential(1)}`).join(", ");
    }
    if (kind === "decay") return `${p.label}: bound ${p.bound_at_1.toFixed(1)} at distance 1, ${p.bound_at_max_unscaled.toFixed(2)} at ${p.max_distance} (unscaled)`;
    return `${p.label}: ${p.layout}, dim ${p.dim}, ${p.positions} positions`;
  }).join("\n");
}

async function drawView(view, src) {
  const kind = view.dataset.figure;
  const img = $("img", view), error = $(".error", view), summary = $(".summary", view);
  error.textContent = "";
  view.dataset.state = "loading";
  try {
    const body = await call(`/explore/figures/${kind}`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ source: src, params: params(view) }),
    });
    show(img, body.svg);
    summary.textContent = summarize(kind, body.summary);
    view.dataset.state = "drawn";
  } catch (e) {
    img.removeAttribute("src");
    summary.textContent = "";
    error.textContent = e.message;
    view.dataset.state = "error";
  }
}

async function drawAll() {
  $("#source-error").textContent = "";
  let src;
  try { src = source(); } catch (e) { $("#source-error").textContent = e.message; return; }
  document.body.dataset.state = "drawing";
  await Promise.all([...document.querySelectorAll(".view")].map((view) => drawView(view, src)));
  document.body.dataset.state = "drawn";
}

function reportText(r) {
  const c = r.cache;
  const lines = [
    `${r.status.toUpperCase()}: ${r.diagnosis.title} (confidence ${r.diagnosis.confidence})`,
    `fix: ${r.diagnosis.fix}`, "",
    `cache: ${c.rows} rows x ${c.columns} columns, ${c.dtype} (${c.source}), layout ${c.layout}, rotary dim ${c.rotary_dim},` +
      ` attention factor ${c.attention_factor.toPrecision(6)}, position offset ${c.position_offset}`,
    `inferred: ${r.inferred.description}`,
  ];
  if (r.expected) lines.push(`config: layer type ${r.expected.layer_type}, ${r.expected.spec.scaling.rope_type}, base ${r.expected.spec.base}`);
  lines.push("", "findings:");
  r.findings.forEach((f) => lines.push(`  [${f.severity}, ${f.confidence}] ${f.title}: ${f.evidence}`));
  lines.push("", `error against ${r.error_against}:`);
  r.error_by_position.forEach((e) => lines.push(`  positions ${e.from}..${e.to}: ${e.max_abs_error.toExponential(2)}`));
  return lines.join("\n");
}

async function audit(file) {
  const error = $("#audit-error"), out = $("#audit-report"), img = $("#audit-figure");
  error.textContent = ""; out.textContent = ""; img.removeAttribute("src");
  document.body.dataset.audit = "running";
  try {
    const form = new FormData();
    form.append("file", file, file.name);
    form.append("start", $("#audit-start").value || "0");
    const config = $("#config").value.trim();
    if (config && $("#audit-use-config").checked) form.append("config", config);
    const report = await call("/v1/audit", { method: "POST", body: form });
    out.textContent = reportText(report);
    const figure = await call("/explore/figures/audit", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ report }),
    });
    show(img, figure.svg);
    document.body.dataset.audit = "done";
  } catch (e) {
    error.textContent = e.message;
    document.body.dataset.audit = "error";
  }
}

async function loadTables() {
  const select = $("#table");
  try {
    const { tables } = await call("/v1/tables");
    tables.filter((t) => t.state === "READY").forEach((t) => {
      const option = document.createElement("option");
      option.value = t.name;
      option.textContent = `${t.name} (${t.kind})`;
      select.appendChild(option);
    });
    const rope = tables.find((t) => t.kind === "rope");
    if (rope) select.value = rope.name;
  } catch (e) {
    $("#source-error").textContent = `tables: ${e.message}`;
  }
}

function wireDrop() {
  const drop = $("#drop"), input = $("#audit-file");
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault(); drop.classList.remove("over");
    if (e.dataTransfer.files.length) audit(e.dataTransfer.files[0]);
  });
  input.addEventListener("change", () => { if (input.files.length) audit(input.files[0]); });
}

$("#draw").addEventListener("click", drawAll);
wireDrop();
loadTables().then(() => { document.body.dataset.ready = "yes"; });
