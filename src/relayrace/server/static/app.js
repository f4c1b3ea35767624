// relayrace's web console: plain JavaScript against the server's /api, no build step.
// Everything the model or a tool wrote is put on the page as text (textContent), never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { key: localStorage.getItem("relayrace.key") || "", current: null,
                follow: null, agents: [], teams: [], members: [], usage: null,
                loaded: null };

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function headers(extra) {
  const h = Object.assign({ "Content-Type": "application/json" }, extra || {});
  if (state.key) h["Authorization"] = "Bearer " + state.key;
  return h;
}

async function api(path, options) {
  const response = await fetch(path, Object.assign({ headers: headers() }, options || {}));
  const body = response.headers.get("content-type")?.includes("json") ? await response.json()
    : await response.text();
  if (!response.ok) {
    const message = body && body.error ? body.error.message : String(body);
    throw new Error(`${response.status}: ${message}`);
  }
  return body;
}

function showError(error) {
  const box = $("error");
  box.hidden = !error;
  box.textContent = error ? String(error.message || error) : "";
}

// -- the session list ------------------------------------------------------------------------

function agentOptions(select, names, first) {  // first: an option for "none chosen", or none
  select.replaceChildren(...(first ? [Object.assign(el("option", "", first), { value: "" })] : []),
    ...names.map((name) => Object.assign(el("option", "", name), { value: name })));
}

async function loadAgents() {
  const [{ agents }, { teams }] = await Promise.all([api("/api/agents"), api("/api/graph")]);
  state.agents = agents;
  state.teams = teams;
  // Every agent of the served teams, the served ones first: a run may start with any of them.
  const members = new Set(agents.map((a) => a.name));
  for (const team of teams) {
    for (const n of team.nodes) if (n.kind === "agent") members.add(n.name);
  }
  state.members = [...members];
  $("agents").textContent = agents.map((a) => a.name).join(" · ");
  agentOptions($("agent-select"), agents.map((a) => a.name));
}

