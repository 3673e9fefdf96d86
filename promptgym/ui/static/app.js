// promptgym ui: one plain script, no build step. Routes live in the URL hash; data comes from /api/.
// Everything users or models wrote (inputs, outputs, prompts) is put on the page as text, never as HTML.
"use strict";

const KEY = "promptgym-ui-key";
const LIVE = ["created", "starting", "running", "writing_artifacts", "submitted"];
const POLL_MS = 2000;
const PAGE = 100;
const MAX_TRACES = 1000;  // the API's bound on one list
let poll = null;

class ApiError extends Error {
  constructor(status, message, param) { super(message); this.status = status; this.param = param; }
}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  const key = sessionStorage.getItem(KEY);
  if (key) headers["Authorization"] = "Bearer " + key;
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, Object.assign({}, options, { headers }));
  } catch (_) {  // no answer at all: say so rather than the browser's "Failed to fetch"
    throw new ApiError(0, "the promptgym ui server can't be reached (was it stopped?); reload once it runs again");
  }
  if (response.status === 401) { askForKey(key ? "that key was refused" : ""); throw new ApiError(401, "API key needed"); }
  const text = await response.text();
  if (!response.ok) {
    let error = {};
    try { error = JSON.parse(text).error || {}; } catch (_) { /* not JSON: show the status */ }
    throw new ApiError(response.status, error.message || ("HTTP " + response.status), error.param);
  }
  return (response.headers.get("content-type") || "").includes("json") ? JSON.parse(text) : text;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const json = (value) => JSON.stringify(value, null, 2);
const score = (value) => (typeof value === "number" ? value.toFixed(3) : "–");
const when = (seconds) => (seconds ? new Date(seconds * 1000).toLocaleString() : "–");
const interval = (item) => (item && typeof item.low === "number" ? `[${score(item.low)}, ${score(item.high)}]` : "");

function askForKey(problem) {
  const form = document.getElementById("key-form");
  form.hidden = false;
  document.getElementById("key-error").textContent = problem || "";
  document.getElementById("key-input").focus();
}

function setMain(...children) {
  const main = document.getElementById("main");
  main.replaceChildren(...children.flat(2).filter((child) => child !== null && child !== undefined && child !== ""));
  return main;
}

function showError(error) {
  if (error.status === 401) { setMain(el("p", { class: "muted" }, "Waiting for the API key.")); return; }
  setMain(el("p", { class: "error", id: "page-error" }, error.message));
}

function svgInto(container, svgText) {
  // The SVG is drawn by the server (promptgym.ui.charts), which escapes every label it writes.
  container.innerHTML = svgText;
}

// ---- runs ------------------------------------------------------------------------------------

function scoreCell(entry) {
  if (!entry) return "–";
  const reward = entry.scores.reward;
  return `${score(reward)} ${interval(entry.intervals.reward)}`.trim();
}

async function runsPage() {
  const data = await api("/api/runs");
  const chosen = new Set();
  const compare = el("button", { id: "compare", disabled: true, onclick: () => {
    location.hash = "#/compare/" + [...chosen].map(encodeURIComponent).join("/");
  } }, "Compare the two chosen runs");
  const rows = data.runs.map((run) => el("tr", { "data-run": run.id },
    el("td", {}, el("input", { type: "checkbox", class: "pick", "aria-label": "choose " + run.id, onchange: (event) => {
      if (event.target.checked) chosen.add(run.id); else chosen.delete(run.id);
      compare.disabled = chosen.size !== 2;
    } })),
    el("td", {}, el("a", { href: "#/runs/" + encodeURIComponent(run.id) }, run.id)),
    el("td", {}, run.name || "", run.error ? el("div", { class: "error" }, run.error) : null),
    el("td", {}, el("span", { class: "status " + run.status }, run.status)),
    el("td", {}, run.epochs_done ?? "–"),
    el("td", {}, scoreCell(run.baseline)), el("td", {}, scoreCell(run.final)), el("td", {}, when(run.created))));
  setMain(el("h1", {}, "Runs"),
    data.runs.length ? el("table", { id: "runs-table" },
      el("tr", {}, ["", "run", "name", "status", "epochs", "baseline (95% CI)", "final (95% CI)", "created"]
        .map((name) => el("th", {}, name))), rows)
      : el("p", { class: "muted" }, "No runs in this folder yet (promptgym train writes them)."),
    el("p", {}, compare));
  if (data.runs.some((run) => LIVE.includes(run.status))) {
    poll = setInterval(async () => {
      const fresh = await api("/api/runs").catch(() => null);
      if (!fresh) return;
      for (const run of fresh.runs) {
        const cell = document.querySelector(`tr[data-run="${CSS.escape(run.id)}"] .status`);
        if (cell) { cell.textContent = run.status; cell.className = "status " + run.status; }
      }
      if (!fresh.runs.some((run) => LIVE.includes(run.status))) { clearInterval(poll); poll = null; }
    }, POLL_MS);
  }
}

