// The console's eval view: an eval run (`relayrace eval run`, stored as a session whose case
// runs are its children) opened from the session list. Pass rates per case, the routing
// confusion matrix as a heat map, each failed case run's first divergence, and a link into
// every case run's session. And "Save as eval case" on any session: the case `relayrace eval
// capture` would make of it, as YAML to copy or download, or added to the case file the
// server was started with (--eval-cases; the browser never names a path).
// Everything is put on the page as text, never as HTML.
"use strict";

const evalView = { box: null, button: null, capture: null };

function pct(rate) { return `${Math.round(rate * 100)}%`; }

function confusionTable(confusion) {
  const table = el("table", "eval-confusion");
  table.id = "eval-confusion";
  const head = el("tr");
  head.append(el("th", "", "expected \\ reached"));
  confusion.reached.forEach((r) => head.append(el("th", "", r)));
  table.append(head);
  confusion.expected.forEach((expected, i) => {
    const row = el("tr");
    row.append(el("th", "", expected));
    const total = confusion.rows[i].reduce((a, b) => a + b, 0) || 1;
    confusion.rows[i].forEach((n, j) => {
      const cell = el("td", confusion.reached[j] === expected ? "hit" : "miss", n);
      cell.style.setProperty("--heat", String(n / total));
      row.append(cell);
    });
    table.append(row);
  });
  return table;
}

function caseRunRow(run) {
  const row = el("tr", "eval-run " + run.status);
  row.dataset.case = run.case_id;
  const open = el("button", "link", run.session_id || "(none)");
  open.disabled = !run.session_id;
  open.addEventListener("click", () => openSession(run.session_id).catch(showError));
  const diff = el("pre", "eval-diff", run.first_failure
    ? `${run.first_failure.name}: ${run.first_failure.detail}` : run.error || "");
  const session = el("td");
  session.append(open);
  const detail = el("td");
  detail.append(diff);
  row.append(el("td", "", run.case_id), el("td", "", `#${run.repeat}`),
             el("td", "", run.status), el("td", "", run.path.join(" → ")), session, detail);
  return row;
}

function renderEval(data) {
  const box = evalView.box;
  box.replaceChildren(el("h3", "", `${data.team} on ${data.cases_file || "cases"}: `
    + `${pct(data.pass_rate)} passed`));
  const summary = el("table", "eval-summary");
  summary.id = "eval-summary";
  const head = el("tr");
  ["case", "pass rate", "errors", "usual path", "mean tokens"].forEach(
    (h) => head.append(el("th", "", h)));
  summary.append(head);
  for (const c of data.summary) {
    const row = el("tr");
    row.dataset.case = c.case_id;
    const rate = el("td", c.pass_rate === 1 ? "pass" : "fail", pct(c.pass_rate));
    row.append(el("td", "", c.case_id), rate, el("td", "", c.errors),
               el("td", "", c.path.join(" → ")), el("td", "", Math.round(c.mean_tokens)));
    summary.append(row);
  }
  box.append(summary);
  if (data.confusion.expected.length) {
    box.append(el("h3", "", `Routing: ${data.confusion.summary}`),
               confusionTable(data.confusion));
  }
  const runs = el("table", "eval-runs");
  runs.id = "eval-runs";
  const runHead = el("tr");
  ["case", "run", "status", "path", "session", "first divergence"].forEach(
    (h) => runHead.append(el("th", "", h)));
  runs.append(runHead);
  data.runs.forEach((run) => runs.append(caseRunRow(run)));
  box.append(el("h3", "", "Case runs"), runs);
}

function showEval(show) {
  evalView.box.hidden = !show;
  $("conversation").hidden = show;
  $("trace").hidden = true;
  evalView.button.classList.toggle("active", show);
  if (show) {
    $("tab-conversation").classList.remove("active");
    $("tab-trace").classList.remove("active");
  }
}

async function saveCase(append) {
  const panel = evalView.capture;
  const typed = panel.querySelector("input");
  const made = await api(`/api/sessions/${encodeURIComponent(state.current)}/eval-case`,
    { method: "POST", body: JSON.stringify({ id: typed ? typed.value.trim() || null : null,
                                             append }) });
  const id = el("input");
  id.value = made.case_id;
  id.title = "The case's id";
  const yaml = el("pre", "eval-yaml", made.yaml);
  const download = el("a", "", "Download");
  download.href = URL.createObjectURL(new Blob([made.yaml], { type: "application/yaml" }));
  download.download = `${made.case_id}.yaml`;
  const again = el("button", "", "Make again with this id");
  again.addEventListener("click", () => saveCase(false).catch(showError));
  const row = el("div", "row");
  row.append(id, again, download);
  if (made.case_file) {
    const add = el("button", "", `Add to ${made.case_file}`);
    add.id = "eval-case-append";
    add.addEventListener("click", () => saveCase(true).catch(showError));
    row.append(add);
  }
  panel.replaceChildren(row, yaml);
  if (made.appended_to) panel.prepend(el("div", "eval-saved", `Added to ${made.appended_to}.`));
  panel.hidden = false;
}

function installEvals() {
  const save = el("button", "tab", "Save as eval case");
  save.id = "save-eval-case";
  save.addEventListener("click", () => saveCase(false).catch(showError));
  evalView.capture = el("div");
  evalView.capture.id = "eval-case";
  evalView.capture.hidden = true;
  evalView.button = el("button", "tab", "Eval results");
  evalView.button.id = "tab-eval";
  evalView.button.hidden = true;
  $("tab-trace").after(evalView.button);
  evalView.button.closest("nav").append(save);
  $("conversation").before(evalView.capture);
  evalView.box = el("div");
  evalView.box.id = "eval";
  evalView.box.hidden = true;
  $("trace").after(evalView.box);
  evalView.button.addEventListener("click", () => showEval(true));
  evalView.button.closest("nav").addEventListener("click", (event) => {  // any other tab
    if (event.target.matches("button.tab") && event.target !== evalView.button
        && event.target.id !== "save-eval-case") {
      evalView.box.hidden = true;
      evalView.button.classList.remove("active");
    }
  }, true);
  const opened = openSession;  // a session that is an eval run shows its results
  openSession = async function (id) {  // eslint-disable-line no-global-assign
    if (state.current !== id) evalView.capture.hidden = true;
    await opened(id);
    let data = null;
    try {
      data = (await api(`/api/sessions/${encodeURIComponent(id)}/eval`)).eval;
    } catch { data = null; }
    if (state.current !== id) return;
    evalView.button.hidden = !data;
    if (data) { renderEval(data); showEval(true); } else if (!evalView.box.hidden) {
      showEval(false);
      showTab("conversation");
    }
  };
}

installEvals();
