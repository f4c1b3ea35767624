// The console's eval view: an eval run (`relayrace eval run`, stored as a session whose case
// runs are its children) opened from the session list. Pass rates per case, the routing
// confusion matrix as a heat map, each failed case run's first divergence, and a link into
// every case run's session. Everything is put on the page as text, never as HTML.
"use strict";

const evalView = { box: null, button: null };

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
    box.append(el("h3", "", `Routing: ${pct(data.confusion.accuracy)} ended where expected`),
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

function installEvals() {
  evalView.button = el("button", "tab", "Eval results");
  evalView.button.id = "tab-eval";
  evalView.button.hidden = true;
  $("tab-trace").after(evalView.button);
  evalView.box = el("div");
  evalView.box.id = "eval";
  evalView.box.hidden = true;
  $("trace").after(evalView.box);
  evalView.button.addEventListener("click", () => showEval(true));
  evalView.button.closest("nav").addEventListener("click", (event) => {  // any other tab
    if (event.target.matches("button.tab") && event.target !== evalView.button) {
      evalView.box.hidden = true;
      evalView.button.classList.remove("active");
    }
  }, true);
  const opened = openSession;  // a session that is an eval run shows its results
  openSession = async function (id) {  // eslint-disable-line no-global-assign
    await opened(id);
    let data = null;
    try { data = await api("/api/evals/" + encodeURIComponent(id)); } catch { data = null; }
    if (state.current !== id) return;
    evalView.button.hidden = !data;
    if (data) { renderEval(data); showEval(true); } else if (!evalView.box.hidden) {
      showEval(false);
      showTab("conversation");
    }
  };
}

installEvals();