function summaryCard(run) {
  return el("div", { class: "card", id: "run-summary" },
    el("div", {}, el("span", { class: "status " + run.status, id: "run-status" }, run.status), " ",
      `${run.job_type || ""} · epochs ${run.epochs_done ?? "–"} · LM calls ${run.lm_calls ?? "–"}`),
    el("div", {}, `baseline ${scoreCell(run.baseline)} · final ${scoreCell(run.final)}`,
      run.final ? ` on ${run.final.size} ${run.final.split} examples` : ""),
    run.error ? el("div", { class: "error" }, run.error) : null);
}

function heldOutView(held) {
  // what `promptgym runs compare SERVED RUN --traces DIR` kept in this run's folder
  if (!held) return [];
  const row = (label, source, arm) => el("tr", {}, el("td", {}, label), el("td", {}, el("code", {}, source)),
    el("td", {}, arm.reward.toFixed(3)), el("td", {}, "[" + arm.low.toFixed(3) + ", " + arm.high.toFixed(3) + "]"));
  const d = held.difference;
  return [el("h2", {}, "Served against retrained, on " + held.n + " held-out traces of " + held.program),
    el("table", { id: "held-out" },
      el("tr", {}, el("th", {}, "program"), el("th", {}, "source"), el("th", {}, "reward"), el("th", {}, "95% interval")),
      row("served", held.served, held.before), row("retrained", held.retrained, held.after)),
    el("p", { id: "held-out-verdict" }, "retrained - served: " + (d.difference >= 0 ? "+" : "") + d.difference.toFixed(3) +
      " [" + d.low.toFixed(3) + ", " + d.high.toFixed(3) + "], p=" + d.p_value.toPrecision(2) + " (" + d.wins +
      " better, " + d.losses + " worse): " + held.verdict)];
}

function comparisonsTable(items) {
  if (!items.length) return el("p", { class: "muted" }, "No checks against the start yet.");
  return el("table", { id: "comparisons" },
    el("tr", {}, ["check", "candidate (95% CI)", "start (95% CI)", "difference (95% CI)", "p", "wins/losses", "kept"]
      .map((name) => el("th", {}, name))),
    items.map((item) => el("tr", {},
      el("td", {}, `${item.stage || item.event} · ${item.split}`),
      el("td", {}, `#${item.candidate} ${score(item.candidate_score?.mean)} ${interval(item.candidate_score)}`),
      el("td", {}, `#${item.incumbent} ${score(item.incumbent_score?.mean)} ${interval(item.incumbent_score)}`),
      el("td", {}, `${score(item.test?.difference)} ${interval(item.test)}`),
      el("td", {}, typeof item.test?.p_value === "number" ? `${item.test.p_value.toPrecision(3)} (${item.test.method})` : "–"),
      el("td", {}, item.test ? `${item.test.wins}/${item.test.losses}` : "–"),
      el("td", { class: item.accepted ? "ok" : "error" }, item.accepted ? "kept" : "undone"))));
}

function exampleLine(item) {
  return el("div", { class: "example " + item.op },
    (item.op === "added" ? "+ " : item.op === "removed" ? "− " : "  ") +
    JSON.stringify(item.example.inputs) + " → " + JSON.stringify(item.example.outputs));
}

