// The console's Inbox: every session waiting for people (an approval, an answer, or any other
// kind of pending interrupt the server lists), with what the user asked and since when it
// waits, answered from one place; and the approvals decided last, by whom and when. Items and their
// actions come from /api/inbox, so a new kind appears here without changes to this file.
// Text only, never HTML.
"use strict";

const inboxView = { box: null, button: null };

function fillInput(value, typed) {  // the action's body, "$input" replaced by what was typed
  if (value === "$input") return typed;
  if (Array.isArray(value)) return value.map((v) => fillInput(v, typed));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fillInput(v, typed)]));
  }
  return value;
}

function inboxItem(item) {
  const row = el("div", "inbox-item");
  row.dataset.kind = item.kind;
  row.dataset.session = item.session_id;
  const open = el("button", "link", item.session_id);
  open.addEventListener("click", () => { showInbox(false); openSession(item.session_id); });
  const head = el("div", "inbox-head");
  head.append(el("span", "badge waiting", item.kind), el("strong", "", item.agent), open);
  const fields = el("dl", "inbox-fields");
  for (const [k, v] of Object.entries(item.fields)) {
    if (v === null || v === "" || (Array.isArray(v) && !v.length)) continue;
    fields.append(el("dt", "", k), el("dd", "", typeof v === "string" ? v : JSON.stringify(v)));
  }
  const actions = el("div", "inbox-actions");
  for (const action of item.actions) {
    let typed = null;
    if (action.input !== undefined) {
      typed = el("input");
      typed.placeholder = action.input;
      actions.append(typed);
    }
    const go = el("button", "", action.label);
    go.addEventListener("click", async () => {
      try {
        const body = fillInput(action.decide, typed ? typed.value : "");
        await api(`/api/sessions/${encodeURIComponent(item.session_id)}/pending`,
          { method: "POST", body: JSON.stringify(Object.assign({ background: false }, body)) });
        await loadSessions();  // and the open inbox with it (one render, not two)
      } catch (error) { showError(error); }
    });
    actions.append(go);
  }
  const waited = Math.max(0, Math.round((Date.now() / 1000 - item.waiting_since) / 60));
  const since = el("span", "waiting-since dim",
    `waiting since ${new Date(item.waiting_since * 1000).toLocaleString()} (${waited} min)`);
  head.append(since);
  const asked = el("div", "inbox-user");
  asked.append(el("span", "who", "user: "), document.createTextNode(item.user_message || "(none)"));
  row.append(head, asked, el("div", "inbox-title", item.title), fields, actions);
  return row;
}

function decidedRow(d) {  // an approval decided: what, by whom, when, in which session
  const row = el("div", "decided-item " + (d.approved ? "approved" : "rejected"));
  row.dataset.session = d.session_id;
  const open = el("button", "link", d.session_id);
  open.addEventListener("click", () => { showInbox(false); openSession(d.session_id); });
  row.append(el("span", "", decidedText({ approved: d.approved, tool_name: d.tool,
                                          decided_by: d.decided_by, time: d.time }) + " · "), open);
  return row;
}

async function loadInbox() {
  const { items, decided } = await api("/api/inbox");
  inboxView.button.textContent = `Inbox (${items.length})`;
  const box = inboxView.box;
  box.replaceChildren(el("h2", "", "Waiting for you"));
  if (!items.length) box.append(el("div", "dim", "Nothing waits for a person."));
  items.forEach((item) => box.append(inboxItem(item)));
  if (decided.length) {
    box.append(el("h2", "decided-head", "Decided recently"));
    decided.forEach((d) => box.append(decidedRow(d)));
  }
}

function showInbox(show) {
  inboxView.box.hidden = !show;
  $("session").hidden = show || !state.current;
  $("home").hidden = show || !!state.current;
  inboxView.button.classList.toggle("active", show);
  if (show) loadInbox().catch(showError);
}

function installInbox() {
  inboxView.button = el("button", "tab", "Inbox");
  inboxView.button.id = "open-inbox";
  $("new-session").after(inboxView.button);
  inboxView.box = el("div");
  inboxView.box.id = "inbox";
  inboxView.box.hidden = true;
  $("detail").append(inboxView.box);
  inboxView.button.addEventListener("click", () => showInbox(inboxView.box.hidden));
  const opened = openSession;  // opening a session leaves the inbox
  openSession = async function (id) {  // eslint-disable-line no-global-assign
    inboxView.box.hidden = true;
    inboxView.button.classList.remove("active");
    await opened(id);
  };
  // The count, once the session list has painted (first paint waits for nothing else); an
  // error shows when the inbox is opened.
  const painted = new MutationObserver(() => {
    painted.disconnect();
    loadInbox().catch(() => {});
  });
  painted.observe($("sessions"), { childList: true });
  const listed = loadSessions;  // a run that ends relists the sessions: an open inbox too
  loadSessions = async function (...page) {  // eslint-disable-line no-global-assign
    await listed(...page);
    if (!inboxView.box.hidden) loadInbox().catch(() => {});
  };
}

installInbox();
