// The console's Graph tab: every served team drawn as a graph (agents with the model each runs
// on, people, handoffs with their transfer policy, delegations, routing rules with conditions,
// workflows as groups, tools that wait for approval, remote A2A agents and MCP toolsets
// marked), from /api/graph (the data of `relayrace graph`). A run's
// path is numbered on it; while a run streams (the session's SSE stream), the active agent and
// the edges taken so far light up. Names are put on the page as text, never as HTML.
"use strict";

const graphView = { box: null, tab: null, teams: null, live: null };
const NODE_W = 170, NODE_H = 46, ROW = 72, PAD = 30;
const BACKWARD = new Set(["back", "return", "peer"]);
const LABEL_FONT = "10px system-ui, sans-serif";  // .edge-label's font, for measuring
const LABEL_MAX = 260;  // a longer label is cut with an ellipsis (the whole is its tooltip)
let measurer = null;

function textWidth(text) {
  measurer = measurer || document.createElement("canvas").getContext("2d");
  measurer.font = LABEL_FONT;
  return measurer.measureText(text).width;
}

function fitted(text) {
  if (textWidth(text) <= LABEL_MAX) return text;
  let cut = text;
  while (cut.length > 1 && textWidth(cut + "…") > LABEL_MAX) cut = cut.slice(0, -1);
  return cut + "…";
}

function columnWidth(team) {  // room between columns for the widest forward edge's label
  const widths = team.edges.filter((e) => !BACKWARD.has(e.kind))
    .map((e) => textWidth(fitted(edgeLabel(e))));
  return NODE_W + Math.max(80, 40 + Math.max(0, ...widths));
}

function layout(team) {
  const COL = columnWidth(team);
  const layer = { [team.agent]: 0 };
  const queue = [team.agent];
  while (queue.length) {
    const name = queue.shift();
    for (const e of team.edges) {
      if (e.source === name && !BACKWARD.has(e.kind) && layer[e.target] === undefined) {
        layer[e.target] = layer[name] + 1;
        queue.push(e.target);
      }
    }
  }
  const rows = {};
  const pos = {};
  for (const n of team.nodes) {
    const x = layer[n.name] ?? 0;
    rows[x] = (rows[x] || 0) + 1;
    pos[n.name] = { x: PAD + x * COL, y: PAD + (rows[x] - 1) * ROW };
  }
  return pos;
}