function when(seconds) {  // a time as the list shows it: today's by the clock, others by date
  const at = new Date(seconds * 1000);
  const today = new Date().toDateString() === at.toDateString();
  return today ? at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : at.toLocaleDateString([], { month: "short", day: "numeric" }) + " " +
      at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

const PAGE = 100;  // sessions per request: the server pages and searches, the page never loads all

function sessionRow(s) {
  const item = el("li", s.session_id === state.current ? "current" : "");
  item.dataset.session = s.session_id;
  const head = el("div", "head");
  const time = el("span", "when", when(s.updated_at || s.created_at));
  time.title = new Date((s.updated_at || s.created_at) * 1000).toLocaleString();
  head.append(el("span", "row-title", s.title || "(no messages yet)"), time);
  const meta = el("div", "meta");
  meta.append(el("strong", "", s.active_agent), el("span", "badge " + s.status, s.status),
              el("span", "dim", `${s.usage.total_tokens} tokens`),
              el("span", "dim id", s.session_id));
  if (s.forked_from) meta.append(el("span", "fork-mark", "fork"));
  item.append(head, meta);
  if (s.last_message && s.last_message !== s.title) item.append(el("div", "last", s.last_message));
  item.addEventListener("click", () => openSession(s.session_id));
  return item;
}

async function loadSessions(offset = 0) {
  const q = $("search").value.trim();
  const { sessions } = await api(`/api/sessions?limit=${PAGE}&offset=${offset}` +
                                 (q ? "&q=" + encodeURIComponent(q) : ""));
  const list = $("sessions");
  const rows = sessions.map(sessionRow);
  if (sessions.length === PAGE) {  // perhaps more: the next page on demand
    const more = el("li", "more", "More sessions…");
    more.addEventListener("click", () => { more.remove(); loadSessions(offset + PAGE).catch(showError); });
    rows.push(more);
  }
  if (offset) list.append(...rows);
  else list.replaceChildren(...rows);
}

// -- one session -----------------------------------------------------------------------------

function renderReport(report) {
  const box = el("div", "report");
  box.append(el("div", "", "Report: " + (report.summary || "")));
  if (report.key_findings && report.key_findings.length) {
    const ul = el("ul");
    report.key_findings.forEach((f) => ul.append(el("li", "", f)));
    box.append(ul);
  }
  if (report.confidence && report.confidence !== "unknown") {
    box.append(el("div", "dim", `confidence: ${report.confidence} ${report.confidence_reason || ""}`));
  }
  return box;
}

function renderEvents(events, into) {
  const calls = {};
  for (const e of events) {
    if (e.kind === "message") {
      const m = e.message;
      if (m.role === "user" || (m.role === "assistant" && m.content)) {
        const bubble = el("div", "msg " + m.role);
        bubble.dataset.kind = "message";
        bubble.append(el("span", "who", m.role === "user" ? "user" : (m.name || e.agent)),
                      document.createTextNode(m.content));
        into.append(bubble);
      }
      for (const call of m.tool_calls || []) {
        const row = el("div", "tool");
        row.dataset.kind = "tool";
        row.append(el("div", "", `⚙ ${call.name}(${call.arguments})`));
        calls[call.id] = row;
        into.append(row);
      }
    } else if (e.kind === "tool_result") {
      const row = calls[e.message.tool_call_id] || into.appendChild(el("div", "tool"));
      if (e.is_error) row.classList.add("error");
      row.append(el("div", "result", "→ " + e.message.content));
    } else if (e.kind === "handoff") {
      const marker = el("div", "handoff",
        `↪ ${e.agent} ${e.is_return ? "returned control to" : "→"} ${e.to_agent}` +
        (e.reason ? ` — ${e.reason}` : ""));
      marker.dataset.kind = "handoff";
      into.append(marker);
    } else if (e.kind === "delegation") {
      const box = el("details", "delegation");
      box.dataset.kind = "delegation";
      box.dataset.session = e.child_session_id;
      box.append(el("summary", e.ok ? "" : "failed",
        `⇢ ${e.agent} delegated to ${e.child_agent}: ${e.ok ? "ok" : "failed " + (e.error || "")}`));
      if (e.report) box.append(renderReport(e.report));
      const child = el("div", "child");
      box.append(child);
      box.addEventListener("toggle", async () => {
        if (!box.open || child.dataset.loaded) return;
        child.dataset.loaded = "1";
        try {
          const data = await api("/api/sessions/" + encodeURIComponent(e.child_session_id));
          renderEvents(data.events, child);
        } catch (error) { child.append(el("div", "error", error.message)); }
      });
      into.append(box);
    } else if (e.kind === "guardrail") {
      const g = el("div", "guardrail", `⛨ guardrail ${e.guardrail} (${e.stage}) ${e.action}` +
        (e.message ? `: ${e.message}` : ""));
      g.dataset.kind = "guardrail";
      into.append(g);
    } else if (e.kind === "approval_requested") {
      into.append(el("div", "dim", `⏸ approval requested: ${e.tool_name}(${e.arguments})`));
    } else if (e.kind === "approval_decided") {
      const d = el("div", "decided " + (e.approved ? "approved" : "rejected"), decidedText(e));
      d.dataset.kind = "decided";
      into.append(d);
    } else if (e.kind === "question_asked") {
      into.append(el("div", "dim", `⏸ question: ${e.question}`));
    } else if (e.kind === "human_takeover") {
      const held = el("div", "handoff", `${e.agent} (a person) holds the conversation`);
      held.dataset.kind = "takeover";
      into.append(held);
    } else if (e.kind === "run_finished" && e.status === "failed") {
      into.append(el("div", "failed", "✗ the run failed: " + e.output));
    }
  }
}

function decidedText(e) {  // who decided a call, and when
  return `${e.approved ? "✔ approved" : "✗ rejected"} ${e.tool_name} by ` +
    `${e.decided_by || "someone unnamed"} at ${new Date(e.time * 1000).toLocaleString()}`;
}

function showUsage() {
  const u = state.usage;
  $("session-usage").textContent = `${u.requests} requests · ${u.total_tokens} tokens`;
}

function countUsage(event) {  // a streamed event's usage, as the session's summary counts it
  const used = event.usage;
  if (!used || event.path.includes("/") || !["message", "delegation"].includes(event.kind)) return;
  state.usage.requests += used.requests;
  state.usage.total_tokens += used.input_tokens + used.output_tokens;
  showUsage();
}

async function openSession(id) {
  state.current = id;
  showError(null);
  const data = await api("/api/sessions/" + encodeURIComponent(id));
  $("home").hidden = true;
  $("session").hidden = false;
  $("session-title").textContent = `${data.active_agent} · ${id}`;
  const badge = $("session-status");
  badge.textContent = data.status;
  badge.className = "badge " + data.status;
  state.usage = { requests: data.usage.requests, total_tokens: data.usage.total_tokens };
  showUsage();
  const conversation = $("conversation");
  conversation.replaceChildren();
  renderEvents(data.events, conversation);
  conversation.scrollTop = conversation.scrollHeight;
  for (const li of $("sessions").children) li.classList.toggle("current", li.dataset.session === id);
  await loadPending();
  if (!$("trace").hidden) await loadTrace();
  if (data.run_id && state.follow !== data.run_id) follow(data.run_id);
}

async function loadPending() {
  const box = $("pending");
  const { approvals, questions, takeover } = await api(`/api/sessions/${encodeURIComponent(state.current)}/pending`);
  box.replaceChildren();
  box.hidden = !approvals.length && !questions.length && !takeover;
  if (takeover) box.append(takeoverItem(takeover));
  for (const a of approvals) {
    const item = el("div", "item");
    item.dataset.kind = "approval";
    item.append(el("span", "", "Approve "), el("code", "", `${a.tool}(${a.arguments})`),
                el("span", "dim", `by ${a.path}`));
    const yes = el("button", "", "Approve");
    const no = el("button", "", "Reject");
    yes.addEventListener("click", () => decide({ approvals: { [a.call_id]: true } }));
    no.addEventListener("click", () => decide({ approvals: { [a.call_id]: false } }));
    item.append(yes, no);
    box.append(item);
  }
  for (const q of questions) {
    const item = el("div", "item");
    item.dataset.kind = "question";
    item.append(el("span", "", q.question));
    const answer = el("input");
    answer.placeholder = q.choices ? q.choices.join(" / ") : "Your answer";
    const send = el("button", "", "Answer");
    send.addEventListener("click", () => decide({ answers: { [q.id]: answer.value } }));
    item.append(answer, send);
    box.append(item);
  }
}

// A person holds the conversation: they reply as that agent, or hand it back.
function takeoverItem(t) {
  const item = el("div", "item");
  item.dataset.kind = "takeover";
  item.append(el("span", "", `Reply as ${t.agent}`));
  const reply = el("input");
  reply.placeholder = "Your reply to the user";
  const send = el("button", "", "Reply");
  send.addEventListener("click", () => decide({ reply: reply.value }));
  item.append(reply, send);
  if (t.from_agent) {
    const back = el("button", "", `Hand back to ${t.from_agent}`);
    back.addEventListener("click", () =>
      decide(reply.value ? { reply: reply.value, hand_back: true } : { hand_back: true }));
    item.append(back);
  }
  return item;
}

async function decide(body) {
  try {
    const run = await api(`/api/sessions/${encodeURIComponent(state.current)}/pending`,
      { method: "POST", body: JSON.stringify(Object.assign({ background: true }, body)) });
    $("pending").hidden = true;
    follow(run.run_id);
  } catch (error) { showError(error); }
}

// -- live runs -------------------------------------------------------------------------------

async function follow(runId) {
  state.follow = runId;
  const session = state.current;
  const badge = $("session-status");
  badge.textContent = "running";
  badge.className = "badge running";
  const live = el("div", "msg assistant live");
  live.dataset.kind = "live";
  const events = [];
  let lastId = 0;
  for (let attempt = 0; attempt < 5 && state.follow === runId; attempt++) {
    try {
      const response = await fetch(`/api/runs/${runId}/events`,
        { headers: headers(lastId ? { "Last-Event-ID": String(lastId) } : {}) });
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const id = /^id: (\d+)$/m.exec(block);
          const data = /^data: (.*)$/m.exec(block);
          if (!data) continue;
          if (id) lastId = Number(id[1]);
          const event = JSON.parse(data[1]);
          if (event.kind === "run_end") {
            if (state.current === session) await openSession(session);
            await loadSessions();
            state.follow = null;
            return;
          }
          if (state.current !== session) continue;
          countUsage(event);
          if (event.kind === "text_delta" && !event.path.includes("/")) {
            if (!live.isConnected) $("conversation").append(live);
            live.textContent += event.delta;
          } else if (event.kind !== "text_delta" && event.kind !== "output") {
            events.push(event);
            const holder = el("div", "");
            renderEvents([event], holder);
            if (holder.childNodes.length) $("conversation").append(...holder.childNodes);
          }
          $("conversation").scrollTop = $("conversation").scrollHeight;
        }
      }
    } catch (error) {
      await new Promise((done) => setTimeout(done, 500));  // reconnect with Last-Event-ID
    }
  }
}

