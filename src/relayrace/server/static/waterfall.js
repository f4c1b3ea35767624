// A run's trace as a waterfall, the one both the Trace tab and History draw: one row per span
// (run, agents, model calls, tool calls with the delegations they made nested under them,
// handoffs), each bar inside a track as wide as the pane, under a time axis; selecting a span
// shows its detail (the request's messages, the response, the tools offered, a tool's
// arguments and result) and its raw JSON. Text only, never HTML.
"use strict";

function spanDetail(span) {
  const box = el("div", "span-detail");
  box.append(el("h3", "", `${span.kind} · ${span.name}`),
             el("div", "dim", `${span.agent} · starts at ${span.start_ms.toFixed(1)} ms · ` +
                              `${span.duration_ms.toFixed(1)} ms`));
  if (span.error) box.append(el("div", "failed", "error: " + span.error));
  const d = span.detail;
  const section = (title, text) => {
    box.append(el("h4", "", title), el("pre", "", text));
  };
  const said = (m) => `${m.name || m.role}: ${m.content || ""}` +
    (m.tool_calls || []).map((c) => `\n  ⚙ ${c.name}(${c.arguments})`).join("");
  if (span.kind === "model") {
    if (d.usage && d.usage.requests !== undefined) {
      section("usage", `${d.usage.input_tokens} in · ${d.usage.output_tokens} out · ` +
        `${d.usage.cached_tokens} cached · ${d.usage.reasoning_tokens} reasoning`);
    }
    section(`request: ${d.request.length} messages`, d.request.map(said).join("\n"));
    section("response", said(d.response));
    const tools = d.tools || [];
    box.append(el("h4", "", `tools offered: ${tools.length}`));
    const list = el("ul", "tools-offered");
    for (const t of tools) {
      const item = el("li");
      item.dataset.tool = t.name;
      item.append(el("code", "", t.name));
      if (t.approval) item.append(el("span", "gate", "needs approval"));
      item.append(el("span", "dim", " " + (t.description || "")));
      list.append(item);
    }
    box.append(list);
  } else if (span.kind === "tool") {
    section("arguments", d.arguments ?? "");
    section("result", d.result ?? "");
  } else if (span.kind === "delegation") {
    if (d.report) section("report", d.report.summary || JSON.stringify(d.report, null, 2));
    section("child session", d.child_session_id);
  } else if (span.kind === "handoff") {
    section(d.returns ? "returned" : "reason", d.reason || "");
  } else if (span.kind === "run") {
    section("status", d.status);
  }
  const raw = el("details", "raw");
  raw.append(el("summary", "", "Raw JSON"), el("pre", "", JSON.stringify(span, null, 2)));
  box.append(raw);
  return box;
}

function placeBar(bar, span, total) {  // start and width in % of the track, never past its end
  const width = Math.min(100, 100 * span.duration_ms / total);
  const start = Math.min(100 * span.start_ms / total, 100 - width);
  // A bar has 2px at least (an instant), and those 2px stay inside the track too.
  bar.style.left = `min(${Math.max(0, start)}%, calc(100% - 2px))`;
  bar.style.width = `${width}%`;
}

function timeAxis(total) {
  const row = el("div", "span-head");
  const track = el("div", "span-track axis-track");
  for (const part of [0, 0.25, 0.5, 0.75, 1]) {
    const tick = el("span", "tick", `${(total * part).toFixed(total < 10 ? 1 : 0)} ms`);
    tick.style.left = `${part * 100}%`;
    track.append(tick);
  }
  row.append(el("div", "span-label dim", "span"), track, el("div", "dim", "duration"));
  return row;
}

function renderWaterfall(spans, into) {
  const total = Math.max(1e-6, ...spans.map((s) => s.start_ms + s.duration_ms));
  const depth = {};
  const rows = el("div", "waterfall");
  rows.append(timeAxis(total));
  const detail = el("div", "span-detail-box");
  detail.append(el("div", "dim", "Select a span to see its detail."));
  for (const s of spans) {
    depth[s.span_id] = s.parent_id === null ? 0 : (depth[s.parent_id] ?? 0) + 1;
    const row = el("div", "span-row");
    row.dataset.kind = s.kind;
    row.dataset.span = s.span_id;
    row.tabIndex = 0;
    const label = el("div", "span-label", `${s.kind} ${s.name}`);
    label.style.paddingLeft = depth[s.span_id] * 0.9 + "rem";
    label.title = `${s.kind} ${s.name}`;
    const track = el("div", "span-track");
    const bar = el("div", `span-bar ${s.kind}${s.error ? " error" : ""}`);
    placeBar(bar, s, total);
    track.append(bar);
    const u = s.detail.usage;
    const tokens = s.kind === "model" && u && u.requests !== undefined
      ? ` · ${u.input_tokens}+${u.output_tokens} tok` : "";
    row.append(label, track, el("div", "dim", `${s.duration_ms.toFixed(1)} ms${tokens}`));
    const select = () => {
      rows.querySelectorAll(".span-row.selected").forEach((r) => r.classList.remove("selected"));
      row.classList.add("selected");
      detail.replaceChildren(spanDetail(s));
    };
    row.addEventListener("click", select);
    row.addEventListener("keydown", (event) => { if (event.key === "Enter") select(); });
    rows.append(row);
  }
  const layout = el("div", "trace-layout");
  layout.append(rows, detail);
  into.replaceChildren(layout);
}
