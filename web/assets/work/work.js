// The processor's page of loanq serve --api (/work). Every value from the
// server is put on the page with textContent, never as HTML.
(function () {
  'use strict';
  var meta = document.querySelector('meta[name="loanq-csrf"]');
  var csrf = meta ? meta.getAttribute('content') : '';
  var statusEl = document.getElementById('status');

  function say(text, kind) {
    statusEl.textContent = text;
    statusEl.className = kind || '';
  }

  // call sends a JSON API call with the session cookie; POST and DELETE
  // carry the CSRF token. A 401 means the session ended: sign in again.
  function call(method, path, body) {
    var opts = { method: method, credentials: 'same-origin', headers: { 'Accept': 'application/json' } };
    if (method !== 'GET') { opts.headers['X-CSRF-Token'] = csrf; }
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    return fetch(path, opts).then(function (res) {
      if (res.status === 401 && document.body.dataset.page === 'work') {
        say('Your session has ended: signing in again…', 'error');
        window.location.assign('/work');
        return new Promise(function () {});
      }
      if (res.status === 204) { return { status: 204, doc: null }; }
      return res.json().then(function (doc) { return { status: res.status, doc: doc }; },
        function () { return { status: res.status, doc: null }; });
    });
  }

  function problem(r) {
    return (r.doc && r.doc.detail) ? r.doc.detail : ('the server answered ' + r.status);
  }

  function cell(tr, text, cls) {
    var td = document.createElement('td');
    td.textContent = text;
    if (cls) { td.className = cls; }
    tr.appendChild(td);
    return td;
  }

  function age(seconds) {
    if (seconds < 60) { return seconds + 's'; }
    if (seconds < 3600) { return Math.floor(seconds / 60) + 'm ' + (seconds % 60) + 's'; }
    var h = Math.floor(seconds / 3600);
    return h + 'h ' + Math.floor((seconds % 3600) / 60) + 'm';
  }

  // clock is a time of day, with its date when it is not today ("27 Nov
  // 08:51"), and the year when it is not this year.
  function clock(iso) {
    var d = new Date(iso);
    if (isNaN(d)) { return ''; }
    var time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
    var now = new Date();
    if (d.toDateString() === now.toDateString()) { return time; }
    var date = { day: 'numeric', month: 'short' };
    if (d.getFullYear() !== now.getFullYear()) { date.year = 'numeric'; }
    return d.toLocaleDateString([], date) + ' ' + time;
  }

  // loanCard fills td with a loan: its key, and when its task shows
  // anything, a card with the shown columns and the link into the lending
  // system (a new tab, without access to this page: rel=noopener). Every
  // value is text; only an http(s) link becomes one.
  function loanCard(td, item) {
    var details = item.details || {};
    var cols = Object.keys(details);
    if (!cols.length && !item.link) {
      td.textContent = String(item.loan_id);
      return;
    }
    var card = document.createElement('div');
    card.className = 'loan-card';
    var key = document.createElement('div');
    key.className = 'loan-key';
    key.textContent = String(item.loan_id);
    card.appendChild(key);
    if (cols.length) {
      var dl = document.createElement('dl');
      cols.forEach(function (c) {
        var dt = document.createElement('dt');
        dt.textContent = c;
        var dd = document.createElement('dd');
        dd.textContent = details[c] === null ? '—' : details[c];
        dl.appendChild(dt);
        dl.appendChild(dd);
      });
      card.appendChild(dl);
    }
    if (item.link && /^https?:\/\//i.test(item.link)) {
      var a = document.createElement('a');
      a.href = item.link;
      a.target = '_blank';
      a.rel = 'noopener noreferrer';
      a.textContent = 'Open loan ' + item.loan_id;
      a.setAttribute('aria-label', 'Open loan ' + item.loan_id + ' in the lending system (new tab)');
      card.appendChild(a);
    }
    td.appendChild(card);
  }

  // ---- sign-in page ----
  if (document.body.dataset.page === 'login') {
    var form = document.getElementById('login');
    if (!form) { return; }
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      say('Signing in…');
      call('POST', '/work/login', { token: document.getElementById('token').value }).then(function (r) {
        if (r.status === 204) { window.location.replace('/work'); return; }
        say(problem(r), 'error');
      }, function () { say('The server cannot be reached; try again.', 'error'); });
    });
    return;
  }

  // ---- the work page ----
  var taskSel = document.getElementById('task');
  var countIn = document.getElementById('count');
  var getBtn = document.getElementById('get');
  var cancelBtn = document.getElementById('cancel');
  var nextBtn = document.getElementById('next');
  var pipeBody = document.querySelector('#pipeline tbody');
  var histBody = document.querySelector('#history tbody');
  var pending = null; // the request id being looked for
  var shown = {};     // loans shown before the last answer, to mark new ones
  var ages = [];      // [td, seconds at load, load time]

  // Each task's reason codes per action and the actions that require one
  // (docs/reasons.md), from /api/v1/tasks.
  var reasonsOf = {};

  function loadTasks() {
    return call('GET', '/api/v1/tasks').then(function (r) {
      if (r.status !== 200) { say(problem(r), 'error'); return; }
      var keep = taskSel.value || sessionStorage.getItem('loanq-task') || '';
      taskSel.textContent = '';
      r.doc.tasks.forEach(function (t) {
        reasonsOf[t.name] = { codes: t.reasons || {}, required: t.require_reason || [] };
        var o = document.createElement('option');
        o.value = t.name;
        o.textContent = t.name;
        taskSel.appendChild(o);
      });
      if (keep) { taskSel.value = keep; }
      if (!taskSel.value && taskSel.options.length) { taskSel.selectedIndex = 0; }
    });
  }

  function dispose(item, action, after, buttons, why) {
    buttons.forEach(function (b) { b.disabled = true; });
    var body = { action: action };
    if (action === 'return') { body.after = after; }
    if (why) {
      // The chosen code goes with its own action only; the server says
      // which codes an action takes when one is required and missing.
      var opt = why.reason.selectedOptions[0];
      if (opt && opt.value && opt.dataset.action === action) { body.reason = opt.value; }
      if (why.note.value) { body.note = why.note.value; }
    }
    var path = '/api/v1/tasks/' + encodeURIComponent(item.task) + '/loans/' + encodeURIComponent(item.loan_id) + '/disposition';
    call('POST', path, body).then(function (r) {
      if (r.status !== 200) {
        say(problem(r), 'error');
        buttons.forEach(function (b) { b.disabled = false; });
        return;
      }
      say('Loan ' + item.loan_id + ': ' + (action === 'return' ? 'returned for ' + after : action) + '.', 'ok');
      refresh();
    });
  }

  function renderPipeline(work, fresh) {
    pipeBody.textContent = '';
    ages = [];
    var now = Date.now();
    work.forEach(function (item) {
      var tr = document.createElement('tr');
      tr.dataset.loan = String(item.loan_id);
      tr.dataset.task = item.task;
      if (fresh && !shown[item.task + '/' + item.loan_id]) { tr.className = 'new'; }
      cell(tr, item.task);
      loanCard(cell(tr, '', 'num loan'), item);
      var ageTd = cell(tr, age(item.age_seconds), 'num age');
      ages.push([ageTd, item.age_seconds, now]);
      var td = document.createElement('td');
      var box = document.createElement('div');
      box.className = 'actions';
      td.appendChild(box);
      var complete = document.createElement('button');
      complete.type = 'button';
      complete.className = 'complete';
      complete.textContent = 'Complete';
      var after = document.createElement('select');
      after.className = 'after';
      after.setAttribute('aria-label', 'return after, for loan ' + item.loan_id);
      [['1h', '1 hour'], ['4h', '4 hours'], ['24h', '1 day'], ['72h', '3 days']].forEach(function (a) {
        var o = document.createElement('option');
        o.value = a[0];
        o.textContent = a[1];
        after.appendChild(o);
      });
      var ret = document.createElement('button');
      ret.type = 'button';
      ret.className = 'return';
      ret.textContent = 'Return after…';
      var never = document.createElement('button');
      never.type = 'button';
      never.className = 'never';
      never.textContent = 'Never';
      complete.setAttribute('aria-label', 'Complete loan ' + item.loan_id);
      never.setAttribute('aria-label', 'Never: loan ' + item.loan_id + ' is not to be worked again');
      // The reason: a choice list of the task's codes, grouped by the
      // action they go with, and a note (text only: textContent, value).
      var why = { reason: document.createElement('select'), note: document.createElement('input') };
      why.reason.className = 'reason';
      why.reason.setAttribute('aria-label', 'reason, for loan ' + item.loan_id);
      var none = document.createElement('option');
      none.value = '';
      none.textContent = 'reason…';
      why.reason.appendChild(none);
      var rs = reasonsOf[item.task] || { codes: {}, required: [] };
      ['complete', 'return', 'never'].forEach(function (act) {
        var codes = rs.codes[act] || [];
        if (!codes.length) { return; }
        var g = document.createElement('optgroup');
        g.label = act + (rs.required.indexOf(act) >= 0 ? ' (required)' : '');
        codes.forEach(function (c) {
          var o = document.createElement('option');
          o.value = c;
          o.textContent = c;
          o.dataset.action = act;
          g.appendChild(o);
        });
        why.reason.appendChild(g);
      });
      why.reason.hidden = why.reason.options.length === 1;
      why.note.type = 'text';
      why.note.className = 'note';
      why.note.maxLength = 1000;
      why.note.placeholder = 'note';
      why.note.setAttribute('aria-label', 'note, for loan ' + item.loan_id);
      var buttons = [complete, ret, never, after, why.reason, why.note];
      complete.addEventListener('click', function () { dispose(item, 'complete', null, buttons, why); });
      ret.addEventListener('click', function () { dispose(item, 'return', after.value, buttons, why); });
      never.addEventListener('click', function () { dispose(item, 'never', null, buttons, why); });
      // The duration first, then its button, kept together on one line.
      var retBox = document.createElement('span');
      retBox.className = 'return-after';
      retBox.appendChild(after);
      retBox.appendChild(ret);
      box.appendChild(complete);
      box.appendChild(retBox);
      box.appendChild(never);
      box.appendChild(why.reason);
      box.appendChild(why.note);
      tr.appendChild(td);
      pipeBody.appendChild(tr);
    });
    shown = {};
    work.forEach(function (item) { shown[item.task + '/' + item.loan_id] = true; });
    document.getElementById('pipe-empty').hidden = work.length > 0;
    document.getElementById('pipeline').hidden = work.length === 0;
    document.getElementById('pipe-count').textContent = work.length ? '(' + work.length + ')' : '';
  }

  function renderHistory(items) {
    histBody.textContent = '';
    items.forEach(function (h) {
      var tr = document.createElement('tr');
      cell(tr, clock(h.disposed_at), 'num');
      cell(tr, h.task);
      cell(tr, String(h.loan_id), 'num');
      var what = h.disposition;
      if (h.disposition === 'return' && h.return_at) { what += ' (back at ' + clock(h.return_at) + ')'; }
      if (h.reason) { what += ' · ' + h.reason; }
      if (h.note) { what += ' · “' + h.note + '”'; }
      cell(tr, what);
      histBody.appendChild(tr);
    });
    document.getElementById('hist-empty').hidden = items.length > 0;
    document.getElementById('history').hidden = items.length === 0;
  }

  function refresh(fresh) {
    return Promise.all([call('GET', '/api/v1/pipeline'), call('GET', '/api/v1/history')]).then(function (rs) {
      if (rs[0].status === 200) { renderPipeline(rs[0].doc.work, fresh); } else { say(problem(rs[0]), 'error'); }
      if (rs[1].status === 200) { renderHistory(rs[1].doc.history); }
    });
  }

  function looking(on) {
    getBtn.disabled = on;
    nextBtn.disabled = on;
    cancelBtn.hidden = !on;
    if (on) { say('looking… for ' + countIn.value + ' loan(s) in ' + taskSel.value, 'looking'); }
  }

  // answered shows a request's answer; pending ones are long-polled.
  function answered(r) {
    if (r.status === 202 && r.doc && r.doc.request_id) {
      pending = r.doc.request_id;
      looking(true);
      return call('GET', '/api/v1/requests/' + encodeURIComponent(pending) + '?wait_ms=25000').then(answered, retry);
    }
    pending = null;
    looking(false);
    if (r.status !== 200) { say(problem(r), 'error'); return; }
    var d = r.doc;
    if (d.status === 'cancelled') { say('Stopped looking.', ''); return; }
    if (d.assigned > 0) {
      say('Got ' + d.assigned + ' of ' + d.requested + ': loan' + (d.loans.length > 1 ? 's ' : ' ') + d.loans.join(', ') + (d.status === 'partial' ? ' (no more work right now)' : '') + '.', 'ok');
    } else {
      say('No work in ' + d.task + ' right now.', '');
    }
    return refresh(true);
  }

  function retry() {
    // The connection dropped (a node restarted?): ask again; the pending
    // request is the same one, whichever node answers.
    say('looking… (reconnecting)', 'looking');
    setTimeout(function () {
      if (pending) {
        call('GET', '/api/v1/requests/' + encodeURIComponent(pending) + '?wait_ms=25000').then(answered, retry);
      }
    }, 1000);
  }

  document.getElementById('ask').addEventListener('submit', function (ev) {
    ev.preventDefault();
    if (pending) { return; }
    sessionStorage.setItem('loanq-task', taskSel.value);
    looking(true);
    var n = parseInt(countIn.value, 10) || 1;
    call('POST', '/api/v1/tasks/' + encodeURIComponent(taskSel.value) + '/requests', { count: n, wait_ms: 1000 })
      .then(answered, retry);
  });

  // Get next work: the most urgent work across every task the user may
  // work (POST /api/v1/next); each loan says its task.
  nextBtn.addEventListener('click', function () {
    if (pending) { return; }
    var n = parseInt(countIn.value, 10) || 1;
    getBtn.disabled = true;
    nextBtn.disabled = true;
    say('looking… for the next ' + n + ' loan(s) across your tasks', 'looking');
    call('POST', '/api/v1/next', { count: n, wait_ms: 10000 }).then(function (r) {
      getBtn.disabled = false;
      nextBtn.disabled = false;
      if (r.status !== 200) { say(problem(r), 'error'); return; }
      var d = r.doc;
      if (d.assigned > 0) {
        say('Next work: ' + d.work.map(function (w) { return 'loan ' + w.loan_id + ' (' + w.task + ')'; }).join(', ') +
          (d.status === 'partial' ? '; no more work right now.' : '.'), 'ok');
      } else {
        say('No work in any of your tasks right now.', '');
      }
      return refresh(true);
    }, function () {
      getBtn.disabled = false;
      nextBtn.disabled = false;
      say('The server cannot be reached; try again.', 'error');
    });
  });

  cancelBtn.addEventListener('click', function () {
    if (!pending) { return; }
    call('DELETE', '/api/v1/requests/' + encodeURIComponent(pending));
  });

  document.getElementById('logout').addEventListener('click', function () {
    call('POST', '/work/logout').then(function () { window.location.assign('/work'); });
  });

  // Ages tick every second between refreshes; the lists reload every 30 s.
  setInterval(function () {
    var now = Date.now();
    ages.forEach(function (a) { a[0].textContent = age(a[1] + Math.floor((now - a[2]) / 1000)); });
  }, 1000);
  setInterval(function () { if (!pending) { refresh(false); } }, 30000);

  loadTasks().then(function () { return refresh(false); });
})();