function variablesView(variables, source) {
  if (!variables.length) return el("p", { class: "muted" }, "No program file yet (the first checkpoint writes one).");
  return el("div", { id: "variables" }, el("p", { class: "muted" }, "from " + source),
    variables.map((variable) => el("div", { class: "card variable", "data-variable": variable.name },
      el("strong", {}, variable.name), variable.changed ? "" : el("span", { class: "muted" }, " (unchanged)"),
      el("label", {}, "Instructions"),
      el("pre", { class: "instructions" }, variable.instructions.map((op) =>
        el("span", { class: op.op === "same" ? "" : op.op }, op.text + " "))),
      el("label", {}, `Demonstrations (${variable.examples.filter((e) => e.op !== "removed").length})`),
      variable.examples.length ? variable.examples.map(exampleLine) : el("div", { class: "muted" }, "none"),
      variable.other.map((item) => el("div", {}, el("label", {}, item.field),
        el("pre", { class: "removed" }, json(item.before)), el("pre", { class: "added" }, json(item.after)))))));
}

async function runPage(runId) {
  const chart = el("div", { id: "chart" });
  const body = el("div", {});
  setMain(el("h1", {}, "Run ", el("code", {}, runId)), chart, body);
  async function refresh() {
    const [data, svg] = await Promise.all([api("/api/runs/" + encodeURIComponent(runId)),
      api("/api/runs/" + encodeURIComponent(runId) + "/curves.svg")]);
    svgInto(chart, svg);
    body.replaceChildren(summaryCard(data.run),
      ...heldOutView(data.held_out),
      el("h2", {}, "Checks against the start (history.comparisons)"), comparisonsTable(data.comparisons),
      el("h2", {}, "Prompts and demonstrations: start → best"), variablesView(data.variables, data.variables_source));
    return data.run.status;
  }
  const status = await refresh();
  if (LIVE.includes(status)) {
    poll = setInterval(async () => {
      try { if (!LIVE.includes(await refresh())) { clearInterval(poll); poll = null; } }
      catch (error) {  // keep polling: a run folder being written may read badly for a moment
        document.getElementById("poll-error")?.remove();
        body.prepend(el("p", { class: "error", id: "poll-error" }, error.message));
      }
    }, POLL_MS);
  }
}

async function comparePage(ids) {
  const runs = await Promise.all(ids.map(async (id) => {
    const [data, svg] = await Promise.all([api("/api/runs/" + encodeURIComponent(id)),
      api("/api/runs/" + encodeURIComponent(id) + "/curves.svg")]);
    return { id, data, svg };
  }));
  // The series any of the runs has (val_reward first): a weight run's loss can be compared as well.
  const names = [...new Set(runs.flatMap((run) => Object.keys(run.data.curves.series)))]
    .sort((a, b) => (b === "val_reward") - (a === "val_reward"));
  const series = el("select", { id: "compare-series" }, names.map((name) => el("option", { value: name }, name)));
  const overlay = el("div", { id: "compare-chart" });
  const drawOverlay = async () => svgInto(overlay, await api("/api/compare.svg?" +
    ids.map((id) => "run=" + encodeURIComponent(id)).join("&") + "&series=" + encodeURIComponent(series.value)));
  series.addEventListener("change", drawOverlay);
  const columns = runs.map(({ id, data, svg }) => {
    const chart = el("div", { class: "run-chart" });
    svgInto(chart, svg);
    return el("div", { class: "compare-column", "data-run": id },
      el("h2", {}, el("a", { href: "#/runs/" + encodeURIComponent(id) }, data.run.name || id), " ",
        el("code", {}, id)),
      summaryCard(data.run), chart, el("h2", {}, "Checks against the start"), comparisonsTable(data.comparisons),
      el("h2", {}, "Prompts: start → best"), variablesView(data.variables, data.variables_source));
  });
  const best = ids.length === 2
    ? await api("/api/compare?" + ids.map((id) => "run=" + encodeURIComponent(id)).join("&")) : null;
  setMain(el("h1", {}, "Two runs side by side"), el("label", {}, "Series ", series), overlay,
    best ? el("div", { id: "best-diff" }, el("h2", {}, "Best prompts: ", el("code", {}, ids[0]), " → ",
      el("code", {}, ids[1])), variablesView(best.best, "each run's best program")) : null,
    el("div", { class: "columns" }, columns));
  await drawOverlay();
}

