// The console's Usage tab: a session's requests, tokens (input, output, cached, reasoning),
// model time and cost, in all, per agent and per model (delegated children included), and a
// chart of tokens per run drawn as inline SVG. Text only, never HTML.
"use strict";

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function money(cost, value) {
  return `${value.toFixed(value < 0.01 ? 6 : 4)} ${cost.currency}`;
}

function usageTable(title, rows, cost) {
  const table = el("table", "usage-table");
  table.dataset.table = title;
  const head = el("tr");
  for (const h of [title, "requests", "input", "output", "cached", "reasoning", "model time",
                   ...(cost ? ["cost"] : [])]) head.append(el("th", "", h));
  table.append(head);
  for (const [name, u] of rows) {
    const tr = el("tr");
    tr.dataset.name = name;
    tr.append(el("td", "name", name), el("td", "", u.requests), el("td", "", u.input_tokens),
              el("td", "", u.output_tokens), el("td", "", u.cached_tokens),
              el("td", "", u.reasoning_tokens), el("td", "", `${(u.model_ms / 1000).toFixed(2)} s`));
    if (cost) {
      const value = cost.by_model[name];
      tr.append(el("td", "cost", value === undefined ? "no price" : money(cost, value)));
    }
    table.append(tr);
  }
  return table;
}

function tokenChart(runs) {  // tokens per run (turn): input and output stacked
  const width = 560, height = 150, pad = 28;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "token-chart",
                             role: "img", "aria-label": "Tokens per run" });
  const top = Math.max(1, ...runs.map((r) => r.usage.total.input_tokens + r.usage.total.output_tokens));
  const step = (width - pad * 2) / Math.max(1, runs.length);
  const scale = (height - pad * 1.6) / top;
  chart.append(svg("line", { x1: pad, y1: height - pad, x2: width - pad, y2: height - pad, class: "axis" }),
               svg("text", { x: pad, y: 12, class: "label" }, `${top} tokens`));
  runs.forEach((run, i) => {
    const x = pad + i * step + step * 0.15, w = step * 0.7;
    const input = run.usage.total.input_tokens * scale, output = run.usage.total.output_tokens * scale;
    const bar = svg("g", { class: "turn" });
    bar.dataset.run = String(run.number);
    bar.append(svg("rect", { x, y: height - pad - input, width: w, height: input, class: "input" }),
               svg("rect", { x, y: height - pad - input - output, width: w, height: output, class: "output" }),
               svg("text", { x: x + w / 2, y: height - pad + 14, class: "label", "text-anchor": "middle" },
                   `#${run.number}`),
               svg("title", {}, `run #${run.number}: ${run.usage.total.input_tokens} in, ` +
                   `${run.usage.total.output_tokens} out`));
    chart.append(bar);
  });
  return chart;
}

async function loadUsage(into) {
  const id = state.current;
  const data = await api(`/api/sessions/${encodeURIComponent(id)}/usage`);
  if (state.current !== id) return;
  const { usage } = data;
  const t = usage.total;
  const summary = el("div", "usage-summary");
  summary.append(el("span", "", `${t.requests} requests`),
                 el("span", "", `${t.input_tokens} input · ${t.output_tokens} output · ` +
                                `${t.cached_tokens} cached · ${t.reasoning_tokens} reasoning tokens`));
  const total = el("span", "total-cost", usage.cost ? money(usage.cost, usage.cost.total)
    : "no price table (relayrace serve --prices prices.yaml)");
  summary.append(total);
  if (usage.cost && usage.cost.unpriced.length) {
    summary.append(el("span", "failed", `no price for: ${usage.cost.unpriced.join(", ")}`));
  }
  into.replaceChildren(summary, el("h3", "", "Tokens per run"), tokenChart(data.runs),
    usageTable("agent", Object.entries(usage.by_agent), null),
    usageTable("model", Object.entries(usage.by_model), usage.cost));
  const perRun = el("table", "usage-table");
  perRun.dataset.table = "run";
  const head = el("tr");
  for (const h of ["run", "input", "requests", "tokens", "time", ...(usage.cost ? ["cost"] : [])]) head.append(el("th", "", h));
  perRun.append(head);
  for (const run of data.runs) {
    const tr = el("tr");
    const u = run.usage.total;
    tr.append(el("td", "", `#${run.number}`), el("td", "name", run.input ?? "(resumed)"),
              el("td", "", u.requests), el("td", "", u.input_tokens + u.output_tokens),
              el("td", "", `${run.duration_s.toFixed(2)} s`));
    if (usage.cost) tr.append(el("td", "cost", money(usage.cost, run.usage.cost.total)));
    perRun.append(tr);
  }
  into.append(perRun);
}

function installUsage() {
  const tab = el("button", "tab", "Usage");
  tab.id = "tab-usage";
  $("tab-trace").after(tab);
  const box = el("div");
  box.id = "usage";
  box.hidden = true;
  $("trace").after(box);
  const panes = ["conversation", "trace", "history"];
  tab.addEventListener("click", () => {
    for (const p of panes) { if ($(p)) $(p).hidden = true; }
    document.querySelectorAll(".title nav .tab").forEach((t) => t.classList.remove("active"));
    tab.classList.add("active");
    box.hidden = false;
    loadUsage(box).catch(showError);
  });
  for (const p of panes) {
    const other = $("tab-" + p);
    if (other) other.addEventListener("click", () => { box.hidden = true; tab.classList.remove("active"); });
  }
}

installUsage();
{
  const opened = openSession;  // a shown Usage tab follows the session (a run that ended)
  openSession = async function (id) {  // eslint-disable-line no-global-assign
    await opened(id);
    const box = $("usage");
    if (!box.hidden) await loadUsage(box);
  };
}
