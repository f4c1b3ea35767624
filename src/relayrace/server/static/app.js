// relayrace's web console: plain JavaScript against the server's /api, no build step.
// Everything the model or a tool wrote is put on the page as text (textContent), never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { key: localStorage.getItem("relayrace.key") || "", current: null, run: null,
                follow: null, agents: [] };

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

async function loadAgents() {
  const { agents } = await api("/api/agents");
  state.agents = agents;
  $("agents").textContent = agents.map((a) => a.name).join(" · ");
  const select = $("agent-select");
  select.replaceChildren(...agents.map((a) => { const o = el("option", "", a.name); o.value = a.name; return o; }));
}

const PAGE = 100;  // sessions per request: the server pages and searches, the page never loads all

function sessionRow(s) {
  const item = el("li", s.session_id === state.current ? "current" : "");
  item.dataset.session = s.session_id;
  const meta = el("div", "meta");
  meta.append(el("strong", "", s.active_agent), el("span", "badge " + s.status, s.status),
              el("span", "dim", `${s.usage.total_tokens} tokens`),
              el("span", "dim", s.session_id));
  if (s.forked_from) meta.append(el("span", "fork-mark", "fork"));
  item.append(meta, el("div", "last", s.last_message || "(no messages yet)"));
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

async function openSession(id) {
  state.current = id;
  showError(null);
  const data = await api("/api/sessions/" + encodeURIComponent(id));
  $("empty").hidden = true;
  $("session").hidden = false;
  $("session-title").textContent = `${data.active_agent} · ${id}`;
  const badge = $("session-status");
  badge.textContent = data.status;
  badge.className = "badge " + data.status;
  $("session-usage").textContent =
    `${data.usage.requests} requests · ${data.usage.total_tokens} tokens`;
  const conversation = $("conversation");
  conversation.replaceChildren();
  renderEvents(data.events, conversation);
  conversation.scrollTop = conversation.scrollHeight;
  const runs = data.runs || [];
  state.run = data.run_id || (runs.length ? runs[runs.length - 1].run_id : null);
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
  state.run = runId;
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

// -- the trace waterfall ---------------------------------------------------------------------

async function loadTrace() {
  const box = $("trace");
  box.replaceChildren();
  if (!state.run) {
    box.append(el("div", "dim", "No run of this session is known to the server yet: send a message."));
    return;
  }
  const { spans } = await api(`/api/runs/${state.run}/trace`);
  const total = Math.max(1e-6, ...spans.map((s) => s.start_ms + s.duration_ms));
  const depth = {};
  for (const s of spans) {
    depth[s.span_id] = s.parent_id === null ? 0 : (depth[s.parent_id] ?? 0) + 1;
    const row = el("div", "span-row");
    row.dataset.kind = s.kind;
    const label = el("div", "span-label", `${"  ".repeat(depth[s.span_id])}${s.kind} ${s.name}`);
    label.style.paddingLeft = depth[s.span_id] * 0.8 + "rem";
    const track = el("div", "span-track");
    const bar = el("div", `span-bar ${s.kind}${s.error ? " error" : ""}`);
    bar.style.left = (100 * s.start_ms / total) + "%";
    bar.style.width = Math.max(0.4, 100 * s.duration_ms / total) + "%";
    bar.title = s.error || "";
    track.append(bar);
    const tokens = s.attributes.input_tokens !== undefined
      ? ` · ${s.attributes.input_tokens}+${s.attributes.output_tokens} tok` : "";
    row.append(label, track, el("div", "dim", `${s.duration_ms.toFixed(1)} ms${tokens}`));
    box.append(row);
  }
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
    await Promise.all([loadAgents(), loadSessions()]);  // neither waits for the other
    showError(null);
  } catch (error) { showError(error); }
}

$("search").addEventListener("input", () => loadSessions(0).catch(showError));
$("new-session").addEventListener("click", async () => {
  try {
    const made = await api("/api/sessions", { method: "POST",
      body: JSON.stringify({ agent: $("agent-select").value || null }) });
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