// ---- traces ----------------------------------------------------------------------------------

async function tracesPage(params) {
  const [programs] = await Promise.all([api("/api/traces/programs")]);
  const program = el("select", { id: "filter-program" }, el("option", { value: "" }, "all programs"),
    programs.programs.map((item) => el("option", { value: JSON.stringify([item.program, item.version]) },
      `${item.program} @ ${item.version || "(no version)"}`)));
  const rating = el("select", { id: "filter-rating" },
    [["", "any rating"], ["unrated", "not rated"], ["rated", "rated"], ["good", "rated good"], ["bad", "rated bad"],
      ["corrected", "corrected"], ["uncorrected", "not corrected"]].map(([value, text]) => el("option", { value }, text)));
  program.value = params.get("program") ? JSON.stringify([params.get("program"), params.get("version") || ""]) : "";
  rating.value = params.get("rating") || "";
  const apply = () => {
    const [name, version] = program.value ? JSON.parse(program.value) : ["", ""];
    const query = new URLSearchParams();
    if (name) { query.set("program", name); query.set("version", version); }
    if (rating.value) query.set("rating", rating.value);
    location.hash = "#/traces?" + query.toString();
  };
  program.addEventListener("change", apply);
  rating.addEventListener("change", apply);
  const query = new URLSearchParams(params);
  const limit = Number(params.get("limit") || PAGE);
  query.set("limit", String(limit));
  const data = await api("/api/traces?" + query.toString());
  const more = data.traces.length === limit && limit < MAX_TRACES ? el("button", { id: "more", onclick: () => {
    const next = new URLSearchParams(params);
    next.set("limit", String(Math.min(MAX_TRACES, limit + PAGE)));
    location.hash = "#/traces?" + next.toString();
  } }, `Show ${PAGE} more`) : null;
  const rows = data.traces.map((trace) => el("tr", { "data-trace": trace.id },
    el("td", {}, el("a", { href: "#/traces/" + trace.id }, trace.id.slice(0, 10))),
    el("td", {}, when(trace.created)), el("td", {}, `${trace.program} @ ${trace.version}`),
    el("td", {}, el("code", {}, trace.inputs)), el("td", {}, el("code", {}, trace.outputs)),
    el("td", { class: "rating" }, trace.rating === null ? "–" : (trace.rating >= 0.5 ? "good" : "bad")),
    el("td", {}, trace.corrected ? "corrected" : "")));
  setMain(el("h1", {}, "Traces"),
    el("div", { class: "filters" }, el("label", {}, "Program", program), el("label", {}, "Rating", rating)),
    rows.length ? el("table", { id: "traces-table" },
      el("tr", {}, ["trace", "when", "program", "inputs", "output", "rating", ""].map((name) => el("th", {}, name))), rows)
      : el("p", { class: "muted", id: "no-traces" }, "No traces match."),
    el("p", { class: "muted" }, `${data.traces.length} shown, newest first. `, more));
}

function resolve(schema, root) {
  if (schema && schema.$ref && schema.$ref.startsWith("#/")) {
    return resolve(schema.$ref.slice(2).split("/").reduce((node, part) => node?.[part], root), root);
  }
  if (schema && Array.isArray(schema.anyOf)) {  // Optional[X] is anyOf [X, null]: edit it as X
    const kept = schema.anyOf.filter((option) => option.type !== "null");
    if (kept.length === 1) return Object.assign({}, schema, resolve(kept[0], root), { anyOf: undefined, nullable: true });
  }
  return schema || {};
}