async function send(event) {
  event.preventDefault();
  const text = $("input").value.trim();
  if (!text || !state.current) return;
  $("input").value = "";
  try {
    const run = await api(`/api/sessions/${encodeURIComponent(state.current)}/runs`,
      { method: "POST", body: JSON.stringify({ input: text, background: true }) });
    follow(run.run_id);
  } catch (error) { showError(error); }
}

// -- the trace of the last run ----------------------------------------------------------------

async function loadTrace() {  // the same waterfall as History's, of the session's last run
  const box = $("trace");
  const id = encodeURIComponent(state.current);
  const { runs } = await api(`/api/sessions/${id}/runs`);
  if (!runs.length) {
    box.replaceChildren(el("div", "dim", "No run yet: send a message."));
    return;
  }
  const { spans } = await api(`/api/sessions/${id}/runs/${runs.length}/trace`);
  const holder = el("div");
  box.replaceChildren(el("div", "dim trace-of",
    `Run #${runs.length} of ${runs.length}: ${runs[runs.length - 1].input ?? "(resumed)"}`), holder);
  renderWaterfall(spans, holder);
}

function showTab(name) {
  $("conversation").hidden = name !== "conversation";
  $("trace").hidden = name !== "trace";
  $("tab-conversation").classList.toggle("active", name === "conversation");
  $("tab-trace").classList.toggle("active", name === "trace");
  if (name === "trace") loadTrace().catch(showError);
}

// -- start -----------------------------------------------------------------------------------

async function start() {
  $("key").value = state.key;
  $("key").addEventListener("change", () => {
    state.key = $("key").value.trim();
    localStorage.setItem("relayrace.key", state.key);
    start();
  });
  try {
    state.loaded = Promise.all([loadAgents(), loadSessions()]);  // neither waits for the other
    await state.loaded;
    showError(null);
  } catch (error) { showError(error); }
}

$("search").addEventListener("input", () => loadSessions(0).catch(showError));
$("new-session").addEventListener("click", async () => {
  try {
    const made = await api("/api/sessions", { method: "POST",
      body: JSON.stringify({ agent: $("agent-select").value || null }) });
    await loadSessions();  // listed before its first run
    await openSession(made.session_id);
    $("input").focus();
  } catch (error) { showError(error); }
});
$("composer").addEventListener("submit", send);
$("input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) send(event);
});
$("tab-conversation").addEventListener("click", () => showTab("conversation"));
$("tab-trace").addEventListener("click", () => showTab("trace"));
start();
