// A run's trace as a waterfall: one row per span (run, agents, model calls, tool calls,
// handoffs, delegated children nested), bars placed by time; selecting a span shows its detail
// (the request's messages, the response, a tool's arguments and result). Text only, never HTML.
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
  return box;
}

function renderWaterfall(spans, into) {
  const total = Math.max(1e-6, ...spans.map((s) => s.start_ms + s.duration_ms));
  const depth = {};
  const rows = el("div", "waterfall");
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
    const track = el("div", "span-track");
    const bar = el("div", `span-bar ${s.kind}${s.error ? " error" : ""}`);
    bar.style.left = (100 * s.start_ms / total) + "%";
    bar.style.width = Math.max(0.4, 100 * s.duration_ms / total) + "%";
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
