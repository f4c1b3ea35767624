// The console's History tab: every run of a session (input, status, agent path, tokens, time),
// each run's events, who decided its approvals, the session's forks, and one "Fork from here"
// per run (time travel: a new session with the log up to the event picked in that run, its
// context shown and editable, run on with a next message at any agent of the team).
// Loaded after app.js, whose helpers (el, api, openSession, follow, showError) it uses.
// Everything from the log is put on the page as text (textContent), never as HTML.
"use strict";

const workbench = { events: [], tab: null, box: null };

function eventSummary(e) {
  switch (e.kind) {
    case "message": {
      const m = e.message;
      const calls = (m.tool_calls || []).map((c) => `${c.name}(${c.arguments})`).join(", ");
      return `${m.role === "user" ? "user" : (m.name || e.agent)}: ${m.content || ""}` +
        (calls ? ` ⚙ ${calls}` : "");
    }
    case "tool_result": return `→ ${e.message.content}`;
    case "handoff": return `${e.agent} ${e.is_return ? "returned to" : "→"} ${e.to_agent}`;
    case "delegation": return `${e.agent} delegated to ${e.child_agent}`;
    case "run_started": return `run started: ${e.agent}`;
    case "run_finished": return `run ${e.status}`;
    case "approval_requested": return `approval requested: ${e.tool_name}(${e.arguments})`;
    case "approval_decided": return decidedText(e);
    case "question_asked": return `question: ${e.question}`;
    default: return e.agent || "";
  }
}

function nextUserMessage(seq) {  // the origin's next user message after event `seq`, if any
  for (const e of workbench.events.slice(seq)) {
    if (e.kind === "message" && e.message.role === "user" && !e.path.includes("/")) {
      return e.message.content;
    }
  }
  return "";
}

function contextAt(seq) {  // what a fork at `seq` carries: its messages, and the agent active
  let active = null;
  const messages = [];
  workbench.events.slice(0, seq).forEach((e, i) => {
    if (e.path.includes("/")) return;
    if (e.kind === "run_started") active = e.agent;
    else if (e.kind === "handoff") active = e.to_agent;
    else if ((e.kind === "message" || e.kind === "tool_result") && e.message.role !== "system") {
      messages.push({ seq: i + 1, event: e });
    }
  });
  return { active, messages };
}

const CONTEXT_SHOWN = 12;  // of the messages a fork carries, the most recent shown to edit

function contextEditor(seq, edits) {  // the run context of a fork at `seq`, each message editable
  const box = el("div", "fork-context");
  const { active, messages } = contextAt(seq);
  box.append(el("div", "dim", `Run context at event ${seq}: ${messages.length} messages; ` +
                              `active agent ${active || "(none)"}. Edit any message below.`));
  for (const { seq: at, event } of messages.slice(-CONTEXT_SHOWN)) {
    const m = event.message;
    const row = el("label", "context-message");
    row.dataset.seq = String(at);
    const who = event.kind === "tool_result" ? `${event.tool_name || "tool"} result`
      : m.role === "user" ? "user" : (m.name || event.agent);
    const text = el("textarea");
    text.rows = 1;
    text.value = m.content || "";
    text.dataset.seq = String(at);
    text.addEventListener("input", () => {
      if (text.value === (m.content || "")) delete edits[at];
      else edits[at] = text.value;
    });
    row.append(el("span", "who", `#${at} ${who}`), text);
    box.append(row);
  }
  return { box, active };
}

function forkForm(run, into, chosen) {  // one run's fork: at the event chosen in its list
  document.querySelectorAll("#history .fork-form").forEach((f) => f.remove());
  const form = el("form", "fork-form");
  const point = el("select");
  point.name = "at";
  for (let seq = run.first_seq; seq <= run.last_seq; seq++) {
    const option = el("option", "", `event ${seq}: ${eventSummary(workbench.events[seq - 1]).slice(0, 90)}`);
    option.value = String(seq);
    point.append(option);
  }
  point.value = String(chosen);
  const head = el("div", "row");
  head.append(el("span", "", "Fork: a new session with this session's events up to "), point);
  const holder = el("div");
  const message = el("textarea");
  message.rows = 2;
  message.name = "message";
  message.placeholder = "The next user message (empty: fork only)";
  const agent = el("select");
  agent.name = "agent";
  let edits = {};
  const showContext = () => {
    const seq = Number(point.value);
    edits = {};
    const { box, active } = contextEditor(seq, edits);
    holder.replaceChildren(box);
    form.dataset.seq = String(seq);
    message.value = nextUserMessage(seq);
    agentOptions(agent, state.members, `(the active agent: ${active || "the session's"})`);
  };
  point.addEventListener("change", showContext);
  showContext();
  const go = el("button", "", "Fork and run");
  go.type = "submit";
  const cancel = el("button", "", "Cancel");
  cancel.type = "button";
  cancel.addEventListener("click", () => form.remove());
  const row = el("div", "row");
  row.append(el("label", "", "Run with "), agent, go, cancel);
  form.append(head, holder, el("div", "dim", "The next user message:"), message, row);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const at = Number(point.value);
      const made = await api(`/api/sessions/${encodeURIComponent(state.current)}/fork`,
        { method: "POST", body: JSON.stringify({ at, edits }) });
      let run = null;
      if (message.value.trim()) {
        run = await api(`/api/sessions/${encodeURIComponent(made.session_id)}/runs`,
          { method: "POST", body: JSON.stringify({ input: message.value.trim(),
            agent: agent.value || null, background: true }) });
      }
      await loadSessions();
      $("tab-conversation").click();
      await openSession(made.session_id);
      if (run && state.follow !== run.run_id) follow(run.run_id);
    } catch (error) { showError(error); }
  });
  into.after(form);
}

