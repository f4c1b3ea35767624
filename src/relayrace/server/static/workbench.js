// The console's History tab: every run of a session (input, status, agent path, tokens, time),
// each run's events, and "fork from here" on any event (time travel: a new session with the
// log up to that event, run on with an edited next message or another agent).
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

function forkForm(seq, into) {
  document.querySelectorAll("#history .fork-form").forEach((f) => f.remove());
  const form = el("form", "fork-form");
  form.dataset.seq = String(seq);
  form.append(el("div", "", `Fork: a new session with this session's first ${seq} events, then run on.`));
  const message = el("textarea");
  message.rows = 2;
  message.name = "message";
  message.value = nextUserMessage(seq);
  message.placeholder = "The next user message (empty: fork only)";
  const agent = el("select");
  agent.name = "agent";
  agent.append(Object.assign(el("option", "", "(the session's agent)"), { value: "" }));
  for (const a of state.agents) agent.append(Object.assign(el("option", "", a.name), { value: a.name }));
  const go = el("button", "", "Fork and run");
  go.type = "submit";
  const cancel = el("button", "", "Cancel");
  cancel.type = "button";
  cancel.addEventListener("click", () => form.remove());
  const row = el("div", "row");
  row.append(el("label", "", "Active agent "), agent, go, cancel);
  form.append(message, row);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const made = await api(`/api/sessions/${encodeURIComponent(state.current)}/fork`,
        { method: "POST", body: JSON.stringify({ at: seq }) });
      let run = null;
      if (message.value.trim()) {
        run = await api(`/api/sessions/${encodeURIComponent(made.session_id)}/runs`,
          { method: "POST", body: JSON.stringify({ input: message.value.trim(),
            agent: agent.value || null, background: true }) });
      }
      await loadSessions();
      $("tab-conversation").click();
      await openSession(made.session_id);
      if (run) follow(run.run_id);
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
  const trace = el("div", "run-trace");
  trace.hidden = true;
  tools.append(showEvents, showTrace);
  box.append(tools, trace);
  const list = el("ol", "events");
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
    const item = el("li", "event");
    item.dataset.seq = String(seq);
    item.dataset.kind = e.kind;
    const fork = el("button", "fork", "Fork from here");
    fork.title = `A new session with events 1–${seq} of this one`;
    fork.addEventListener("click", () => forkForm(seq, item));
    item.append(el("span", "kind", e.kind), el("span", "what", eventSummary(e)), fork);
    list.append(item);
  }
  box.append(list);
  return box;
}

async function loadHistory() {
  const box = workbench.box;
  const id = state.current;
  const [{ runs }, data] = await Promise.all([
    api(`/api/sessions/${encodeURIComponent(id)}/runs`),
    api(`/api/sessions/${encodeURIComponent(id)}`)]);
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
