// The dashboard's renderer. Every value from the database goes into the page
// through textContent or setAttribute, never as HTML, so a task or user name
// holding markup shows as text.
"use strict";
(function () {
  var REFRESH_MS = 3000;
  var KINDS = ["complete", "return", "never"];
  var last = null, lastOK = 0;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function td(text, cls) { return el("td", cls, text); }

  function age(ms) {
    if (!ms || ms <= 0) return "–";
    var s = Math.floor(ms / 1000);
    if (s < 60) return s + "s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + "m";
    var h = Math.floor(m / 60);
    if (h < 48) return h + "h" + String(m % 60).padStart(2, "0") + "m";
    return Math.floor(h / 24) + "d" + (h % 24) + "h";
  }
  function dur(ms) { return ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s"; }
  function sum(o) { var n = 0; for (var k in o) n += o[k]; return n; }

  // A value with a muted second line (e.g. a count and the oldest age).
  function pair(main, sub, cls) {
    var c = td(null, cls);
    c.appendChild(el("span", "num", main));
    if (sub) c.appendChild(el("span", "sub", sub));
    return c;
  }

  function spark(runs) {
    var NS = "http://www.w3.org/2000/svg", W = 180, H = 34, P = 2;
    var svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("width", W); svg.setAttribute("height", H);
    svg.setAttribute("class", "spark");
    if (!runs.length) return svg;
    var pts = runs.slice().reverse(); // oldest → newest
    var maxv = 1;
    pts.forEach(function (r) { maxv = Math.max(maxv, r.duration_ms); });
    var bw = (W - 2 * P) / Math.max(pts.length, 12);
    pts.forEach(function (r, i) {
      var h = Math.max(1.5, (H - 2 * P) * r.duration_ms / maxv);
      var b = document.createElementNS(NS, "rect");
      b.setAttribute("x", (P + i * bw).toFixed(1));
      b.setAttribute("y", (H - P - h).toFixed(1));
      b.setAttribute("width", Math.max(1, bw - 1).toFixed(1));
      b.setAttribute("height", h.toFixed(1));
      b.setAttribute("class", i === pts.length - 1 ? "bar last" : "bar");
      var t = document.createElementNS(NS, "title");
      t.textContent = dur(r.duration_ms) + ", " + r.rows_found + " found, " + r.requests_served + " request(s), " + age(r.age_ms) + " ago";
      b.appendChild(t);
      svg.appendChild(b);
    });
    return svg;
  }

  function kinds(counts) {
    var c = td(null, "l kinds");
    KINDS.forEach(function (k) {
      var s = el("span", "kind " + k + (counts[k] ? "" : " zero"));
      s.appendChild(el("b", null, counts[k] || 0));
      s.appendChild(document.createTextNode(" " + k));
      c.appendChild(s);
    });
    return c;
  }

  function taskRow(t) {
    var tr = el("tr");
    tr.dataset.task = t.name;
    var name = td(null, "l name");
    var a = el("a", null, t.name);
    a.setAttribute("href", "/tasks/" + encodeURIComponent(t.name));
    name.appendChild(a);
    var meta = t.lock + (t.max_active ? " · cap " + t.max_active : "") +
      (t.allow && t.allow.length ? " · allowed: " + t.allow.join(", ") : "") +
      (t.not_worked_in && t.not_worked_in.length ? " · four eyes: not " + t.not_worked_in.join(", ") : "") +
      (t.max_hold_ms === null ? " · work never expires" : " · max hold " + age(t.max_hold_ms));
    name.appendChild(el("span", "sub", meta));
    tr.appendChild(name);
    tr.appendChild(pair(t.backlog_loans === null ? "–" : t.backlog_loans,
      t.backlog_age_ms === null ? "not counted yet" : age(t.backlog_age_ms) + " ago"));
    tr.appendChild(pair(t.eligible_at_last_run === null ? "–" : t.eligible_at_last_run,
      t.last_run_age_ms === null ? "no run yet" : age(t.last_run_age_ms) + " ago"));
    tr.appendChild(pair(t.pending, t.pending ? age(t.oldest_pending_ms) : "", t.pending ? "warn-soft" : ""));
    var act = pair(t.active, t.active ? age(t.oldest_active_ms) : "", t.over_hold ? "over" : "");
    if (t.over_hold) act.appendChild(el("span", "badge over", t.over_hold + " stale"));
    tr.appendChild(act);
    tr.appendChild(kinds(t.done_today));
    tr.appendChild(pair(t.runs, t.runs ? t.requests_per_run.toFixed(2) + " req/run" : ""));
    var ch = td(null, "l chart");
    ch.appendChild(spark(t.recent_runs));
    if (t.recent_runs.length) {
      var mx = 0;
      t.recent_runs.forEach(function (r) { mx = Math.max(mx, r.duration_ms); });
      ch.appendChild(el("span", "sub", "last " + dur(t.recent_runs[0].duration_ms) + " · max " + dur(mx)));
    }
    tr.appendChild(ch);
    return tr;
  }

  function userRow(u, holdMS) {
    var tr = el("tr");
    tr.dataset.user = u.user;
    if (u.over_hold) tr.className = "row-over";
    tr.appendChild(td(u.user, "l name"));
    tr.appendChild(td(u.active, "num"));
    tr.appendChild(td(age(u.oldest_active_ms), u.over_hold ? "over" : ""));
    tr.appendChild(td(holdMS ? u.over_hold : "–", u.over_hold ? "over" : "muted"));
    tr.appendChild(td(u.done_today, "num"));
    var by = td(null, "l");
    Object.keys(u.active_by_task).sort().forEach(function (k) {
      by.appendChild(el("span", "chip", k + " " + u.active_by_task[k]));
    });
    tr.appendChild(by);
    return tr;
  }

  function fill(tbody, rows, empty, cols) {
    tbody.replaceChildren();
    if (!rows.length) {
      var c = td(empty, "empty"); c.colSpan = cols;
      var tr = el("tr"); tr.appendChild(c); tbody.appendChild(tr);
      return;
    }
    rows.forEach(function (r) { tbody.appendChild(r); });
  }

  function set(id, text) { document.getElementById(id).textContent = text; }

  function render(s) {
    if (!s || !s.tasks) return;
    last = s;
    fill(document.querySelector("#tasks tbody"), s.tasks.map(taskRow), "no task yet: loanq task create NAME --where SQL", 8);
    fill(document.querySelector("#users tbody"), s.users.filter(function (u) { return u.active || u.done_today; })
      .map(function (u) { return userRow(u, s.hold_ms); }), "nobody holds or finished work today", 6);
    var oldestP = 0, oldestA = 0, byKind = {};
    s.tasks.forEach(function (t) {
      oldestP = Math.max(oldestP, t.pending ? t.oldest_pending_ms : 0);
      oldestA = Math.max(oldestA, t.active ? t.oldest_active_ms : 0);
      KINDS.forEach(function (k) { byKind[k] = (byKind[k] || 0) + t.done_today[k]; });
    });
    set("t-pending", s.total_pending);
    set("t-pending-sub", s.total_pending ? "oldest waiting " + age(oldestP) : "nobody waiting");
    set("t-active", s.total_active);
    set("t-active-sub", s.total_active ? "oldest held " + age(oldestA) : "nothing assigned");
    set("t-over", s.hold_ms ? s.total_over_hold : "–");
    set("t-over-sub", s.hold_ms ? "held " + age(s.hold_ms) + " or longer (--stale-after)" : "off (serve --stale-after)");
    document.getElementById("tile-over").classList.toggle("alert", s.total_over_hold > 0);
    set("t-today", s.total_done_today);
    set("t-today-sub", KINDS.map(function (k) { return byKind[k] + " " + k; }).join(" · "));
    var om = [];
    if (s.tasks_omitted) om.push("the " + s.tasks.length + " busiest of " + s.tasks_total + " tasks");
    if (s.users_omitted) om.push("the " + s.users.length + " busiest of " + s.users_total + " processors");
    var note = document.getElementById("omitted");
    note.textContent = om.length ? "Showing " + om.join(" and ") + " (serve --max-tasks); " +
      "the tiles above count all of them, and /tasks/NAME and /metrics cover every task." : "";
    note.hidden = !om.length;
    set("foot", "Figures from loanq's own tables on " + s.database + ", cached and shared by every viewer; one refresh: " +
      s.refresh.queries + " queries, " + dur(s.refresh.duration_ms) + ". This page changes nothing.");
  }

  function status(ok, text) {
    var live = document.getElementById("live");
    live.classList.toggle("down", !ok);
    set("live-text", text);
  }

  function tick() {
    fetch("/api/dashboard", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) throw new Error("token needed: reopen with ?token=…");
        return r.json();
      })
      .then(function (s) {
        var err = document.getElementById("error");
        if (s.error) { err.textContent = s.error; err.hidden = false; } else { err.hidden = true; }
        render(s);
        if (!s.error) lastOK = Date.now();
        status(!s.error, s.error ? "database unavailable" : "live · " + new Date().toLocaleTimeString());
      })
      .catch(function (e) { status(false, "offline · " + e.message); })
      .finally(function () { setTimeout(tick, REFRESH_MS); });
  }

  try { render(JSON.parse(document.getElementById("initial").textContent)); } catch (e) { /* first fetch fills in */ }
  setTimeout(tick, REFRESH_MS);
  window.loanqDashboard = { last: function () { return last; } };
})();