function fieldFor(name, schema, value, required) {
  const kind = schema.enum ? "enum" : schema.type === "string" ? "string"
    : schema.type === "number" || schema.type === "integer" ? "number" : schema.type === "boolean" ? "boolean" : "json";
  let input;
  if (kind === "enum") {
    input = el("select", {}, el("option", { value: "" }, "–"),
      schema.enum.map((option) => el("option", { value: JSON.stringify(option) }, String(option))));
    input.value = value === undefined ? "" : JSON.stringify(value);
  } else if (kind === "string") {
    input = el("textarea", { rows: String(Math.min(8, Math.max(2, String(value ?? "").split("\n").length))) });
    input.value = value ?? "";
  } else if (kind === "number") {
    input = el("input", { type: "text", inputmode: "decimal" });
    input.value = value ?? "";
  } else if (kind === "boolean") {
    input = el("select", {}, el("option", { value: "" }, "–"), el("option", { value: "true" }, "true"),
      el("option", { value: "false" }, "false"));
    input.value = value === undefined || value === null ? "" : String(value);
  } else {
    input = el("textarea", { rows: "4" });
    input.value = value === undefined ? "" : json(value);
  }
  input.setAttribute("name", name);
  input.setAttribute("data-field", name);
  input.setAttribute("data-kind", kind);
  const help = [schema.type || kind, required ? "required" : "optional", schema.description].filter(Boolean).join(" · ");
  return el("div", { class: "field", "data-field-box": name },
    el("label", { for: "field-" + name }, name, " ", el("span", { class: "muted" }, help)),
    Object.assign(input, { id: "field-" + name }), el("div", { class: "field-error", "data-error-for": name }));
}

function readField(input) {
  const text = input.value;
  const kind = input.getAttribute("data-kind");
  if (text.trim() === "") return undefined;  // left empty: not sent, so a required field is named by the server
  if (kind === "string") return text;
  if (kind === "number") { const number = Number(text.trim()); return Number.isFinite(number) ? number : text; }
  try { return JSON.parse(text); } catch (_) { return text; }  // the server says what the field expects
}

function correctionForm(trace, schema, onSaved) {
  const current = trace.correction || trace.trace.outputs || {};
  const root = schema || {};
  const properties = resolve(schema, root).properties;
  const required = new Set(resolve(schema, root).required || []);
  const fields = properties ? Object.entries(properties).map(([name, field]) =>
    fieldFor(name, resolve(field, root), current[name], required.has(name)))
    : [fieldFor("output", { type: "object", description: "no schema stored for this version: the whole output as JSON" },
      current, true)];
  const comment = el("textarea", { id: "comment", rows: "2", placeholder: "why (optional, stored with the correction)" });
  const message = el("div", { id: "form-message" });
  const form = el("form", { id: "correction-form", class: "card" }, el("h2", {}, "Correct the output"),
    properties ? "" : el("p", { class: "muted" }, "No output schema is stored for this program version."),
    fields, el("label", { for: "comment" }, "Comment"), comment,
    el("p", {}, el("button", { type: "submit", class: "primary", id: "save-correction" }, "Save correction")), message);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    form.querySelectorAll(".field").forEach((box) => box.classList.remove("invalid"));
    form.querySelectorAll(".field-error").forEach((box) => { box.textContent = ""; });
    message.replaceChildren();
    let correction = {};
    if (properties) {
      form.querySelectorAll("[data-field]").forEach((input) => {
        const value = readField(input);
        if (value !== undefined) correction[input.getAttribute("data-field")] = value;
      });
    } else {
      correction = readField(form.querySelector("[data-field]"));
    }
    const body = { correction };
    if (comment.value.trim()) body.comment = comment.value.trim();
    try {
      await api("/api/traces/" + trace.trace.id + "/feedback", { method: "POST", body: JSON.stringify(body) });
      message.replaceChildren(el("span", { class: "ok", id: "saved" }, "Correction saved."));
      onSaved();
    } catch (error) {
      const field = (error.param || "").replace(/^correction\.?/, "").split(".")[0];
      const box = field && form.querySelector(`[data-error-for="${CSS.escape(field)}"]`);
      if (box) {
        box.textContent = error.message;
        box.parentElement.classList.add("invalid");
      }
      message.replaceChildren(el("span", { class: "error", id: "form-error" }, error.message));
    }
  });
  return form;
}

