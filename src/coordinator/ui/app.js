/* flotilla coordinator UI.
 *
 * One script for both pages, picked by <body data-page="...">:
 *   index.html            the query list (GET /v1/query) and the workers (GET /v1/node)
 *   query.html?<query id> one query (GET /v1/query/{id}): summary, SQL, the stage DAG
 *                         as inline SVG, and its tasks
 * Plain ES2017, no dependencies. Every string that goes into HTML passes through esc().
 */
'use strict';

(function () {
  const REFRESH_MS = 1000;
  const SQL_PREVIEW_CHARS = 120;
  // The API lives next to /ui/, so relative paths also work behind a path prefix.
  const API = '../v1/';
  const DONE_TASK_STATES = ['FINISHED', 'CANCELED', 'ABORTED', 'FAILED'];
  const FINAL_QUERY_STATES = ['FINISHED', 'FAILED'];

  // ---- formatting -------------------------------------------------------------------

  const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

  function esc(value) {
    if (value === null || value === undefined) return '';
    return String(value).replace(/[&<>"']/g, function (c) { return ESCAPES[c]; });
  }

  function num(value) {
    const n = Number(value);
    return Number.isFinite(n) ? n : 0;
  }

  function fmtInt(value) {
    return String(Math.round(num(value))).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  }

  function fmtBytes(value) {
    const units = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'];
    let n = num(value);
    let i = 0;
    while (n >= 1024 && i < units.length - 1) {
      n /= 1024;
      i += 1;
    }
    return (i === 0 ? String(Math.round(n)) : n.toFixed(n < 10 ? 2 : 1)) + ' ' + units[i];
  }

  function fmtMs(value) {
    const ms = Math.round(num(value));
    if (ms < 1000) return ms + ' ms';
    const s = ms / 1000;
    if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + 'm ' + Math.floor(s % 60) + 's';
    return Math.floor(m / 60) + 'h ' + (m % 60) + 'm';
  }

  function pad2(n) {
    return (n < 10 ? '0' : '') + n;
  }

  function fmtTime(epochMs) {
    if (!epochMs) return '';
    const d = new Date(num(epochMs));
    return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' +
      pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
  }

  function clock() {
    const d = new Date();
    return pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
  }

  function truncate(text, max) {
    const flat = String(text || '').replace(/\s+/g, ' ').trim();
    return flat.length > max ? flat.slice(0, max - 1) + '\u2026' : flat;
  }

  /** `state-running` etc.; only [a-z0-9_-] so it is safe as a class name. */
  function stateClass(state) {
    return 'state-' + String(state || 'unknown').toLowerCase().replace(/[^a-z0-9_-]/g, '');
  }

  function badge(state) {
    return '<span class="state ' + esc(stateClass(state)) + '">' + esc(state || '?') + '</span>';
  }

  function queryLink(id) {
    return '<a class="mono" href="query.html?' + esc(encodeURIComponent(String(id))) + '">' + esc(id) + '</a>';
  }

  // ---- plumbing ---------------------------------------------------------------------

  function byId(id) {
    return document.getElementById(id);
  }

  function setHtml(id, html) {
    const el = byId(id);
    if (el && el.innerHTML !== html) el.innerHTML = html;
  }

  function setText(id, text) {
    const el = byId(id);
    if (el && el.textContent !== text) el.textContent = text;
  }

  async function getJson(path) {
    const resp = await fetch(API + path, { cache: 'no-store', headers: { Accept: 'application/json' } });
    if (!resp.ok) {
      let message = resp.status + ' ' + resp.statusText;
      try {
        const body = await resp.json();
        if (body && body.error && body.error.message) message = body.error.message;
      } catch (e) {
        // Not JSON: keep the status line.
      }
      const err = new Error(message);
      err.status = resp.status;
      throw err;
    }
    return resp.json();
  }

  /** A promise that never rejects: {ok, value} or {ok: false, error}. */
  function settle(promise) {
    return promise.then(
      function (value) { return { ok: true, value: value }; },
      function (error) { return { ok: false, error: error }; });
  }

  /** Runs `tick` now and then every REFRESH_MS after it finishes, until it returns false. */
  function every(tick) {
    async function run() {
      let again = true;
      try {
        again = (await tick()) !== false;
      } catch (e) {
        setText('status', 'error: ' + (e && e.message ? e.message : String(e)));
      }
      if (again) setTimeout(run, REFRESH_MS);
    }
    run();
  }

  // ---- index.html -------------------------------------------------------------------

  function renderQueries(list) {
    const queries = (Array.isArray(list) ? list.slice() : []).sort(function (a, b) {
      return num(b.created_epoch_ms) - num(a.created_epoch_ms) ||
        String(b.query_id).localeCompare(String(a.query_id));
    });
    const running = queries.filter(function (q) { return !FINAL_QUERY_STATES.includes(q.state); }).length;
    setText('query-count', '(' + queries.length + ', ' + running + ' active)');
    if (queries.length === 0) {
      setHtml('queries', '<div class="empty">No queries yet.</div>');
      return;
    }
    const rows = queries.map(function (q) {
      const error = q.error ? '<span class="alive-no" title="' + esc(q.error.message) + '">' +
        esc(q.error.error_name) + '</span>' : '';
      return '<tr data-query="' + esc(q.query_id) + '">' +
        '<td>' + queryLink(q.query_id) + '</td>' +
        '<td>' + badge(q.state) + '</td>' +
        '<td>' + esc(q.user) + '</td>' +
        '<td>' + esc(fmtTime(q.created_epoch_ms)) + '</td>' +
        '<td class="num">' + esc(fmtMs(q.elapsed_ms)) + '</td>' +
        '<td class="num">' + esc(fmtInt(q.rows)) + '</td>' +
        '<td class="sql" title="' + esc(q.sql) + '">' + esc(truncate(q.sql, SQL_PREVIEW_CHARS)) + '</td>' +
        '<td>' + error + '</td>' +
        '</tr>';
    });
    setHtml('queries', '<table><thead><tr><th>Query</th><th>State</th><th>User</th><th>Created</th>' +
      '<th class="num">Elapsed</th><th class="num">Rows</th><th>SQL</th><th>Error</th></tr></thead><tbody>' +
      rows.join('') + '</tbody></table>');
  }

  function renderWorkers(list) {
    const nodes = (Array.isArray(list) ? list.slice() : []).sort(function (a, b) {
      return String(a.node_id).localeCompare(String(b.node_id));
    });
    const alive = nodes.filter(function (n) { return n.alive; }).length;
    setText('worker-count', '(' + alive + ' alive of ' + nodes.length + ')');
    if (nodes.length === 0) {
      setHtml('workers', '<div class="empty">No worker has announced itself.</div>');
      return;
    }
    const rows = nodes.map(function (n) {
      return '<tr data-node="' + esc(n.node_id) + '">' +
        '<td class="mono">' + esc(n.node_id) + '</td>' +
        '<td class="mono"><a href="' + esc(n.url) + '">' + esc(n.url) + '</a></td>' +
        '<td class="' + (n.alive ? 'alive-yes' : 'alive-no') + '">' + (n.alive ? 'alive' : 'lost') + '</td>' +
        '<td class="num">' + esc(fmtMs(n.last_seen_ms_ago)) + ' ago</td>' +
        '</tr>';
    });
    setHtml('workers', '<table><thead><tr><th>Node</th><th>URL</th><th>State</th>' +
      '<th class="num">Last seen</th></tr></thead><tbody>' + rows.join('') + '</tbody></table>');
  }

  async function indexTick() {
    const queries = settle(getJson('query'));
    const nodes = settle(getJson('node'));
    const problems = [];
    const q = await queries;
    if (q.ok) renderQueries(q.value); else problems.push('queries: ' + q.error.message);
    const n = await nodes;
    if (n.ok) renderWorkers(n.value); else problems.push('workers: ' + n.error.message);
    setText('status', problems.length ? 'error: ' + problems.join('; ') : 'updated ' + clock());
    return true;
  }

  // ---- query.html: the stage DAG ----------------------------------------------------

  const BOX_W = 230;
  const BOX_H = 104;
  const GAP_X = 36;
  const GAP_Y = 64;
  const PAD = 16;

  /** Stage nodes (stage 0, the coordinator's, added when absent) and producer->consumer edges. */
  function dagModel(q) {
    const nodes = new Map();
    (Array.isArray(q.stages) ? q.stages : []).forEach(function (s) {
      const tasks = Array.isArray(s.tasks) ? s.tasks : [];
      let done = 0;
      let rows = 0;
      let bytes = 0;
      tasks.forEach(function (t) {
        const st = t.stats || {};
        rows += num(st.output_rows);
        bytes += num(st.output_bytes);
        if (DONE_TASK_STATES.includes(t.state)) done += 1;
      });
      const id = num(s.stage);
      const memory = s.memory || {};
      nodes.set(id, {
        id: id, coordinator: false, state: s.state, done: done,
        total: Math.max(num(s.task_count), tasks.length), partitions: num(s.partitions),
        rows: rows, bytes: bytes,
        peak: num(memory.peak_bytes), spilled: num(memory.spilled_bytes),
        consumer: s.consumer === null || s.consumer === undefined ? null : num(s.consumer),
        inputs: (Array.isArray(s.inputs) ? s.inputs : []).map(num),
      });
    });
    if (!nodes.has(0)) {
      nodes.set(0, { id: 0, coordinator: true, state: q.state, rows: num(q.rows), consumer: null, inputs: [] });
    }
    const edges = [];
    const seen = new Set();
    function addEdge(from, to) {
      const key = from + '>' + to;
      if (from === to || !nodes.has(from) || !nodes.has(to) || seen.has(key)) return;
      seen.add(key);
      edges.push({ from: from, to: to });
    }
    nodes.forEach(function (n) {
      if (n.consumer !== null) addEdge(n.id, n.consumer);
      n.inputs.forEach(function (i) { addEdge(i, n.id); });
    });
    return { nodes: nodes, edges: edges };
  }

  /** Depth = longest distance (in edges) down from stage 0; unreachable stages hang at 1. */
  function depths(model) {
    const depth = new Map([[0, 0]]);
    const limit = model.nodes.size + 1;
    function relax() {
      for (let round = 0; round < limit; round += 1) {
        let changed = false;
        model.edges.forEach(function (e) {
          if (!depth.has(e.to)) return;
          const d = depth.get(e.to) + 1;
          if (!depth.has(e.from) || (depth.get(e.from) < d && d <= limit)) {
            depth.set(e.from, d);
            changed = true;
          }
        });
        if (!changed) return;
      }
    }
    relax();
    const ids = Array.from(model.nodes.keys()).sort(function (a, b) { return a - b; });
    ids.forEach(function (id) {
      if (!depth.has(id)) {
        depth.set(id, 1);
        relax();
      }
    });
    return depth;
  }

  function layout(model) {
    const depth = depths(model);
    const rows = [];
    model.nodes.forEach(function (n) {
      const d = depth.get(n.id);
      (rows[d] = rows[d] || []).push(n);
    });
    const widest = rows.reduce(function (m, r) { return Math.max(m, r ? r.length : 0); }, 1);
    const width = PAD * 2 + widest * BOX_W + (widest - 1) * GAP_X;
    const pos = new Map();
    rows.forEach(function (row, d) {
      if (!row) return;
      // Under their consumer where possible, then by stage id.
      row.sort(function (a, b) {
        const ca = a.consumer !== null && pos.has(a.consumer) ? pos.get(a.consumer).x : -1;
        const cb = b.consumer !== null && pos.has(b.consumer) ? pos.get(b.consumer).x : -1;
        return ca - cb || a.id - b.id;
      });
      const rowWidth = row.length * BOX_W + (row.length - 1) * GAP_X;
      const x0 = (width - rowWidth) / 2;
      row.forEach(function (n, i) {
        pos.set(n.id, { x: x0 + i * (BOX_W + GAP_X), y: PAD + d * (BOX_H + GAP_Y) });
      });
    });
    const height = PAD * 2 + rows.length * BOX_H + (rows.length - 1) * GAP_Y;
    return { pos: pos, width: width, height: height };
  }

  function stageBox(n, p) {
    const cls = 'stage-box ' + stateClass(n.state) + (n.coordinator ? ' coordinator' : '');
    const title = n.coordinator ? 'Stage 0 (coordinator)' : 'Stage ' + n.id;
    const line3 = n.coordinator ? 'runs in the coordinator' : 'tasks ' + n.done + '/' + n.total + ' done';
    const line4 = n.coordinator ? 'rows ' + fmtInt(n.rows) + ' out'
      : 'rows ' + fmtInt(n.rows) + ' \u00b7 ' + fmtBytes(n.bytes) + ' out';
    const line5 = n.coordinator ? '' : 'memory peak ' + fmtBytes(n.peak) +
      (n.spilled > 0 ? ' \u00b7 spilled ' + fmtBytes(n.spilled) : '');
    const tip = title + ': ' + (n.state || '?') +
      (n.coordinator ? '' : ', ' + n.partitions + ' partitions, ' + n.total + ' tasks');
    return '<g class="' + esc(cls) + '" data-stage="' + esc(n.id) + '" data-state="' + esc(n.state) + '"' +
      ' transform="translate(' + p.x + ',' + p.y + ')">' +
      '<title>' + esc(tip) + '</title>' +
      '<rect width="' + BOX_W + '" height="' + BOX_H + '" rx="6" ry="6"></rect>' +
      '<text class="title" x="10" y="20">' + esc(title) + '</text>' +
      '<text class="st ' + esc(stateClass(n.state)) + '" x="10" y="39">' + esc(n.state || '?') + '</text>' +
      '<text x="10" y="57">' + esc(line3) + '</text>' +
      '<text x="10" y="75">' + esc(line4) + '</text>' +
      (line5 ? '<text class="memory" x="10" y="93">' + esc(line5) + '</text>' : '') +
      '</g>';
  }

  function renderDag(q) {
    const model = dagModel(q);
    const geo = layout(model);
    // Spread the arrows arriving at one consumer along its bottom edge.
    const incoming = new Map();
    model.edges.forEach(function (e) {
      (incoming.get(e.to) || incoming.set(e.to, []).get(e.to)).push(e);
    });
    const paths = [];
    incoming.forEach(function (list, to) {
      list.sort(function (a, b) { return geo.pos.get(a.from).x - geo.pos.get(b.from).x; });
      const c = geo.pos.get(to);
      list.forEach(function (e, i) {
        const p = geo.pos.get(e.from);
        const x1 = p.x + BOX_W / 2;
        const y1 = p.y;
        const x2 = c.x + (BOX_W * (i + 1)) / (list.length + 1);
        const y2 = c.y + BOX_H + 2;
        const bend = Math.max(GAP_Y / 2, Math.abs(y1 - y2) / 2);
        const down = y1 > y2;
        const c1 = down ? y1 - bend : y1 + bend;
        const c2 = down ? y2 + bend : y2 - bend;
        paths.push('<path class="edge" data-from="' + esc(e.from) + '" data-to="' + esc(e.to) + '" d="M' +
          x1 + ',' + y1 + ' C' + x1 + ',' + c1 + ' ' + x2 + ',' + c2 + ' ' + x2 + ',' + y2 +
          '" marker-end="url(#flotilla-arrow)"></path>');
      });
    });
    const boxes = [];
    Array.from(model.nodes.values())
      .sort(function (a, b) { return a.id - b.id; })
      .forEach(function (n) { boxes.push(stageBox(n, geo.pos.get(n.id))); });
    const svg = '<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="stage DAG"' +
      ' width="' + geo.width + '" height="' + geo.height + '" viewBox="0 0 ' + geo.width + ' ' + geo.height + '">' +
      '<defs><marker id="flotilla-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8"' +
      ' markerHeight="8" orient="auto"><path class="arrowhead" fill="#5f6b7a" d="M0,0 L10,5 L0,10 z"></path>' +
      '</marker></defs>' + paths.join('') + boxes.join('') + '</svg>';
    const note = (q.stages || []).length === 0
      ? '<div class="empty">No worker stages yet' + (FINAL_QUERY_STATES.includes(q.state) ? '.' : ' (still planning).') + '</div>'
      : '';
    setHtml('dag', svg + note);
  }

  // ---- query.html: everything else --------------------------------------------------

  function taskOrder(id) {
    const parts = String(id || '').split('.');
    const tail = parts.slice(-3).map(num);
    return tail.length === 3 ? tail : [0, 0, 0];
  }

  function renderTasks(q) {
    const tasks = [];
    (q.stages || []).forEach(function (s) {
      (s.tasks || []).forEach(function (t) { tasks.push(t); });
    });
    tasks.sort(function (a, b) {
      const x = taskOrder(a.task_id);
      const y = taskOrder(b.task_id);
      return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
    });
    const done = tasks.filter(function (t) { return DONE_TASK_STATES.includes(t.state); }).length;
    setText('task-count', '(' + done + '/' + tasks.length + ' done)');
    if (tasks.length === 0) {
      setHtml('tasks', '<div class="empty">No tasks yet.</div>');
      return;
    }
    const rows = tasks.map(function (t) {
      const st = t.stats || {};
      const f = t.failure;
      const failure = f ? esc(f.code) + ': ' + esc(f.message) +
        (f.upstream ? ' <span class="muted">(upstream ' + esc(f.upstream) + (f.upstream_url ? ' at ' + esc(f.upstream_url) : '') + ')</span>' : '')
        : '';
      const buffer = esc(fmtBytes(t.output_buffer_bytes)) +
        (t.output_buffer_overutilized ? ' <span class="alive-no" title="output buffer full, producer waiting">full</span>' : '');
      return '<tr data-task="' + esc(t.task_id) + '">' +
        '<td class="mono">' + esc(t.task_id) + '</td>' +
        '<td class="mono">' + esc(t.node_id) + '</td>' +
        '<td>' + badge(t.state) + '</td>' +
        '<td class="num">' + esc(fmtInt(st.input_rows)) + '</td>' +
        '<td class="num">' + esc(fmtBytes(st.input_bytes)) + '</td>' +
        '<td class="num">' + esc(fmtInt(st.output_rows)) + '</td>' +
        '<td class="num">' + esc(fmtBytes(st.output_bytes)) + '</td>' +
        '<td class="num">' + esc(fmtMs(st.elapsed_ms)) + '</td>' +
        '<td class="num">' + esc(fmtBytes(st.memory_peak_bytes)) + '</td>' +
        '<td class="num">' + esc(fmtBytes(st.spilled_bytes)) + '</td>' +
        '<td class="num">' + buffer + '</td>' +
        '<td class="wrap">' + failure + '</td>' +
        '</tr>';
    });
    setHtml('tasks', '<table><thead><tr><th>Task</th><th>Worker</th><th>State</th>' +
      '<th class="num">Rows in</th><th class="num">Bytes in</th><th class="num">Rows out</th>' +
      '<th class="num">Bytes out</th><th class="num">Elapsed</th><th class="num">Peak memory</th>' +
      '<th class="num">Spilled</th><th class="num">Buffer</th>' +
      '<th>Failure</th></tr></thead><tbody>' + rows.join('') + '</tbody></table>');
  }

  function renderSummary(q) {
    let tasks = 0;
    let done = 0;
    (q.stages || []).forEach(function (s) {
      (s.tasks || []).forEach(function (t) {
        tasks += 1;
        if (DONE_TASK_STATES.includes(t.state)) done += 1;
      });
    });
    setHtml('summary', '<dl class="summary">' +
      '<dt>State</dt><dd id="query-state" data-state="' + esc(q.state) + '">' + badge(q.state) + '</dd>' +
      '<dt>User</dt><dd>' + esc(q.user) + '</dd>' +
      '<dt>Created</dt><dd>' + esc(fmtTime(q.created_epoch_ms)) + '</dd>' +
      '<dt>Elapsed</dt><dd>' + esc(fmtMs(q.elapsed_ms)) + '</dd>' +
      '<dt>Rows</dt><dd>' + esc(fmtInt(q.rows)) + '</dd>' +
      '<dt>Stages</dt><dd>' + esc((q.stages || []).length + 1) + ' (with the coordinator\'s)</dd>' +
      '<dt>Tasks</dt><dd>' + esc(done + '/' + tasks) + ' done</dd>' +
      '<dt>Peak memory</dt><dd id="query-peak-memory">' + esc(fmtBytes((q.memory || {}).peak_bytes)) +
      ' <span class="muted">(task peaks added up)</span></dd>' +
      '<dt>Spilled</dt><dd id="query-spilled">' + esc(fmtBytes((q.memory || {}).spilled_bytes)) + '</dd>' +
      '</dl>');
    const e = q.error;
    setHtml('error', e ? '<div class="error-box"><span class="error-name">' + esc(e.error_name) + '</span>' +
      ' <span class="muted">(' + esc(e.error_type) + ', code ' + esc(e.error_code) + ')</span>' +
      '<pre>' + esc(e.message) + '</pre></div>' : '');
  }

  function renderFragmentDag(q) {
    const el = byId('fragment-dag');
    if (!el) return;
    const dot = q.fragment_dag || '';
    if (el.getAttribute('data-dot') === dot) return;
    el.setAttribute('data-dot', dot);
    const details = el.querySelector('details');
    const open = details && details.open ? ' open' : '';
    el.innerHTML = dot ? '<h2>Fragments</h2><details' + open + '><summary>Fragment DAG (Graphviz DOT)</summary>' +
      '<div class="panel"><pre class="dot">' + esc(dot) + '</pre></div></details>' : '';
  }

  /** Fault-tolerant queries: the ExecutionGraph as the scheduler renders it. */
  function renderExecutionGraph(q) {
    const el = byId('execution-graph');
    if (!el) return;
    const text = q.execution_graph || '';
    if (el.getAttribute('data-text') === text) return;
    el.setAttribute('data-text', text);
    el.innerHTML = text ? '<h2>Execution graph <span class="muted">(retry_policy=task)</span></h2>' +
      '<div class="panel"><pre class="dot">' + esc(text) + '</pre></div>' : '';
  }

  function renderQuery(q) {
    const id = String(q.query_id || '');
    setText('query-id', 'Query ' + id);
    document.title = 'flotilla: ' + id + ' (' + (q.state || '?') + ')';
    setText('notice', '');
    renderSummary(q);
    setText('sql', String(q.sql || ''));
    renderDag(q);
    renderTasks(q);
    renderExecutionGraph(q);
    renderFragmentDag(q);
  }

  /** `query.html?<id>`; `?id=<id>` and `?query_id=<id>` work too. */
  function queryIdFromLocation() {
    let raw = window.location.search.replace(/^\?/, '');
    const named = /(?:^|&)(?:id|query_id)=([^&]*)/.exec(raw);
    raw = named ? named[1] : raw.split('&')[0];
    try {
      return decodeURIComponent(raw);
    } catch (e) {
      return raw;
    }
  }

  /** A query's `infoUri` carries its slug (`&slug=`), which opens another user's query to the holder. */
  function slugParam() {
    const m = /(?:^|&)slug=([^&]*)/.exec(window.location.search.replace(/^\?/, ''));
    return m ? '?slug=' + m[1] : '';
  }

  function startQueryPage() {
    const id = queryIdFromLocation();
    if (!id) {
      setText('query-id', 'No query selected');
      setText('notice', 'Open query.html?<query id>, or pick a query from the list.');
      setText('status', '');
      ['summary', 'dag', 'tasks'].forEach(function (el) { setHtml(el, ''); });
      return;
    }
    setText('query-id', 'Query ' + id);
    every(async function () {
      let q;
      try {
        q = await getJson('query/' + encodeURIComponent(id) + slugParam());
      } catch (e) {
        if (e.status === 404) {
          setText('notice', 'The coordinator does not know query ' + id + ' (wrong id, or dropped from its history).');
          setText('status', 'not found');
          return false;
        }
        setText('status', 'error: ' + e.message + ' (retrying)');
        return true;
      }
      renderQuery(q);
      const final = FINAL_QUERY_STATES.includes(q.state);
      setText('status', final ? 'query ' + String(q.state).toLowerCase() + ', refresh stopped' : 'updated ' + clock());
      return !final;
    });
  }

  function start() {
    const page = document.body ? document.body.getAttribute('data-page') : null;
    if (page === 'query') startQueryPage();
    else if (page === 'index') every(indexTick);
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