function runRow(run, number) {
  const box = el("details", "run");
  box.dataset.status = run.status;
  const summary = el("summary");
  const tokens = run.usage.input_tokens + run.usage.output_tokens;
  summary.append(el("span", "run-no", `#${number}`),
                 el("span", "badge " + run.status, run.status),
                 el("span", "run-input", run.input ?? "(resumed)"),
                 el("span", "run-path", run.agents.join(" → ")),
                 el("span", "dim", `${run.usage.requests} req · ${tokens} tok`),
                 el("span", "dim", `${run.duration_s.toFixed(2)} s`));
  box.append(summary);
  const tools = el("div", "run-tools");
  const showTrace = el("button", "open-trace", "Trace");
  const showEvents = el("button", "open-events", "Events");
  const fork = el("button", "fork", "Fork from here");
  fork.title = "A new session with this session's events up to the one picked in the list " +
    "(click an event to pick it; the run's last by default)";
  const trace = el("div", "run-trace");
  trace.hidden = true;
  tools.append(showEvents, showTrace, fork);
  box.append(tools, trace);
  const list = el("ol", "events");
  let chosen = run.last_seq;
  fork.addEventListener("click", () => forkForm(run, tools, chosen));
  showEvents.addEventListener("click", () => { trace.hidden = true; list.hidden = false; });
  showTrace.addEventListener("click", async () => {
    try {
      const { spans } = await api(`/api/sessions/${encodeURIComponent(state.current)}` +
                                  `/runs/${number}/trace`);
      renderWaterfall(spans, trace);
      trace.hidden = false;
      list.hidden = true;
    } catch (error) { showError(error); }
  });
  list.start = run.first_seq;
  for (let seq = run.first_seq; seq <= run.last_seq; seq++) {
    const e = workbench.events[seq - 1];
    const item = el("li", seq === chosen ? "event chosen" : "event");
    item.dataset.seq = String(seq);
    item.dataset.kind = e.kind;
    item.title = "Pick this event to fork from";
    item.addEventListener("click", () => {
      chosen = seq;
      list.querySelectorAll("li.chosen").forEach((li) => li.classList.remove("chosen"));
      item.classList.add("chosen");
      const open = box.querySelector(".fork-form select[name=at]");
      if (open) { open.value = String(seq); open.dispatchEvent(new Event("change")); }
    });
    item.append(el("span", "kind", e.kind), el("span", "what", eventSummary(e)));
    list.append(item);
  }
  box.append(list);
  return box;
}

function forkList(forks) {  // the sessions forked from this one, each opening from here
  const box = el("div", "forks");
  box.append(el("span", "", `Forks of this session (${forks.length}): `));
  for (const f of forks) {
    const link = el("button", "link", f.session_id);
    link.dataset.session = f.session_id;
    link.addEventListener("click", () => openSession(f.session_id));
    box.append(link, el("span", "dim", ` at event ${f.forked_at} `));
  }
  return box;
}

async function loadHistory() {
  const box = workbench.box;
  const id = state.current;
  const [{ runs }, data, { forks }] = await Promise.all([
    api(`/api/sessions/${encodeURIComponent(id)}/runs`),
    api(`/api/sessions/${encodeURIComponent(id)}`),
    api(`/api/sessions/${encodeURIComponent(id)}/forks`)]);
  if (state.current !== id) return;
  workbench.events = data.events;
  box.replaceChildren();
  if (data.forked_from) {
    const link = el("button", "link", data.forked_from);
    link.addEventListener("click", () => openSession(data.forked_from));
    const origin = el("div", "origin");
    origin.append(el("span", "", "Forked from "), link, el("span", "", ` at event ${data.forked_at}`));
    box.append(origin);
  }
  if (forks.length) box.append(forkList(forks));
  if (!runs.length) box.append(el("div", "dim", "No runs yet: send a message."));
  runs.forEach((run, i) => box.append(runRow(run, i + 1)));
  const last = box.querySelector("details.run:last-of-type");
  if (last) last.open = true;
}

function showHistoryTab(show) {
  workbench.box.hidden = !show;
  workbench.tab.classList.toggle("active", show);
  if (show) {
    $("conversation").hidden = true;
    $("trace").hidden = true;
    $("tab-conversation").classList.remove("active");
    $("tab-trace").classList.remove("active");
    loadHistory().catch(showError);
  }
}

function installHistory() {
  workbench.tab = el("button", "tab", "History");
  workbench.tab.id = "tab-history";
  $("tab-trace").after(workbench.tab);
  workbench.box = el("div");
  workbench.box.id = "history";
  workbench.box.hidden = true;
  $("trace").after(workbench.box);
  workbench.tab.addEventListener("click", () => showHistoryTab(true));
  $("tab-conversation").addEventListener("click", () => showHistoryTab(false));
  $("tab-trace").addEventListener("click", () => showHistoryTab(false));
  const opened = openSession;  // the history follows the session shown
  openSession = async function (id) {  // eslint-disable-line no-global-assign
    await opened(id);
    if (!workbench.box.hidden) await loadHistory();
  };
}

installHistory();