function edgePath(a, b) {
  const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2;
  if (x2 > x1) {
    const mid = (x1 + x2) / 2;
    // The label ends just before the target's arrow, above the edge's last stretch, where
    // edges from one source have fanned apart (the columns leave it room).
    return { d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`, lx: x2 - 12, ly: y2 - 6,
             anchor: "end" };
  }
  // Backward (transfer back, return, peer): a curve below the nodes, from bottom to bottom.
  const sx = a.x + NODE_W / 2, sy = a.y + NODE_H, tx = b.x + NODE_W / 2, ty = b.y + NODE_H;
  const low = Math.max(sy, ty) + 34;
  return { d: `M${sx},${sy} C${sx},${low} ${tx},${low} ${tx},${ty}`, lx: (sx + tx) / 2, ly: low - 6,
           anchor: "middle" };
}

function edgeLabel(e) {
  const names = { handoff: "transfer", back: "transfer back", peer: "transfer (peer)",
                  return: "returns", delegation: "delegates", specialist: "delegates (meta-tool)",
                  member: "member", route: "route", step: "step", tool: "uses", swarm: "swarm" };
  return e.label ? `${names[e.kind] || e.kind}: ${e.label}` : (names[e.kind] || e.kind);
}

function nodeDetail(n) {  // the node's second line, cut to the node's width
  const text = (n.remote === "a2a" ? "remote A2A · " : n.remote === "mcp" ? "MCP · " : "") +
    (n.approval ? "tool · needs approval" : n.detail);
  if (textWidth(text) <= NODE_W - 20) return text;
  let cut = text;
  while (cut.length > 1 && textWidth(cut + "…") > NODE_W - 20) cut = cut.slice(0, -1);
  return cut + "…";
}

function drawTeam(team) {
  const pos = layout(team);
  const width = Math.max(...Object.values(pos).map((p) => p.x)) + NODE_W + PAD;
  const height = Math.max(...Object.values(pos).map((p) => p.y)) + NODE_H + PAD + 50;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "team-graph" });
  chart.dataset.team = team.agent;
  const defs = svg("defs", {});
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
                                 markerWidth: 9, markerHeight: 9, markerUnits: "userSpaceOnUse",
                                 orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }));
  defs.append(marker);
  chart.append(defs);
  for (const n of team.nodes.filter((n) => n.kind === "workflow")) {  // workflows as groups
    const members = team.edges.filter((e) => e.source === n.name && (e.kind === "step" || e.kind === "member"))
      .map((e) => pos[e.target]).filter(Boolean);
    if (!members.length) continue;
    const p = pos[n.name];
    const xs = [p.x, ...members.map((m) => m.x)], ys = [p.y, ...members.map((m) => m.y)];
    const group = svg("rect", { x: Math.min(...xs) - 12, y: Math.min(...ys) - 12, rx: 10,
      width: Math.max(...xs) - Math.min(...xs) + NODE_W + 24,
      height: Math.max(...ys) - Math.min(...ys) + NODE_H + 24, class: "group" });
    group.dataset.workflow = n.name;
    chart.append(group);
  }
  const labels = svg("g", { class: "edge-labels" });  // drawn over the nodes, never under
  team.edges.forEach((e, i) => {
    const a = pos[e.source], b = pos[e.target];
    if (!a || !b) return;
    const { d, lx, ly, anchor } = edgePath(a, b);
    const g = svg("g", { class: `edge ${e.kind}` });
    Object.assign(g.dataset, { source: e.source, target: e.target, kind: e.kind, index: String(i) });
    const whole = edgeLabel(e);
    const label = svg("text", { x: lx, y: ly, "text-anchor": anchor, class: "edge-label" }, fitted(whole));
    label.dataset.index = String(i);
    if (label.textContent !== whole) label.dataset.full = whole;
    g.append(svg("title", {}, whole), svg("path", { d, "marker-end": "url(#arrow)" }));
    labels.append(label);
    chart.append(g);
  });
  for (const n of team.nodes) {
    const p = pos[n.name];
    const marks = (n.remote ? " remote-" + n.remote : "") + (n.human ? " human" : "") +
      (n.approval ? " gated" : "");
    const g = svg("g", { class: `node ${n.kind}${marks}`, transform: `translate(${p.x},${p.y})` });
    g.dataset.name = n.name;
    g.dataset.kind = n.human ? "human" : n.kind;
    if (n.model) g.dataset.model = n.model;
    const detail = svg("text", { x: 10, y: 36, class: "node-detail" }, nodeDetail(n));
    g.append(svg("title", {}, `${n.name}: ${n.detail}${n.approval ? " (each call waits for a person's approval)" : ""}`),
             svg("rect", { width: NODE_W, height: NODE_H, rx: n.kind === "agent" ? (n.human ? 22 : 8) : 3 }),
             svg("text", { x: 10, y: 19, class: "node-name" }, n.label || n.name),
             detail);
    chart.append(g);
  }
  chart.append(labels);
  return chart;
}

function pathSteps(events) {  // the agents a run went through: [from, to] per step, in order
  const steps = [];
  for (const e of events) {
    if (e.kind === "handoff") steps.push([e.agent, e.to_agent]);
    else if (e.kind === "delegation") steps.push([e.agent, e.child_agent]);
  }
  return steps;
}

function markPath(chart, first, steps, live) {
  chart.querySelectorAll(".taken, .active").forEach((x) => x.classList.remove("taken", "active"));
  chart.querySelectorAll(".step-no").forEach((x) => x.remove());
  const numbered = new Map();  // label -> the badges already put before it
  let active = first;
  steps.forEach(([from, to], i) => {
    const edge = [...chart.querySelectorAll("g.edge")].find((g) =>
      g.dataset.source === from && g.dataset.target === to && g.dataset.kind !== "tool");
    if (edge) {
      edge.classList.add("taken");
      // The number, in a badge on the label's line just before it (a second pass over the
      // same edge goes before the first): never over the label's text.
      const label = chart.querySelector(`.edge-label[data-index="${edge.dataset.index}"]`);
      label.classList.add("taken");
      const width = label.getComputedTextLength();
      const end = Number(label.getAttribute("x"));
      const start = label.getAttribute("text-anchor") === "end" ? end - width : end - width / 2;
      const before = numbered.get(label) || 0;
      numbered.set(label, before + 1);
      const badge = svg("g", { class: "step-no",
                               transform: `translate(${start - 11 - before * 20},${Number(label.getAttribute("y")) - 3.5})` });
      badge.append(svg("circle", { r: 8 }), svg("text", { "text-anchor": "middle", y: 4 }, String(i + 1)));
      edge.append(badge);
    }
    active = to;
  });
  const node = [...chart.querySelectorAll("g.node")].find((g) => g.dataset.name === active);
  if (node && live) node.classList.add("active");
  for (const g of chart.querySelectorAll("g.node")) {
    if (g.dataset.name === first || steps.some(([f, t]) => f === g.dataset.name || t === g.dataset.name)) {
      g.classList.add("taken");
    }
  }
}

async function followLive(chart, first, steps) {  // the session's run, as it streams
  const session = state.current;
  const mine = {};
  graphView.live = mine;
  const response = await fetch(`/api/sessions/${encodeURIComponent(session)}/stream`, { headers: headers() });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  markPath(chart, first, steps, true);
  for (;;) {
    const { value, done } = await reader.read();
    if (done || graphView.live !== mine) { reader.cancel(); return; }
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const data = /^data: (.*)$/m.exec(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
      if (!data) continue;
      const event = JSON.parse(data[1]);
      if (event.kind === "run_end" || event.kind === "idle") { reader.cancel(); markPath(chart, first, steps, false); return; }
      if (event.kind === "run_started" && !event.path.includes("/")) {
        first = event.agent;
        steps.length = 0;
        markPath(chart, first, steps, true);
      } else if ((event.kind === "handoff" || event.kind === "delegation") && !event.path.includes("/")) {
        steps.push(...pathSteps([event]));
        markPath(chart, first, steps, true);
      }
    }
  }
}

async function loadGraph() {
  const box = graphView.box;
  const id = state.current;
  if (!graphView.teams) graphView.teams = state.teams.length ? state.teams : (await api("/api/graph")).teams;
  const [session, { runs }] = await Promise.all([
    api(`/api/sessions/${encodeURIComponent(id)}`), api(`/api/sessions/${encodeURIComponent(id)}/runs`)]);
  if (state.current !== id) return;
  const picker = el("select", "run-picker");
  runs.forEach((r, i) => picker.append(Object.assign(el("option", "", `run #${i + 1}: ${r.input ?? "(resumed)"}`), { value: String(i) })));
  picker.value = String(runs.length - 1);
  const legend = el("div", "graph-legend dim",
    "Solid: transfer · dashed: transfer back / returns · dotted: peer · green: delegates · " +
    "green, round: a person · orange: a tool whose calls wait for approval · " +
    "numbers: the run's path in order");
  const charts = el("div", "graphs");
  box.replaceChildren(el("div", "row"), legend, charts);
  box.firstChild.append(el("span", "", "Path of "), picker);
  let chart = null;
  for (const team of graphView.teams) {
    const drawn = drawTeam(team);
    const holder = el("div", "team");
    holder.append(el("h3", "", `team of ${team.agent}`), drawn);
    charts.append(holder);
    if (team.nodes.some((n) => n.name === session.agent) && !chart) chart = drawn;
  }
  const show = () => {
    const run = runs[Number(picker.value)];
    if (chart && session.status === "running" && Number(picker.value) >= runs.length - 1) {
      // The stream replays the live run from its start, then follows it.
      followLive(chart, session.active_agent, []).catch(showError);
      return;
    }
    if (!chart || !run) return;
    const events = session.events.slice(run.first_seq - 1, run.last_seq);
    const steps = pathSteps(events.filter((e) => !e.path.includes("/")));
    const first = run.agents[0];
    graphView.live = null;
    markPath(chart, first, steps, false);
  };
  picker.addEventListener("change", show);
  show();
}

function installGraph() {
  graphView.tab = el("button", "tab", "Graph");
  graphView.tab.id = "tab-graph";
  $("tab-conversation").parentNode.append(graphView.tab);
  graphView.box = el("div");
  graphView.box.id = "graph";
  graphView.box.hidden = true;
  $("trace").after(graphView.box);
  const panes = ["conversation", "trace", "history", "usage"];
  graphView.tab.addEventListener("click", () => {
    for (const p of panes) { if ($(p)) $(p).hidden = true; }
    document.querySelectorAll(".title nav .tab").forEach((t) => t.classList.remove("active"));
    graphView.tab.classList.add("active");
    graphView.box.hidden = false;
    loadGraph().catch(showError);
  });
  for (const p of panes) {
    const other = $("tab-" + p);
    if (other) other.addEventListener("click", () => {
      graphView.box.hidden = true;
      graphView.live = null;
      graphView.tab.classList.remove("active");
    });
  }
}

function followGraph() {  // a shown graph follows the session: a run started, a run ended
  const opened = openSession;
  openSession = async function (id) {  // eslint-disable-line no-global-assign
    await opened(id);
    if (!graphView.box.hidden) await loadGraph();
  };
  const followed = follow;
  follow = function (runId) {  // eslint-disable-line no-global-assign
    const done = followed(runId);
    if (!graphView.box.hidden) loadGraph().catch(showError);
    return done;
  };
}

installGraph();
followGraph();
