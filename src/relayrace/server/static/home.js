// The console's first screen: the served teams (graph.js's drawing: each agent with the model
// it really runs on, people and tools that wait for approval marked), and a box to start a
// chat with any agent of them, no session needed first (the first message makes one).
// Loaded after graph.js, whose drawTeam it uses. Names are put on the page as text.
"use strict";

function loadHome() {
  const box = $("home-graphs");
  box.replaceChildren(...state.teams.map((team) => {
    const holder = el("div", "team");
    holder.append(el("h3", "", `team of ${team.agent}`), drawTeam(team));
    return holder;
  }), el("div", "graph-legend dim",
    "Each agent with the model it runs on · green, round: a person · orange: a tool whose " +
    "calls wait for a person's approval · solid: transfer · dashed: transfer back / returns · " +
    "green line: delegates"));
  const select = $("start-agent");
  const chosen = select.value;
  agentOptions(select, state.members);
  if (state.members.includes(chosen)) select.value = chosen;
}

function showHome() {
  state.current = null;
  $("session").hidden = true;
  if ($("inbox")) {  // the inbox (inbox.js) is left
    $("inbox").hidden = true;
    $("open-inbox").classList.remove("active");
  }
  document.querySelectorAll("#sessions li.current").forEach((li) => li.classList.remove("current"));
  $("home").hidden = false;
  loadHome();
}

async function startChat(event) {  // a session made for the first message, and its run followed
  event.preventDefault();
  const text = $("start-input").value.trim();
  if (!text) return;
  try {
    const made = await api("/api/sessions", { method: "POST",
      body: JSON.stringify({ agent: $("start-agent").value || null }) });
    await api(`/api/sessions/${encodeURIComponent(made.session_id)}/runs`, { method: "POST",
      body: JSON.stringify({ input: text, background: true }) });
    $("start-input").value = "";
    await loadSessions();
    await openSession(made.session_id);  // follows the run while it goes
  } catch (error) { showError(error); }
}

function installHome() {
  $("open-team").addEventListener("click", showHome);
  $("start-chat").addEventListener("submit", startChat);
  $("start-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) startChat(event);
  });
  // The team is drawn once it is known: now (the first load started before this module ran),
  // and each time it is read again (another API key).
  state.loaded.then(() => { if (!$("home").hidden) loadHome(); }, () => {});
  const known = loadAgents;
  loadAgents = async function () {  // eslint-disable-line no-global-assign
    await known();
    if (!$("home").hidden) loadHome();
  };
}

installHome();