async function tracePage(traceId) {
  const data = await api("/api/traces/" + encodeURIComponent(traceId));
  const trace = data.trace;
  const reload = () => tracePage(traceId).catch(showError);
  const rate = (value) => async () => {
    try {
      await api("/api/traces/" + trace.id + "/feedback", { method: "POST", body: JSON.stringify({ rating: value }) });
      reload();
    } catch (error) { showError(error); }
  };
  const note = el("input", { type: "text", id: "note", placeholder: "a comment without a correction" });
  const good = data.rating !== null && data.rating >= 0.5;
  const bad = data.rating !== null && data.rating < 0.5;
  setMain(
    el("p", {}, el("a", { href: "#/traces" }, "← all traces")),
    el("h1", {}, "Trace ", el("code", {}, trace.id)),
    el("div", { class: "card" }, `${trace.program} @ ${trace.version || "(no version)"} · ${when(trace.created)} · `,
      `${trace.model || "model unknown"} · ${trace.prompt_tokens}+${trace.completion_tokens} tokens · `,
      `${trace.latency_ms.toFixed(1)} ms`, trace.error ? el("div", { class: "error" }, trace.error) : null),
    el("h2", {}, "Inputs"), el("pre", { id: "trace-inputs" }, json(trace.inputs)),
    el("h2", {}, `Modules (${trace.modules.length})`),
    trace.modules.length ? trace.modules.map((step, index) => el("div", { class: "card module", "data-module": index },
      el("strong", {}, `${index + 1}. ${step.module}`),
      el("label", {}, "inputs"), el("pre", {}, json(step.inputs)),
      el("label", {}, "outputs"), el("pre", {}, json(step.outputs))))
      : el("p", { class: "muted" }, "No module steps were recorded."),
    el("h2", {}, "Output"), el("pre", { id: "trace-output" }, json(trace.outputs)),
    el("div", { class: "card", id: "rating" }, el("strong", {}, "Rating: "),
      el("span", { id: "current-rating" }, data.rating === null ? "not rated" : (good ? "good" : "bad")), " ",
      el("button", { id: "rate-good", class: good ? "chosen" : "", onclick: rate(1) }, "✓ Good"), " ",
      el("button", { id: "rate-bad", class: bad ? "chosen" : "", onclick: rate(0) }, "✗ Bad"),
      el("div", { class: "comment-row" }, note, " ", el("button", { id: "save-comment", onclick: async () => {
        if (!note.value.trim()) return;
        try {
          await api("/api/traces/" + trace.id + "/feedback", { method: "POST",
            body: JSON.stringify({ comment: note.value.trim() }) });
          reload();
        } catch (error) { showError(error); }
      } }, "Save comment"))),
    data.correction ? el("div", { class: "card", id: "current-correction" }, el("strong", {}, "Corrected output"),
      el("pre", {}, json(data.correction))) : null,
    correctionForm(data, data.output_schema, reload),
    el("h2", {}, "Feedback so far"),
    trace.feedback.length ? el("table", { id: "feedback" }, el("tr", {}, ["when", "rating", "correction", "comment"]
      .map((name) => el("th", {}, name))), trace.feedback.map((item) => el("tr", {}, el("td", {}, when(item.created)),
      el("td", {}, item.rating ?? ""), el("td", {}, item.correction ? el("code", {}, JSON.stringify(item.correction)) : ""),
      el("td", {}, item.comment || "")))) : el("p", { class: "muted" }, "None yet."));
}

// ---- routing ---------------------------------------------------------------------------------

async function route() {
  if (poll) { clearInterval(poll); poll = null; }
  const [path, query] = (location.hash.slice(1) || "/runs").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  document.getElementById("nav-runs").classList.toggle("active", parts[0] !== "traces");
  document.getElementById("nav-traces").classList.toggle("active", parts[0] === "traces");
  try {
    if (parts[0] === "traces" && parts[1]) await tracePage(parts[1]);
    else if (parts[0] === "traces") await tracesPage(new URLSearchParams(query || ""));
    else if (parts[0] === "compare") await comparePage(parts.slice(1));
    else if (parts[0] === "runs" && parts[1]) await runPage(parts[1]);
    else await runsPage();
    document.body.setAttribute("data-ready", location.hash || "#/runs");
  } catch (error) {
    showError(error);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, document.getElementById("key-input").value.trim());
    document.getElementById("key-form").hidden = true;
    route();
  });
  window.addEventListener("hashchange", route);
  route();
});
