// qprof history server UI: one page, hash routing, plain DOM + SVG, no dependencies.
//
// Routes:
//   #/                                   applications
//   #/app/{app}                          an application's queries and stages (#/app/{app}/stages scrolls to stages)
//   #/app/{app}/sql/{id}                 a query: plan DAG with self-time heat, SQL, plan description
//   #/app/{app}/stage/{id}/{attempt}     a stage: summary, task quantiles, tasks
//   #/app/{app}/executors                executors
//
// Test hooks: <main id="page" data-page="...">, body[data-ready="1"] once a page is rendered,
// #error holding the message of a failed fetch.
'use strict';

(function () {
  const API = 'api/v1/applications';
  const QPROF = 'qprof/v1/applications';
  const enc = encodeURIComponent;

  // ------------------------------------------------------------------ DOM helpers

  const SVGNS = 'http://www.w3.org/2000/svg';

  function setAttrs(el, attrs) {
    if (!attrs) return;
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }

  function appendKids(el, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k == null || k === false || k === '') continue;
      el.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
  }

  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    appendKids(el, kids);
    return el;
  }

  function s(tag, attrs, ...kids) {
    const el = document.createElementNS(SVGNS, tag);
    setAttrs(el, attrs);
    appendKids(el, kids);
    return el;
  }

  const link = (href, text, attrs) => h('a', Object.assign({ href }, attrs || {}), text);

  // ------------------------------------------------------------------ fetching

  class HttpError extends Error {
    constructor(status, message, url) {
      super(message);
      this.status = status;
      this.url = url;
    }
  }

  async function getJson(url) {
    let resp;
    try {
      resp = await fetch(url, { headers: { Accept: 'application/json' } });
    } catch (e) {
      throw new HttpError(0, `Cannot reach the server: ${e.message}`, url);
    }
    const text = await resp.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch (_) {
      body = undefined;
    }
    if (!resp.ok) {
      const msg = (body && typeof body.message === 'string' && body.message) ||
        (text || '').trim().slice(0, 500) || `${resp.status} ${resp.statusText}`;
      throw new HttpError(resp.status, msg, url);
    }
    if (body === undefined) throw new HttpError(resp.status, `The server sent invalid JSON for ${url}`, url);
    return body;
  }

  // A request whose failure must not fail the page: resolves to null.
  const optional = (p) => p.then((v) => v, () => null);
  // A request whose failure is shown in place: resolves to {error}.
  const settle = (p) => p.then((value) => ({ value }), (error) => ({ error }));

  const appUrl = (app, rest) => `${API}/${enc(app)}${rest || ''}`;
  const appHref = (app, rest) => `#/app/${enc(app)}${rest || ''}`;

  // ------------------------------------------------------------------ formatting

  const DASH = '–';
  const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

  function fmtInt(n) {
    if (!isNum(n)) return DASH;
    return Math.round(n).toLocaleString('en-US');
  }

  function fmtBytes(n) {
    if (!isNum(n)) return DASH;
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
    let v = Math.abs(n);
    let i = 0;
    while (v >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    if (i === 0) return `${Math.round(n)} B`;
    return `${(Math.sign(n) * v).toFixed(1)} ${units[i]}`;
  }

  function fmtMs(ms) {
    if (!isNum(ms)) return DASH;
    const a = Math.abs(ms);
    if (a < 1000) {
      if (a > 0 && a < 10 && !Number.isInteger(ms)) return `${ms.toFixed(a < 1 ? 2 : 1)} ms`;
      return `${Math.round(ms)} ms`;
    }
    const sec = ms / 1000;
    if (Math.abs(sec) < 60) return `${sec.toFixed(Math.abs(sec) < 10 ? 2 : 1)} s`;
    const min = sec / 60;
    if (Math.abs(min) < 60) return `${min.toFixed(1)} min`;
    return `${(min / 60).toFixed(1)} h`;
  }

  function fmtNs(ns) {
    if (!isNum(ns)) return DASH;
    const a = Math.abs(ns);
    if (a < 1e3) return `${Math.round(ns)} ns`;
    if (a < 1e6) return `${(ns / 1e3).toFixed(1)} µs`;
    if (a < 1e9) return `${(ns / 1e6).toFixed(a < 1e7 ? 2 : 1)} ms`;
    return fmtMs(ns / 1e6);
  }

  function fmtPct(share) {
    if (!isNum(share)) return DASH;
    const p = share * 100;
    return `${p >= 9.95 ? p.toFixed(0) : p.toFixed(1)}%`;
  }

  // Spark dates look like "2026-11-22T07:42:08.907GMT"; epochs are numbers.
  function parseDate(v) {
    if (v == null || v === '') return null;
    if (isNum(v)) return new Date(v);
    const d = new Date(String(v).replace(/GMT$/, 'Z'));
    return Number.isNaN(d.getTime()) ? null : d;
  }

  const pad2 = (n) => String(n).padStart(2, '0');

  function fmtDate(v) {
    const d = v instanceof Date ? v : parseDate(v);
    if (!d) return DASH;
    return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ` +
      `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
  }

  function spanMs(from, to) {
    const a = parseDate(from);
    const b = parseDate(to);
    return a && b ? b.getTime() - a.getTime() : null;
  }

  // ------------------------------------------------------------------ Spark metric strings

  // "total (min, med, max (stageId: taskId))\n337 ms (166 ms, ...)" -> "337 ms"; plain values unchanged.
  function sparkTotal(v) {
    if (v == null) return '';
    const str = String(v);
    const lines = str.split('\n');
    if (lines.length > 1 && /^\s*(total|avg)\b/i.test(lines[0])) {
      const m = lines[1].match(/^(.*?)\s*\(/);
      return (m ? m[1] : lines[1]).trim();
    }
    return str.replace(/\s+/g, ' ').trim();
  }

  function parseSparkMetric(v) {
    const str = v == null ? '' : String(v);
    const lines = str.split('\n');
    if (lines.length > 1 && /^\s*(total|avg)\b/i.test(lines[0])) {
      const m = lines[1].match(/^(.*?) \((.*?), (.*?), (.*?) \((.*)\)\)\s*$/);
      if (m) return { total: m[1], min: m[2], med: m[3], max: m[4], where: m[5] };
      return { total: sparkTotal(str) };
    }
    return { total: str };
  }

  // Spark renders durations as "18 ms", "1.0 s", "2.5 m" / "2.5 min", "1.25 h". Returns ms or null.
  function parseSparkTime(str) {
    const m = String(str).trim().match(/^(-?[\d.,]+)\s*(ns|µs|us|ms|s|sec|m|min|h|hr|hours?)$/i);
    if (!m) return null;
    const n = parseFloat(m[1].replace(/,/g, ''));
    if (!Number.isFinite(n)) return null;
    const unit = m[2].toLowerCase();
    const f = { ns: 1e-6, 'µs': 1e-3, us: 1e-3, ms: 1, s: 1e3, sec: 1e3, m: 6e4, min: 6e4, h: 36e5, hr: 36e5, hour: 36e5, hours: 36e5 }[unit];
    return f == null ? null : n * f;
  }

  const isZeroValue = (v) => /^-?0(\.0+)?(\s*[a-zµ]+)?$/i.test(String(v).trim());

  // ------------------------------------------------------------------ small UI pieces

  function statusBadge(status) {
    const st = String(status || 'UNKNOWN').toUpperCase();
    let cls = 'neutral';
    if (/^(COMPLETED|COMPLETE|SUCCEEDED|SUCCESS|FINISHED)$/.test(st)) cls = 'ok';
    else if (/^(FAILED|KILLED|ERROR)$/.test(st)) cls = 'failed';
    else if (/^(RUNNING|ACTIVE)$/.test(st)) cls = 'running';
    return h('span', { class: `badge badge-${cls}${cls === 'failed' ? ' status-failed' : ''}` }, st);
  }

  function table(attrs, cols, rows, emptyText) {
    const head = h('thead', null, h('tr', null, cols.map((c) => {
      const [label, cls, title] = Array.isArray(c) ? c : [c];
      return h('th', { class: cls, title }, label);
    })));
    const body = h('tbody', null, rows.length ? rows
      : h('tr', { class: 'empty' }, h('td', { colspan: cols.length }, emptyText || 'Nothing to show')));
    return h('div', { class: 'table-wrap' }, h('table', Object.assign({ class: 'data' }, attrs || {}), head, body));
  }

  const td = (content, cls, title) => h('td', { class: cls, title }, content);

  function card(title, attrs, ...kids) {
    return h('section', Object.assign({ class: 'card' }, attrs || {}),
      title ? h('h2', null, title) : null, kids);
  }

  function facts(pairs) {
    return h('dl', { class: 'facts' }, pairs.filter(Boolean).map(([k, v, cls]) =>
      h('div', { class: `fact${cls ? ' ' + cls : ''}` }, h('dt', null, k), h('dd', null, v))));
  }

  function errorBox(e) {
    const status = e && e.status ? `HTTP ${e.status}` : '';
    return h('div', { id: 'error', class: 'error-box', role: 'alert' },
      h('div', { class: 'error-title' }, 'Could not load this page'),
      h('div', { class: 'error-message' }, (e && e.message) || String(e)),
      status || (e && e.url) ? h('div', { class: 'error-detail' }, [status, e.url].filter(Boolean).join(' · ')) : null,
      h('div', { class: 'error-back' }, link('#/', '← All applications')));
  }

  function pageHeader(title, badge, subtitle, actions) {
    return h('div', { class: 'page-head' },
      h('div', { class: 'page-title' }, h('h1', null, title), badge || null),
      subtitle ? h('p', { class: 'subtitle' }, subtitle) : null,
      actions ? h('div', { class: 'actions' }, actions) : null);
  }

  const appName = (info, app) => (info && info.name) || app;

  function appCrumbs(app, info) {
    return [['Applications', '#/'], [appName(info, app), appHref(app)]];
  }

  function tasksCell(done, failed, total, killed) {
    const t = Math.max(total || 0, 1);
    const okW = Math.min(100, (100 * (done || 0)) / t);
    const failW = Math.min(100 - okW, (100 * (failed || 0)) / t);
    return h('div', { class: 'tasks-cell' },
      h('div', { class: 'bar' },
        h('span', { class: 'bar-ok', style: `width:${okW.toFixed(1)}%` }),
        h('span', { class: 'bar-failed', style: `width:${failW.toFixed(1)}%` })),
      h('span', { class: 'bar-text' }, `${fmtInt(done || 0)}/${fmtInt(total || 0)}`,
        failed ? h('span', { class: 'failed-text' }, ` (${fmtInt(failed)} failed)`) : null,
        killed ? h('span', { class: 'muted' }, ` (${fmtInt(killed)} killed)`) : null));
  }

  function bytesRecords(bytes, records) {
    if (!isNum(bytes) && !isNum(records)) return DASH;
    if (!bytes && !records) return DASH;
    return `${fmtBytes(bytes)} / ${fmtInt(records)}`;
  }

  // ------------------------------------------------------------------ page: applications

  // The entries of the log directory the server skipped, on one line (none: nothing).
  function skippedLine(status) {
    const skipped = (status && status.skipped) || [];
    const problems = skipped.map((s) => `${s.entry}: ${s.reason}`);
    if (status && status.directoryError) problems.unshift(`log directory: ${status.directoryError}`);
    if (!problems.length) return null;
    const what = skipped.length === 1 ? '1 entry' : `${skipped.length} entries`;
    return h('p', { class: 'muted', id: 'skipped-entries', title: problems.join('\n') },
      status.directoryError ? `The log directory could not be read at the last scan; ${what} skipped.`
        : `${what} of the log directory skipped (not readable event logs): ${problems.slice(0, 3).join('; ')}${problems.length > 3 ? '; …' : ''}`);
  }

  async function pageApps() {
    const [apps, status] = await Promise.all([getJson(API), optional(getJson('/qprof/v1/status'))]);
    const rows = (apps || []).map((app) => {
      const at = (app.attempts && app.attempts[0]) || {};
      const id = app.id;
      const href = appHref(id);
      return h('tr', { class: 'app-row', 'data-app-id': id },
        td(link(href, id, { class: 'mono' })),
        td(link(href, app.name || id)),
        td(fmtDate(at.startTime), 'nowrap'),
        td(at.endTime && parseDate(at.endTime) && parseDate(at.endTime).getTime() > 0 ? fmtDate(at.endTime) : DASH, 'nowrap'),
        td(fmtMs(at.duration), 'num'),
        td(at.sparkUser || DASH),
        td(at.completed === false ? statusBadge('RUNNING') : h('span', { class: 'badge badge-ok' }, 'COMPLETED')),
        td(at.appSparkVersion || DASH, 'muted'));
    });
    return {
      title: 'Applications',
      crumbs: [['Applications', '#/']],
      nodes: [
        pageHeader('Applications', null, `${rows.length} application${rows.length === 1 ? '' : 's'} in the event log directory`),
        skippedLine(status),
        card(null, null, table({ id: 'apps' },
          ['App ID', 'Name', 'Started', 'Ended', ['Duration', 'num'], 'User', 'Status', 'Spark'],
          rows, 'No applications found')),
      ],
    };
  }

  // ------------------------------------------------------------------ page: application

  function jobIdsCell(app, sql, jobsById) {
    const ids = [];
    for (const j of sql.successJobIds || []) ids.push([j, false]);
    for (const j of sql.failedJobIds || []) ids.push([j, true]);
    for (const j of sql.runningJobIds || []) ids.push([j, null]);
    if (!ids.length) return DASH;
    ids.sort((a, b) => a[0] - b[0]);
    const out = [];
    ids.forEach(([j, failed], i) => {
      const job = jobsById && jobsById.get(j);
      const title = job ? `Job ${j} · ${job.status} · stages ${(job.stageIds || []).join(', ')}` : `Job ${j}`;
      if (i) out.push(', ');
      out.push(h('span', { class: failed ? 'job-id failed-text' : 'job-id', title }, String(j)));
    });
    return out;
  }

  function stageRow(app, st) {
    const href = appHref(app, `/stage/${st.stageId}/${st.attemptId}`);
    const dur = spanMs(st.submissionTime, st.completionTime);
    const state = st.status === 'FAILED' ? ' failed' : st.status === 'ACTIVE' ? ' active' : '';
    return h('tr', { class: `stage-row${state}`, 'data-stage-id': st.stageId, 'data-attempt-id': st.attemptId },
      td(link(href, `${st.stageId}.${st.attemptId}`, { class: 'mono', title: `stage ${st.stageId}, attempt ${st.attemptId}` })),
      td(statusBadge(st.status)),
      td(st.name || DASH, 'desc-cell', st.name || null),
      td(fmtDate(st.submissionTime), 'nowrap'),
      td(tasksCell(st.numCompleteTasks, st.numFailedTasks, st.numTasks, st.numKilledTasks)),
      td(st.inputBytes ? fmtBytes(st.inputBytes) : DASH, 'num'),
      td(st.shuffleReadBytes ? fmtBytes(st.shuffleReadBytes) : DASH, 'num'),
      td(st.shuffleWriteBytes ? fmtBytes(st.shuffleWriteBytes) : DASH, 'num'),
      td(dur == null ? DASH : fmtMs(dur), 'num'));
  }

  function stagesTable(app, stages) {
    return table({ id: 'stages-table' },
      ['Stage', 'Status', 'Description', 'Submitted', 'Tasks', ['Input', 'num'], ['Shuffle read', 'num'],
        ['Shuffle write', 'num'], ['Duration', 'num']],
      (stages || []).map((st) => stageRow(app, st)), 'No stages');
  }

  async function pageApp(route) {
    const app = route.app;
    const [info, sqls, stages, jobs, live] = await Promise.all([
      getJson(appUrl(app)),
      getJson(appUrl(app, '/sql?details=false&planDescription=false&length=1000')),
      getJson(appUrl(app, '/stages')),
      optional(getJson(appUrl(app, '/jobs'))),
      optional(getJson(LIVE_URL)),
    ]);
    const jobsById = new Map((jobs || []).map((j) => [j.jobId, j]));
    const at = (info.attempts && info.attempts[0]) || {};
    const list = (sqls || []).slice().sort((a, b) => a.id - b.id);

    const sqlRows = list.map((q) => {
      const href = appHref(app, `/sql/${q.id}`);
      return h('tr', { class: `sql-row${q.status === 'FAILED' ? ' failed' : ''}`, 'data-sql-id': q.id },
        td(link(href, String(q.id), { class: 'mono' }), 'num'),
        td(statusBadge(q.status)),
        td(link(href, q.description || `Query ${q.id}`), 'desc-cell', q.description || null),
        td(fmtDate(q.submissionTime), 'nowrap'),
        td(fmtMs(q.duration), 'num'),
        td(jobIdsCell(app, q, jobsById)));
    });

    const failedQueries = list.filter((q) => q.status === 'FAILED').length;
    const summary = facts([
      ['Application ID', h('span', { class: 'mono' }, info.id || app)],
      ['User', at.sparkUser || DASH],
      ['Started', fmtDate(at.startTime)],
      ['Duration', fmtMs(at.duration)],
      ['Status', at.completed === false ? statusBadge('RUNNING') : h('span', { class: 'badge badge-ok' }, 'COMPLETED')],
      ['Spark version', at.appSparkVersion || DASH],
      ['Queries', `${list.length}${failedQueries ? ` (${failedQueries} failed)` : ''}`],
      ['Stages', String((stages || []).length)],
    ]);

    return {
      title: appName(info, app),
      crumbs: appCrumbs(app, info),
      after: () => {
        if (route.focus === 'stages') {
          const el = document.getElementById('stages');
          if (el) window.scrollTo(0, Math.max(0, el.getBoundingClientRect().top + window.scrollY - 60));
        }
      },
      nodes: [
        pageHeader(appName(info, app), null, null, [
          link(appHref(app, '/executors'), 'Executors', { class: 'button', id: 'executors-link' }),
          link(appHref(app, '/stages'), 'Stages', { class: 'button', id: 'stages-link' }),
        ]),
        card(null, { class: 'card summary-card' }, summary),
        live ? liveCard(live) : null,
        card('Queries', { id: 'queries' }, table({ id: 'sql-table' },
          [['ID', 'num'], 'Status', 'Description', 'Submitted', ['Duration', 'num'], 'Job IDs'],
          sqlRows, 'No SQL executions in this application')),
        card('Stages', { id: 'stages' }, stagesTable(app, stages)),
      ],
    };
  }

  // ------------------------------------------------------------------ live (a run's own UI)

  // Served only by a run's live UI (`qprof run --ui`): its running queries and memory now.
  const LIVE_URL = '/qprof/v1/live';

  function liveContent(live) {
    const m = live.memory || {};
    const rows = (live.running || []).map((q) => h('tr', { class: 'live-query-row', 'data-query-id': q.id },
      td(h('span', { class: 'mono' }, String(q.id)), 'num'),
      td(firstLine(q.sql), 'desc-cell', q.sql),
      td(fmtMs(q.elapsedMillis), 'num'),
      td(`${fmtInt(q.tasksFinished)} / ${fmtInt(q.tasks)}`, 'num'),
      td(fmtInt(q.rowsScanned), 'num'),
      td(fmtBytes(q.bytesRead), 'num')));
    return [
      facts([
        ['Heap', fmtBytes(m.heapBytes)],
        ['Execution', fmtBytes(m.executionBytes)],
        ['Storage', fmtBytes(m.storageBytes)],
        ['RSS', fmtBytes(m.rssBytes)],
      ]),
      table({ id: 'live-table' }, [['Query', 'num'], 'SQL', ['Running for', 'num'], ['Tasks done', 'num'],
        ['Rows scanned', 'num'], ['Bytes read', 'num']], rows, 'No query running'),
    ];
  }

  // A card that refreshes itself every second while it is on the page.
  function liveCard(live) {
    const el = card('Running now', { id: 'live' }, ...liveContent(live));
    const timer = setInterval(async () => {
      if (!document.body.contains(el)) {
        clearInterval(timer);
        return;
      }
      const next = await optional(getJson(LIVE_URL));
      if (next) el.replaceChildren(h('h2', null, 'Running now'), ...liveContent(next));
    }, 1000);
    return el;
  }

  // ------------------------------------------------------------------ heat (self time per operator)

  const WSCG_RE = /^WholeStageCodegen\s*\((\d+)\)/;

  function sparkTimeOfNode(n) {
    let sum = 0;
    let any = false;
    for (const m of n.metrics || []) {
      // "time to collect" waits for the child job and wait times are not work: both left out.
      if (!/\b(time|duration)\b/i.test(m.name || '') || /wait|collect/i.test(m.name || '')) continue;
      const t = parseSparkTime(sparkTotal(m.value));
      if (t != null) {
        sum += t;
        any = true;
      }
    }
    return any ? sum : 0;
  }

  function profileMetric(p, key) {
    const m = p && p.metrics && p.metrics[key];
    return m && isNum(m.value) ? m.value : null;
  }

  function computeHeat(nodes, profMap) {
    const self = new Map();
    let source = null;
    let unit = 'ms';
    let total = 0;
    if (profMap && profMap.size) {
      let key = null;
      for (const k of ['selfCpuNanos', 'selfWallNanos']) {
        for (const p of profMap.values()) {
          if ((profileMetric(p, k) || 0) > 0) {
            key = k;
            break;
          }
        }
        if (key) break;
      }
      if (key) {
        for (const n of nodes) {
          const v = profileMetric(profMap.get(n.nodeId), key);
          if (v > 0) self.set(n.nodeId, v);
        }
        if (self.size) {
          source = key === 'selfCpuNanos' ? 'qprof self CPU time' : 'qprof self wall time';
          unit = 'ns';
          for (const p of profMap.values()) total += Math.max(0, profileMetric(p, key) || 0);
        }
      }
    }
    if (!source) {
      const times = new Map(nodes.map((n) => [n.nodeId, sparkTimeOfNode(n)]));
      for (const n of nodes) {
        let t = times.get(n.nodeId) || 0;
        const m = WSCG_RE.exec(n.nodeName || '');
        if (m) {
          // A codegen stage's duration includes its members' own timers.
          const cid = Number(m[1]);
          for (const x of nodes) if (x !== n && x.wholeStageCodegenId === cid) t -= times.get(x.nodeId) || 0;
          t = Math.max(0, t);
        }
        if (t > 0) self.set(n.nodeId, t);
      }
      for (const v of self.values()) total += v;
      source = self.size ? 'Spark time metrics (approximate)' : null;
    }
    const share = new Map();
    if (total > 0) for (const [id, v] of self) share.set(id, v / total);
    const ranked = [...share.entries()].sort((a, b) => b[1] - a[1]);
    const hot = new Set();
    ranked.forEach(([id, sh], i) => {
      if (sh <= 0) return;
      if (i === 0 || (i < 3 && sh >= 0.1) || sh >= 0.25) hot.add(id);
    });
    const fmt = unit === 'ns' ? fmtNs : fmtMs;
    return { source, unit, self, share, hot, total, ranked, fmt };
  }

  function heatFill(share) {
    if (!isNum(share) || share <= 0) return '#ffffff';
    const t = Math.min(1, Math.sqrt(share));
    const hue = 50 - 50 * t;
    const light = 95 - 26 * t;
    return `hsl(${hue.toFixed(0)}, 95%, ${light.toFixed(0)}%)`;
  }

  // ------------------------------------------------------------------ text measuring

  let measureCtx = null;
  let fontFamily = null;

  function textWidth(text, size, weight) {
    if (fontFamily == null) fontFamily = getComputedStyle(document.body).fontFamily || 'sans-serif';
    if (measureCtx === null) {
      try {
        measureCtx = document.createElement('canvas').getContext('2d') || false;
      } catch (_) {
        measureCtx = false;
      }
    }
    if (!measureCtx) return String(text).length * size * 0.6;
    measureCtx.font = `${weight || 400} ${size}px ${fontFamily}`;
    return measureCtx.measureText(String(text)).width;
  }

  function fitText(text, size, weight, maxW) {
    text = String(text);
    if (textWidth(text, size, weight) <= maxW) return text;
    let lo = 0;
    let hi = text.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (textWidth(text.slice(0, mid) + '…', size, weight) <= maxW) lo = mid;
      else hi = mid - 1;
    }
    return text.slice(0, Math.max(1, lo)) + '…';
  }

  // ------------------------------------------------------------------ plan DAG

  const G = {
    padX: 10, padY: 8, nameSize: 13, metricSize: 11.5, nameH: 19, lineH: 16,
    hgap: 30, vgap: 42, margin: 16, clusterPad: 9, labelH: 19, labelSize: 11,
    maxLines: 8, maxTextW: 330, minW: 96, pillSize: 11,
  };

  // qprof's base timers and counters: the node shows its self time instead, details show them all.
  const REDUNDANT_QPROF = ['wallNanos', 'selfWallNanos', 'cpuNanos', 'selfCpuNanos', 'cpuCount', 'numPolls',
    'outputVectors', 'numMemoryAllocations', 'elapsedComputeNanos'];

  function nodeLines(n, prof, heat, maxLines) {
    const lines = [];
    if (heat.unit === 'ns' && heat.self.has(n.nodeId)) {
      lines.push({ label: heat.source.replace(/^qprof /, ''), value: heat.fmt(heat.self.get(n.nodeId)), cls: 'm-self' });
    }
    let metrics;
    let omitted = 0;
    if (n.fromProfile && prof && prof.metrics) {
      // A graph derived from the profile: show qprof's own renderings.
      const all = Object.entries(prof.metrics);
      const kept = all.filter(([k]) => !REDUNDANT_QPROF.includes(k));
      omitted += all.length - kept.length;
      metrics = kept.map(([k, m]) => ({ label: m.displayName || k, value: sparkTotal(m.spark ?? m.value), full: String(m.spark ?? m.value) }));
    } else {
      metrics = (n.metrics || []).map((m) => ({ label: m.name, value: sparkTotal(m.value), full: String(m.value) }));
      if (prof && prof.metrics && lines.length) {
        const redundant = new Set(REDUNDANT_QPROF.map((k) => prof.metrics[k] && prof.metrics[k].displayName).filter(Boolean));
        const kept = metrics.filter((m) => !redundant.has(m.label));
        omitted += metrics.length - kept.length;
        metrics = kept;
      }
    }
    const room = Math.max(1, maxLines - lines.length);
    if (metrics.length > room) {
      const nonZero = metrics.filter((m) => !isZeroValue(m.value));
      omitted += metrics.length - nonZero.length;
      metrics = nonZero;
    }
    if (metrics.length + (omitted ? 1 : 0) > room) {
      const keep = Math.max(0, room - 1);
      omitted += metrics.length - keep;
      metrics = metrics.slice(0, keep);
    }
    if (omitted) metrics.push({ label: `+${omitted} more`, value: '', cls: 'm-more' });
    return lines.concat(metrics);
  }

  function buildLayout(graphNodes, graphEdges, heat, profMap) {
    const byId = new Map(graphNodes.map((n) => [n.nodeId, n]));
    const touched = new Set();
    const edges = [];
    for (const e of graphEdges || []) {
      if (byId.has(e.fromId) && byId.has(e.toId) && e.fromId !== e.toId) {
        edges.push(e);
        touched.add(e.fromId);
        touched.add(e.toId);
      }
    }

    // WholeStageCodegen nodes without edges become clusters around their members.
    const clusters = [];
    const clusterOf = new Map(); // member id -> cluster
    const boxes = [];
    for (const n of graphNodes) {
      const m = WSCG_RE.exec(n.nodeName || '');
      if (m && !touched.has(n.nodeId)) {
        const cid = Number(m[1]);
        const members = graphNodes.filter((x) => x !== n && x.wholeStageCodegenId === cid && !WSCG_RE.test(x.nodeName || ''));
        if (members.length) {
          const c = { node: n, cid, memberIds: members.map((x) => x.nodeId) };
          clusters.push(c);
          for (const x of members) if (!clusterOf.has(x.nodeId)) clusterOf.set(x.nodeId, c);
          continue;
        }
      }
      boxes.push(n);
    }

    const L = new Map();
    for (const n of boxes) {
      L.set(n.nodeId, { id: n.nodeId, raw: n, prof: profMap ? profMap.get(n.nodeId) : null, kids: [], parents: [], depth: 0, order: 0 });
    }
    for (const e of edges) {
      const c = L.get(e.fromId);
      const p = L.get(e.toId);
      if (c && p) {
        c.parents.push(p.id);
        p.kids.push(c.id);
      }
    }
    for (const v of L.values()) v.kids.sort((a, b) => a - b);

    // Spanning forest from the sinks (operators whose output goes nowhere).
    const ids = [...L.keys()].sort((a, b) => a - b);
    const roots = ids.filter((id) => L.get(id).parents.length === 0);
    const treeKids = new Map(ids.map((id) => [id, []]));
    const seen = new Set();
    let order = 0;
    const visit = (root) => {
      const stack = [[root, 0]];
      seen.add(root);
      while (stack.length) {
        const [id, depth] = stack.pop();
        const v = L.get(id);
        v.depth = depth;
        v.order = order++;
        const fresh = v.kids.filter((k) => !seen.has(k));
        for (const k of fresh) seen.add(k);
        treeKids.set(id, fresh);
        for (let i = fresh.length - 1; i >= 0; i--) stack.push([fresh[i], depth + 1]);
      }
    };
    for (const r of roots) visit(r);
    for (const id of ids) {
      if (!seen.has(id)) {
        roots.push(id);
        visit(id);
      }
    }
    // DAG nodes reached again deeper down go below their deepest consumer.
    for (let pass = 0; pass < ids.length; pass++) {
      let changed = false;
      for (const v of L.values()) {
        for (const pid of v.parents) {
          const p = L.get(pid);
          if (treeKids.get(pid).includes(v.id) && v.depth < p.depth + 1) {
            v.depth = p.depth + 1;
            changed = true;
          }
        }
      }
      if (!changed) break;
      for (const v of L.values()) for (const k of treeKids.get(v.id)) L.get(k).depth = Math.max(L.get(k).depth, v.depth + 1);
    }
    const maxDepth = Math.max(0, ...[...L.values()].map((v) => v.depth));
    for (const v of L.values()) v.row = maxDepth - v.depth; // leaves on top, sinks at the bottom

    // Cluster labels sit above the member highest up; that member gets wide enough for the label.
    for (const c of clusters) {
      const ms = c.memberIds.map((id) => L.get(id)).filter(Boolean);
      c.members = ms;
      if (!ms.length) continue;
      ms.sort((a, b) => a.row - b.row || a.order - b.order);
      c.top = ms[0];
      const dur = (c.node.metrics || []).find((m) => /duration/i.test(m.name));
      const share = heat.share.get(c.node.nodeId);
      c.label = `${c.node.nodeName}${dur ? ' · ' + sparkTotal(dur.value) : ''}`;
      c.pct = share ? fmtPct(share) : '';
      c.labelW = textWidth(c.label, G.labelSize, 600) + (c.pct ? textWidth(c.pct, G.pillSize, 700) + 18 : 0) + 14;
    }

    // Box sizes; big plans get terser boxes.
    const maxLines = L.size <= 12 ? G.maxLines : L.size <= 24 ? 6 : 4;
    for (const v of L.values()) {
      const n = v.raw;
      const share = heat.share.get(v.id);
      v.pct = share ? fmtPct(share) : '';
      const pillW = v.pct ? textWidth(v.pct, G.pillSize, 700) + 12 : 0;
      const maxName = G.maxTextW - (pillW ? pillW + 8 : 0);
      v.name = fitText(n.nodeName || `#${v.id}`, G.nameSize, 600, maxName);
      let w = textWidth(v.name, G.nameSize, 600) + (pillW ? pillW + 8 : 0);
      v.lines = nodeLines(n, v.prof, heat, maxLines).map((ln) => {
        const valueW = ln.value ? textWidth(ln.value, G.metricSize, 600) : 0;
        const sep = ln.value ? ': ' : '';
        const label = fitText(ln.label, G.metricSize, 400, Math.max(60, G.maxTextW - valueW - 8));
        const lw = textWidth(label + sep, G.metricSize, 400) + valueW;
        w = Math.max(w, lw);
        return Object.assign({}, ln, { label, sep });
      });
      v.w = Math.ceil(Math.max(G.minW, w + 2 * G.padX));
      v.h = Math.ceil(2 * G.padY + G.nameH + v.lines.length * G.lineH - (v.lines.length ? 0 : 4));
    }
    for (const c of clusters) if (c.top) c.top.w = Math.max(c.top.w, Math.ceil(c.labelW - 2 * G.clusterPad));

    // Horizontal placement: tidy-ish tree layout, parents centred over their children.
    const subW = new Map();
    const measure = (id) => {
      const v = L.get(id);
      const kids = treeKids.get(id);
      let sum = 0;
      kids.forEach((k, i) => {
        sum += measure(k) + (i ? G.hgap : 0);
      });
      const w = Math.max(v.w, sum);
      subW.set(id, w);
      return w;
    };
    const place = (id, left) => {
      const v = L.get(id);
      const sw = subW.get(id);
      const kids = treeKids.get(id);
      let cx;
      if (kids.length) {
        let sum = 0;
        kids.forEach((k, i) => {
          sum += subW.get(k) + (i ? G.hgap : 0);
        });
        let x = left + (sw - sum) / 2;
        for (const k of kids) {
          place(k, x);
          x += subW.get(k) + G.hgap;
        }
        const first = L.get(kids[0]);
        const last = L.get(kids[kids.length - 1]);
        cx = (first.x + first.w / 2 + last.x + last.w / 2) / 2;
        cx = Math.min(Math.max(cx, left + v.w / 2), left + sw - v.w / 2);
      } else {
        cx = left + sw / 2;
      }
      v.x = Math.round(cx - v.w / 2);
    };
    let x0 = G.margin + G.clusterPad;
    for (const r of roots) {
      measure(r);
      place(r, x0);
      x0 += subW.get(r) + G.hgap;
    }

    // Vertical placement by rows.
    const rowH = [];
    for (const v of L.values()) rowH[v.row] = Math.max(rowH[v.row] || 0, v.h);
    const topExtra = clusters.some((c) => c.top && c.top.row === 0) ? G.labelH : 0;
    const rowY = [];
    let y = G.margin + G.clusterPad + topExtra;
    for (let r = 0; r <= maxDepth; r++) {
      rowY[r] = y;
      y += (rowH[r] || 0) + G.vgap;
    }
    for (const v of L.values()) v.y = Math.round(rowY[v.row] + ((rowH[v.row] || 0) - v.h) / 2);

    let width = 0;
    let height = 0;
    for (const v of L.values()) {
      width = Math.max(width, v.x + v.w);
      height = Math.max(height, v.y + v.h);
    }
    width += G.margin + G.clusterPad;
    height += G.margin + G.clusterPad;

    // Cluster outline: one rect per member plus connectors across the gaps between members.
    const P = G.clusterPad;
    for (const c of clusters) {
      if (!c.members || !c.members.length) continue;
      const memberSet = new Set(c.members.map((m) => m.id));
      c.rects = c.members.map((m) => {
        const extra = m === c.top ? G.labelH : 0;
        return { x: m.x - P, y: m.y - P - extra, w: m.w + 2 * P, h: m.h + 2 * P + extra };
      });
      for (const m of c.members) {
        for (const pid of m.parents) {
          if (!memberSet.has(pid)) continue;
          const p = L.get(pid);
          const y1 = m.y + m.h + P;
          const y2 = p.y - P - (p === c.top ? G.labelH : 0);
          if (y2 <= y1) continue;
          const xa = Math.max(m.x, p.x);
          const xb = Math.min(m.x + m.w, p.x + p.w);
          const inside = xb - xa >= 24;
          const x1 = inside ? xa - P : Math.min(m.x, p.x) - P;
          const x2 = inside ? xb + P : Math.max(m.x + m.w, p.x + p.w) + P;
          const o = inside ? P : 1; // reach into both boxes' padding to hide the rounded corners
          c.rects.push({ x: x1, y: y1 - o, w: x2 - x1, h: y2 - y1 + 2 * o, connector: true });
        }
      }
    }

    return { L, edges, clusters, boxes, width, height };
  }

  function buildDag(graphNodes, graphEdges, heat, profMap, onSelect) {
    const lay = buildLayout(graphNodes, graphEdges, heat, profMap);
    const { L, edges, clusters, width, height } = lay;

    const svg = s('svg', {
      id: 'plan-dag', class: 'dag', xmlns: SVGNS, width, height, viewBox: `0 0 ${width} ${height}`,
      role: 'img', 'aria-label': 'Physical plan',
      style: `min-width:${Math.min(width, Math.round(width * 0.7))}px`,
    });
    svg.append(s('defs', null,
      s('marker', { id: 'dag-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse', markerUnits: 'userSpaceOnUse' },
        s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow-head' }))));

    const gClusters = s('g', { class: 'clusters' });
    const gEdges = s('g', { class: 'edges' });
    const gNodes = s('g', { class: 'nodes' });
    svg.append(gClusters, gEdges, gNodes);
    const groups = new Map();

    const selectable = (g, id) => {
      g.setAttribute('tabindex', '0');
      g.addEventListener('click', () => onSelect(id));
      g.addEventListener('keydown', (ev) => {
        if (ev.key === 'Enter' || ev.key === ' ') {
          ev.preventDefault();
          onSelect(id);
        }
      });
      groups.set(id, g);
    };

    for (const c of clusters) {
      if (!c.rects) continue;
      const id = c.node.nodeId;
      const hot = heat.hot.has(id);
      const g = s('g', { class: `node cluster${hot ? ' hot' : ''}`, 'data-node-id': id, 'data-codegen-id': c.cid },
        s('title', null, `${c.node.nodeName}\n${(c.node.metrics || []).map((m) => `${m.name}: ${m.value}`).join('\n')}`));
      const strokes = s('g', { class: 'cl-stroke' });
      const fills = s('g', { class: 'cl-fill' });
      for (const r of c.rects) {
        const rx = r.connector ? 0 : 8;
        strokes.append(s('rect', { x: r.x, y: r.y, width: r.w, height: r.h, rx }));
        fills.append(s('rect', { x: r.x, y: r.y, width: r.w, height: r.h, rx }));
      }
      g.append(strokes, fills);
      const lx = c.top.x - G.clusterPad + 8;
      const ly = c.top.y - G.clusterPad - 6;
      g.append(s('text', { class: 'cl-label', x: lx, y: ly }, c.label));
      if (c.pct) {
        const tw = textWidth(c.label, G.labelSize, 600);
        const pw = textWidth(c.pct, G.pillSize, 700) + 10;
        const px = lx + tw + 8;
        g.append(s('rect', { class: 'pct-pill', x: px, y: ly - 11, width: pw, height: 15, rx: 7.5, style: `fill:${heatFill(heat.share.get(id))}` }),
          s('text', { class: 'pct-text', x: px + pw / 2, y: ly }, c.pct));
      }
      selectable(g, id);
      gClusters.append(g);
    }

    // Edges: from the producer's bottom to the consumer's top, arrivals spread over the consumer.
    const arrivals = new Map();
    for (const e of edges) {
      if (!arrivals.has(e.toId)) arrivals.set(e.toId, []);
      arrivals.get(e.toId).push(e.fromId);
    }
    for (const list of arrivals.values()) list.sort((a, b) => (L.get(a).x - L.get(b).x) || (a - b));
    for (const e of edges) {
      const c = L.get(e.fromId);
      const p = L.get(e.toId);
      const list = arrivals.get(e.toId);
      const i = list.indexOf(e.fromId);
      const spread = Math.min(p.w * 0.6, 28 * (list.length - 1));
      const px = p.x + p.w / 2 + (list.length > 1 ? -spread / 2 + (spread * i) / (list.length - 1) : 0);
      const cx = c.x + c.w / 2;
      let d;
      if (c.y + c.h <= p.y) {
        const y1 = c.y + c.h;
        const y2 = p.y - 1;
        const my = (y1 + y2) / 2;
        d = `M${cx},${y1} C${cx},${my} ${px},${my} ${px},${y2}`;
      } else {
        const y1 = c.y;
        const y2 = p.y + p.h + 1;
        const my = (y1 + y2) / 2;
        d = `M${cx},${y1} C${cx},${my} ${px},${my} ${px},${y2}`;
      }
      gEdges.append(s('path', { class: 'edge', d, 'data-from': e.fromId, 'data-to': e.toId, 'marker-end': 'url(#dag-arrow)' }));
    }

    for (const v of L.values()) {
      const n = v.raw;
      const share = heat.share.get(v.id);
      const hot = heat.hot.has(v.id);
      const tip = [`#${v.id} ${n.nodeName || ''}`];
      if (n.desc && n.desc !== n.nodeName) tip.push(n.desc);
      if (share) tip.push(`${fmtPct(share)} of ${heat.source}`);
      const g = s('g', {
        class: `node${hot ? ' hot' : ''}${share ? ' has-heat' : ''}`, 'data-node-id': v.id,
        'data-share': share ? share.toFixed(4) : null, transform: `translate(${v.x},${v.y})`,
      }, s('title', null, tip.join('\n')));
      g.append(s('rect', { class: 'box', x: 0, y: 0, width: v.w, height: v.h, rx: 6, style: `fill:${heatFill(share)}` }));
      g.append(s('text', { class: 'n-name', x: G.padX, y: G.padY + 13 }, v.name));
      if (v.pct) {
        const pw = textWidth(v.pct, G.pillSize, 700) + 12;
        const px = v.w - G.padX - pw + 4;
        g.append(s('rect', { class: 'pct-pill', x: px, y: G.padY + 1, width: pw, height: 16, rx: 8 }),
          s('text', { class: 'pct-text', x: px + pw / 2, y: G.padY + 13 }, v.pct));
      }
      v.lines.forEach((ln, i) => {
        const y = G.padY + G.nameH + i * G.lineH + 11;
        g.append(s('text', { class: `n-metric ${ln.cls || ''}`.trim(), x: G.padX, y },
          ln.full && ln.full !== ln.value ? s('title', null, `${ln.label}: ${ln.full}`) : null,
          s('tspan', { class: 'm-label' }, ln.label + (ln.sep || '')),
          ln.value ? s('tspan', { class: 'm-value' }, ln.value) : null));
      });
      selectable(g, v.id);
      gNodes.append(g);
    }

    function select(id) {
      for (const [gid, g] of groups) g.classList.toggle('selected', gid === id);
    }
    return { svg, select };
  }

  // ------------------------------------------------------------------ page: query

  function flattenPlan(plan) {
    const map = new Map();
    const stack = plan ? [plan] : [];
    while (stack.length) {
      const n = stack.pop();
      if (!n || typeof n !== 'object') continue;
      if (n.id != null && !map.has(n.id)) map.set(n.id, n);
      for (const c of n.children || []) stack.push(c);
    }
    return map;
  }

  function unwrapProfile(body, id) {
    if (!body || typeof body !== 'object') return null;
    if (body.query && typeof body.query === 'object') return body.query;
    if (Array.isArray(body.queries)) return body.queries.find((q) => String(q.id) === String(id)) || body.queries[0] || null;
    if (body.plan) return body;
    return null;
  }

  // A graph in Spark's shape from the profile tree, for when the server has no graph.
  function graphFromProfile(profile) {
    const nodes = [];
    const edges = [];
    const walk = (n) => {
      nodes.push({ nodeId: n.id, nodeName: n.name, desc: n.display || n.name, metrics: [], fromProfile: true });
      for (const c of n.children || []) {
        edges.push({ fromId: c.id, toId: n.id });
        walk(c);
      }
    };
    if (profile && profile.plan) walk(profile.plan);
    return { nodes, edges };
  }

  function fmtProfileValue(m, v) {
    if (!isNum(v)) return v == null ? DASH : String(v);
    switch (m.kind) {
      case 'nsTiming': return fmtNs(v);
      case 'timing': return fmtNs(v);
      case 'size': return fmtBytes(v);
      case 'average': return Number.isInteger(v) ? fmtInt(v) : v.toFixed(2);
      default: return fmtInt(v);
    }
  }

  function nodeDetails(n, prof, heat) {
    if (!n) return [h('p', { class: 'muted' }, 'Click an operator in the plan to see its metrics.')];
    const share = heat.share.get(n.nodeId);
    const out = [];
    out.push(h('div', { class: 'detail-head' },
      h('span', { class: 'mono muted' }, `#${n.nodeId}`), ' ',
      h('strong', null, n.nodeName),
      n.wholeStageCodegenId != null ? h('span', { class: 'chip' }, `codegen ${n.wholeStageCodegenId}`) : null,
      prof && prof.stageId != null ? h('span', { class: 'chip' }, `stage ${prof.stageId}`) : null,
      share ? h('span', { class: `chip heat${heat.hot.has(n.nodeId) ? ' hot' : ''}` },
        `${fmtPct(share)} · ${heat.fmt(heat.self.get(n.nodeId))}`) : null));
    const desc = (prof && prof.display) || n.desc;
    if (desc && desc !== n.nodeName) out.push(h('pre', { class: 'desc' }, desc));
    let sparkTable = null;
    if ((n.metrics || []).length) {
      sparkTable = table({ class: 'data compact metrics' }, ['Spark metric', ['Total', 'num'], ['Min', 'num'], ['Median', 'num'], ['Max', 'num']],
        n.metrics.map((m) => {
          const p = parseSparkMetric(m.value);
          return h('tr', null, td(m.name, 'metric-name'), td(p.total, 'num'), td(p.min || '', 'num'), td(p.med || '', 'num'),
            td(p.max || '', 'num', p.where ? `max at ${p.where}` : null));
        }));
    }
    const hasProf = prof && prof.metrics && Object.keys(prof.metrics).length;
    if (hasProf) {
      out.push(table({ class: 'data compact metrics' }, ['qprof metric', ['Value', 'num'], ['Min', 'num'], ['Median', 'num'], ['Max', 'num'], ['Tasks', 'num']],
        Object.entries(prof.metrics).map(([k, m]) => h('tr', null,
          td(m.displayName || k, 'metric-name', k),
          td(fmtProfileValue(m, m.value), 'num', m.spark != null ? `Spark: ${m.spark}` : null),
          td(fmtProfileValue(m, m.min), 'num'), td(fmtProfileValue(m, m.median), 'num'),
          td(fmtProfileValue(m, m.max), 'num', m.maxTaskId != null ? `task ${m.maxTaskId}` : null),
          td(m.tasks != null ? fmtInt(m.tasks) : DASH, 'num')))));
      if (sparkTable) out.push(h('details', { class: 'more-metrics' }, h('summary', null, `Spark metrics (${n.metrics.length})`), sparkTable));
    } else if (sparkTable) {
      out.push(sparkTable);
    }
    if (prof && prof.info && Object.keys(prof.info).length) {
      out.push(facts(Object.entries(prof.info).map(([k, v]) => [k, typeof v === 'object' ? JSON.stringify(v) : String(v)])));
    }
    if (!out.slice(1).length) out.push(h('p', { class: 'muted' }, 'No metrics.'));
    return out;
  }

  async function pageQuery(route) {
    const { app, id } = route;
    const [info, sql, prof, jobs, stages] = await Promise.all([
      optional(getJson(appUrl(app))),
      getJson(appUrl(app, `/sql/${enc(id)}?details=true&planDescription=true`)),
      settle(getJson(`${QPROF}/${enc(app)}/sql/${enc(id)}/profile`)),
      optional(getJson(appUrl(app, '/jobs'))),
      optional(getJson(appUrl(app, '/stages'))),
    ]);
    const profile = prof.value ? unwrapProfile(prof.value, id) : null;
    const profNote = prof.error && prof.error.status !== 404 ? `qprof profile unavailable: ${prof.error.message}` : null;
    const profMap = profile ? flattenPlan(profile.plan) : new Map();

    let nodes = Array.isArray(sql.nodes) ? sql.nodes : [];
    let edges = Array.isArray(sql.edges) ? sql.edges : [];
    if (!nodes.length && profile && profile.plan) ({ nodes, edges } = graphFromProfile(profile));
    const byId = new Map(nodes.map((n) => [n.nodeId, n]));
    const heat = computeHeat(nodes, profMap);

    const details = h('div', { id: 'node-details', class: 'node-details' });
    let dag = null;
    const onSelect = (nid) => {
      if (dag) dag.select(nid);
      details.replaceChildren(...nodeDetails(byId.get(nid), profMap.get(nid), heat));
    };
    let graphEl;
    try {
      dag = nodes.length ? buildDag(nodes, edges, heat, profMap, onSelect) : null;
      graphEl = dag ? h('div', { class: 'dag-scroll' }, dag.svg) : h('p', { class: 'muted' }, 'This query has no plan graph.');
    } catch (e) {
      console.error(e);
      graphEl = h('p', { class: 'error-box' }, `Could not draw the plan: ${e.message}`);
    }
    const plain = nodes.filter((n) => !WSCG_RE.test(n.nodeName || '')).map((n) => n.nodeId).sort((a, b) => a - b);
    const asked = route.node != null && byId.has(Number(route.node)) ? Number(route.node) : null;
    const firstSel = asked != null ? asked : heat.ranked.length ? heat.ranked[0][0] : plain.length ? plain[0] : nodes.length ? nodes[0].nodeId : null;
    onSelect(firstSel);

    // Hottest operators.
    const topRows = heat.ranked.filter(([, sh]) => sh > 0).slice(0, 8).map(([nid, sh]) => {
      const n = byId.get(nid);
      return h('tr', { class: `hot-row${heat.hot.has(nid) ? ' hot' : ''}`, 'data-op-id': nid, onclick: () => onSelect(nid) },
        td(h('span', { class: 'mono muted' }, `#${nid}`)),
        td(h('button', { type: 'button', class: 'linkish' }, n ? n.nodeName : `#${nid}`)),
        td(heat.fmt(heat.self.get(nid)), 'num'),
        td(h('div', { class: 'share' }, h('span', { class: 'share-bar', style: `width:${Math.max(2, sh * 100).toFixed(1)}%;background:${heatFill(sh)}` }),
          h('span', { class: 'share-text' }, fmtPct(sh))), 'share-cell'));
    });

    // Function call sites of all operators, by CPU time (~ marks sampled estimates).
    const functionRows = [];
    for (const n of profMap.values()) {
      for (const f of Array.isArray(n.functions) ? n.functions : []) functionRows.push([n, f]);
    }
    functionRows.sort((a, b) => (b[1].cpuNanos || 0) - (a[1].cpuNanos || 0));
    const estimated = (yes, v) => (yes ? `~${v}` : v);
    const fnRows = functionRows.map(([n, f]) => h('tr', { class: 'function-row', 'data-op-id': n.id, onclick: () => onSelect(n.id) },
      td(h('button', { type: 'button', class: 'linkish' }, `#${n.id} ${n.name}`)),
      td(h('span', { class: 'mono small', title: f.expression }, f.expression)),
      td(estimated(f.cpuExtrapolated, fmtNs(f.cpuNanos)), 'num'),
      td(estimated(f.wallExtrapolated, fmtNs(f.wallNanos)), 'num'),
      td(fmtInt(f.rows), 'num'),
      td(fmtInt(f.vectors), 'num'),
      td(f.mode)));

    // Jobs and stages of this query.
    const jobIds = [...(sql.successJobIds || []), ...(sql.failedJobIds || []), ...(sql.runningJobIds || [])].sort((a, b) => a - b);
    const jobsById = new Map((jobs || []).map((j) => [j.jobId, j]));
    const stageLinks = [];
    if (jobs && stages) {
      const latest = new Map();
      for (const st of stages) {
        const cur = latest.get(st.stageId);
        if (!cur || st.attemptId > cur.attemptId) latest.set(st.stageId, st);
      }
      const stageIds = [...new Set(jobIds.flatMap((j) => (jobsById.get(j) || {}).stageIds || []))].sort((a, b) => a - b);
      for (const sid of stageIds) {
        const st = latest.get(sid);
        if (!st) continue;
        stageLinks.push(link(appHref(app, `/stage/${sid}/${st.attemptId}`), `${sid}`,
          { class: `chip stage-chip st-${String(st.status).toLowerCase()}`, title: `stage ${sid}.${st.attemptId} · ${st.status}` }));
      }
    }

    // What the advisor noticed, warnings first; a finding about an operator selects it.
    const findings = profile && Array.isArray(profile.findings) ? profile.findings : [];
    const findingRows = findings.map((f) => h('li', { class: `finding finding-${f.severity}`, 'data-rule': f.rule },
      h('span', { class: `badge ${f.severity === 'warn' ? 'badge-failed' : 'badge-neutral'}` }, f.severity),
      ' ',
      isNum(f.nodeId) && byId.has(f.nodeId)
        ? h('button', { type: 'button', class: 'linkish', onclick: () => onSelect(f.nodeId) }, f.message)
        : h('span', null, f.message)));

    const failed = sql.status === 'FAILED';
    const rows = profile && isNum(profile.rows) ? fmtInt(profile.rows) : null;
    const legend = h('div', { class: 'legend' },
      heat.source
        ? [h('span', null, 'Operator share of '), h('strong', null, heat.source), h('span', { class: 'legend-scale' },
          [0.01, 0.05, 0.15, 0.35, 0.7].map((v) => h('span', { class: 'legend-swatch', style: `background:${heatFill(v)}`, title: fmtPct(v) }))),
        h('span', { class: 'legend-hot' }, 'hot'), h('span', { class: 'muted' }, ' = dominating self time')]
        : h('span', { class: 'muted' }, 'No timing metrics to rank operators by.'),
      profNote ? h('span', { class: 'muted note' }, profNote) : null);

    const summaryFacts = facts([
      ['Status', statusBadge(sql.status)],
      ['Submitted', fmtDate(sql.submissionTime)],
      ['Duration', fmtMs(sql.duration)],
      profile && isNum(profile.durationNanos) ? ['Duration (qprof)', fmtNs(profile.durationNanos)] : null,
      rows ? ['Rows', rows] : null,
      ['Jobs', jobIds.length ? jobIdsCell(app, sql, jobsById) : DASH],
      stageLinks.length ? ['Stages', h('span', { class: 'chips' }, stageLinks)] : null,
      sql.queryId ? ['Query UUID', h('span', { class: 'mono small' }, sql.queryId), 'span2'] : null,
    ]);

    const title = `Query ${sql.id != null ? sql.id : id}`;
    return {
      title,
      crumbs: [...appCrumbs(app, info), [title, null]],
      nodes: [
        pageHeader(title, statusBadge(sql.status), sql.description || null, [
          h('span', { class: 'stat' }, h('span', { class: 'stat-k' }, 'Duration'), h('span', { class: 'stat-v' }, fmtMs(sql.duration))),
          rows ? h('span', { class: 'stat' }, h('span', { class: 'stat-k' }, 'Rows'), h('span', { class: 'stat-v' }, rows)) : null,
          h('span', { class: 'stat' }, h('span', { class: 'stat-k' }, 'Operators'), h('span', { class: 'stat-v' }, String(nodes.length))),
        ]),
        failed && sql.errorMessage ? h('div', { class: 'error-message-box banner' },
          h('span', { class: 'error-title' }, 'Failed: '), h('span', { class: 'banner-text' }, firstLine(sql.errorMessage))) : null,
        findingRows.length ? card('Findings', { id: 'findings' }, h('ul', { class: 'findings' }, findingRows)) : null,
        card('Physical plan', { id: 'plan', class: 'card plan-card' }, legend, graphEl),
        h('div', { class: 'two-col' },
          card('Top operators by self time', { id: 'top-operators' },
            topRows.length ? table({ class: 'data compact' }, ['', 'Operator', ['Self time', 'num'], 'Share'], topRows)
              : h('p', { class: 'muted' }, 'No operator timings.')),
          card('Selected operator', { class: 'card' }, details)),
        memoryChart(profile),
        fnRows.length ? card('Functions', { id: 'functions' },
          table({ class: 'data compact', id: 'function-table' },
            ['Operator', 'Call', ['CPU', 'num'], ['Wall', 'num'], ['Rows', 'num'], ['Vectors', 'num'], 'Timing'], fnRows)) : null,
        card('Summary', { id: 'query-summary' }, summaryFacts,
          failed || sql.errorMessage ? h('div', { class: 'error-message-box', id: 'query-error' },
            h('div', { class: 'error-title' }, 'Error'), h('pre', null, sql.errorMessage || 'The query failed.')) : null),
        profile && profile.sql ? card('SQL', { id: 'sql-text' }, h('pre', { class: 'code sql' }, profile.sql.trim())) : null,
        card('Plan description', { id: 'plan-description' }, sql.planDescription
          ? h('pre', { class: 'code plan' }, sql.planDescription.replace(/\s+$/, ''))
          : h('p', { class: 'muted' }, 'No plan description.')),
      ],
    };
  }

  // ------------------------------------------------------------------ memory over time

  // The executor's memory while a query ran (qprof's samples: heartbeats, stage starts, the
  // end), one line per region, with each stage's start marked.
  const MEMORY_LINES = [
    ['rssBytes', 'RSS', '#64748b'],
    ['heapBytes', 'heap', '#2563eb'],
    ['executionBytes', 'execution', '#dc2626'],
    ['storageBytes', 'storage', '#16a34a'],
  ];

  function memoryChart(profile) {
    const samples = (profile && profile.memory) || [];
    if (samples.length < 1) return null;
    const t0 = Math.min(profile.startEpochMillis || samples[0].epochMillis, samples[0].epochMillis);
    const tEnd = Math.max(samples[samples.length - 1].epochMillis, t0 + 1);
    const lines = MEMORY_LINES.filter(([k]) => samples.some((m) => m[k] > 0));
    const top = Math.max(1, ...samples.flatMap((m) => lines.map(([k]) => m[k] || 0)));
    const W = 720, H = 180, L = 70, R = 10, T = 10, B = 24;
    const x = (t) => L + ((t - t0) / (tEnd - t0)) * (W - L - R);
    const y = (v) => T + (1 - v / top) * (H - T - B);
    // stages starting in the same millisecond share one mark
    const byStart = new Map();
    for (const st of profile.stages || []) {
      const ts = (st.tasks || []).map((t) => t.startEpochMillis).filter((t) => t > 0);
      if (ts.length) byStart.set(Math.min(...ts), [...(byStart.get(Math.min(...ts)) || []), st.id]);
    }
    const starts = [...byStart.entries()].map(([t, ids]) =>
      [ids.length === 1 ? `stage ${ids[0]}` : `stages ${ids.join(', ')}`, t]);
    const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'memory-chart', width: W, height: H },
      s('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: '#cbd5e1' }),
      s('text', { x: L - 6, y: T + 8, 'text-anchor': 'end', 'font-size': 10 }, fmtBytes(top)),
      s('text', { x: L - 6, y: H - B, 'text-anchor': 'end', 'font-size': 10 }, '0'),
      s('text', { x: W - R, y: H - 6, 'text-anchor': 'end', 'font-size': 10 }, fmtMs(tEnd - t0)),
      starts.map(([label, t], i) => s('g', { class: 'stage-mark' },
        s('line', { x1: x(t), y1: T, x2: x(t), y2: H - B, stroke: '#94a3b8', 'stroke-dasharray': '3 3' }),
        s('text', { x: x(t) + 2, y: H - B - 2 - (i % 3) * 10, 'font-size': 9, fill: '#64748b' }, label))),
      lines.map(([k, label, colour]) => s('polyline', {
        class: `memory-line memory-${label}`, fill: 'none', stroke: colour, 'stroke-width': 1.5,
        points: samples.map((m) => `${x(m.epochMillis).toFixed(1)},${y(m[k] || 0).toFixed(1)}`).join(' '),
      }, s('title', null, label))));
    const legend = h('div', { class: 'legend' }, lines.map(([, label, colour]) =>
      h('span', { class: 'legend-item' }, h('span', { class: 'legend-swatch', style: `background:${colour}` }), ` ${label} `)),
    h('span', { class: 'muted' }, `${samples.length} sample${samples.length === 1 ? '' : 's'}; dashed: stage starts`));
    return card('Memory over time', { id: 'memory-chart' }, legend, h('div', { class: 'dag-scroll' }, svg));
  }

  // ------------------------------------------------------------------ page: stage

  const Q_LABEL = (q) => (q === 0 ? 'Min' : q === 1 ? 'Max' : q === 0.5 ? 'Median' : `${+(q * 100).toFixed(1)}th percentile`);

  function quantileTable(sum) {
    const qs = sum.quantiles || [];
    const rows = [];
    const get = (path) => path.split('.').reduce((o, k) => (o && o[k] != null ? o[k] : null), sum);
    const nonZero = (arr) => Array.isArray(arr) && arr.some((v) => v);
    const add = (label, path, fmt, always, path2, fmt2) => {
      const a = get(path);
      const b = path2 ? get(path2) : null;
      if (!Array.isArray(a)) return;
      if (!always && !nonZero(a) && !nonZero(b)) return;
      rows.push(h('tr', { class: 'quantile-row', 'data-metric': path },
        td(label),
        qs.map((_, i) => td(b ? `${fmt(a[i])} / ${fmt2(b[i])}` : fmt(a[i]), 'num'))));
    };
    const ns2ms = (v) => fmtMs(isNum(v) ? v / 1e6 : v);
    add('Duration', 'duration', fmtMs, true);
    add('Executor run time', 'executorRunTime', fmtMs, true);
    add('Executor CPU time', 'executorCpuTime', ns2ms, true);
    add('Scheduler delay', 'schedulerDelay', fmtMs, false);
    add('Task deserialization time', 'executorDeserializeTime', fmtMs, false);
    add('GC time', 'jvmGcTime', fmtMs, false);
    add('Result serialization time', 'resultSerializationTime', fmtMs, false);
    add('Getting result time', 'gettingResultTime', fmtMs, false);
    add('Peak execution memory', 'peakExecutionMemory', fmtBytes, true);
    add('Result size', 'resultSize', fmtBytes, true);
    add('Input size / records', 'inputMetrics.bytesRead', fmtBytes, true, 'inputMetrics.recordsRead', fmtInt);
    add('Output size / records', 'outputMetrics.bytesWritten', fmtBytes, false, 'outputMetrics.recordsWritten', fmtInt);
    add('Shuffle read size / records', 'shuffleReadMetrics.readBytes', fmtBytes, true, 'shuffleReadMetrics.readRecords', fmtInt);
    add('Shuffle fetch wait time', 'shuffleReadMetrics.fetchWaitTime', fmtMs, false);
    add('Shuffle remote reads', 'shuffleReadMetrics.remoteBytesRead', fmtBytes, false);
    add('Shuffle write size / records', 'shuffleWriteMetrics.writeBytes', fmtBytes, true, 'shuffleWriteMetrics.writeRecords', fmtInt);
    add('Shuffle write time', 'shuffleWriteMetrics.writeTime', ns2ms, false);
    add('Spill (memory)', 'memoryBytesSpilled', fmtBytes, false);
    add('Spill (disk)', 'diskBytesSpilled', fmtBytes, false);
    return h('div', { class: 'table-wrap' }, h('table', { class: 'data', id: 'quantiles' },
      h('thead', null, h('tr', null, h('th', null, 'Metric'), qs.map((q) => h('th', { class: 'num' }, Q_LABEL(q))))),
      h('tbody', null, rows)));
  }

  function firstLine(s) {
    const str = String(s || '');
    const i = str.indexOf('\n');
    return i < 0 ? str : str.slice(0, i);
  }

  async function pageStage(route) {
    const { app, id, attempt } = route;
    const base = `/stages/${enc(id)}/${enc(attempt)}`;
    const [info, st, sumR, jobs, sqls, env] = await Promise.all([
      optional(getJson(appUrl(app))),
      getJson(appUrl(app, `${base}?details=true&withSummaries=true`)),
      settle(getJson(appUrl(app, `${base}/taskSummary?quantiles=0.0,0.25,0.5,0.75,1.0`))),
      optional(getJson(appUrl(app, '/jobs'))),
      optional(getJson(appUrl(app, '/sql?details=false&planDescription=false&length=1000'))),
      optional(getJson(appUrl(app, '/environment'))),
    ]);
    const stageId = st.stageId != null ? st.stageId : id;
    const attemptId = st.attemptId != null ? st.attemptId : attempt;

    // Which job and query ran this stage.
    const ownerJobs = (jobs || []).filter((j) => (j.stageIds || []).includes(Number(stageId)));
    const ownerSql = (sqls || []).filter((q) => ownerJobs.some((j) =>
      (q.successJobIds || []).includes(j.jobId) || (q.failedJobIds || []).includes(j.jobId) || (q.runningJobIds || []).includes(j.jobId)));

    const dur = spanMs(st.submissionTime, st.completionTime);
    const summary = facts([
      ['Status', statusBadge(st.status)],
      ['Submitted', fmtDate(st.submissionTime)],
      ['Duration', dur == null ? DASH : fmtMs(dur)],
      ['Tasks', tasksCell(st.numCompleteTasks, st.numFailedTasks, st.numTasks, st.numKilledTasks)],
      ['Executor run time', fmtMs(st.executorRunTime)],
      ['Executor CPU time', isNum(st.executorCpuTime) ? fmtMs(st.executorCpuTime / 1e6) : DASH],
      ['GC time', fmtMs(st.jvmGcTime)],
      ['Peak execution memory', fmtBytes(st.peakExecutionMemory)],
      ['Input', bytesRecords(st.inputBytes, st.inputRecords)],
      ['Output', bytesRecords(st.outputBytes, st.outputRecords)],
      ['Shuffle read', bytesRecords(st.shuffleReadBytes, st.shuffleReadRecords)],
      ['Shuffle write', bytesRecords(st.shuffleWriteBytes, st.shuffleWriteRecords)],
      st.memoryBytesSpilled || st.diskBytesSpilled ? ['Spill (memory / disk)', `${fmtBytes(st.memoryBytesSpilled)} / ${fmtBytes(st.diskBytesSpilled)}`] : null,
      ownerJobs.length ? ['Jobs', ownerJobs.map((j) => j.jobId).join(', ')] : null,
      ownerSql.length ? ['Query', ownerSql.map((q, i) => [i ? ', ' : '', link(appHref(app, `/sql/${q.id}`), `Query ${q.id}`)])] : null,
      ['Scheduling pool', st.schedulingPool || DASH],
    ]);

    let quantiles;
    if (sumR.value) {
      quantiles = quantileTable(sumR.value);
    } else {
      const e = sumR.error;
      quantiles = h('p', { id: 'quantiles-unavailable', class: 'notice' },
        e && e.status === 404 ? e.message : `Task summary unavailable: ${e ? e.message : 'no data'}`);
    }

    const tasks = Object.values(st.tasks || {}).sort((a, b) => a.taskId - b.taskId);
    const taskRows = tasks.map((t) => {
      const m = t.taskMetrics || {};
      const err = t.errorMessage || '';
      return h('tr', { class: `task-row${t.status === 'FAILED' ? ' failed' : ''}`, 'data-task-id': t.taskId },
        td(String(t.taskId), 'num'),
        td(String(t.index), 'num'),
        td(String(t.attempt != null ? t.attempt : 0), 'num'),
        td(statusBadge(t.status)),
        td([h('span', { class: 'mono' }, t.executorId || DASH), t.host ? h('span', { class: 'muted' }, ` ${t.host}`) : null],
          'nowrap', t.taskLocality ? `locality: ${t.taskLocality}` : null),
        td(fmtDate(t.launchTime), 'nowrap'),
        td(fmtMs(t.duration), 'num'),
        td(isNum(m.executorCpuTime) ? fmtMs(m.executorCpuTime / 1e6) : DASH, 'num'),
        td(m.jvmGcTime ? fmtMs(m.jvmGcTime) : DASH, 'num'),
        td(m.peakExecutionMemory ? fmtBytes(m.peakExecutionMemory) : DASH, 'num'),
        td(err ? h('details', { class: 'err' }, h('summary', null, firstLine(err)), h('pre', null, err)) : '', 'error-cell'));
    });

    // The stage's work by executor, with each executor's memory peaks while it ran.
    const rust = isRustApp(env);
    const peakCols = (rust ? RUST_PEAK_METRICS : PEAK_METRICS);
    const execEntries = Object.entries(st.executorSummary || {}).sort(([a], [b]) => a.localeCompare(b));
    const execRows = execEntries.map(([eid, e]) => {
      const pm = e.peakMemoryMetrics || {};
      return h('tr', { class: 'stage-executor-row', 'data-executor-id': eid },
        td(h('span', { class: 'mono' }, eid)),
        td(`${fmtInt(e.succeededTasks || 0)} / ${fmtInt(e.failedTasks || 0)}`, 'num'),
        td(fmtMs(e.taskTime), 'num'),
        td(fmtBytes(e.inputBytes), 'num'),
        td(fmtBytes(e.diskBytesSpilled), 'num'),
        peakCols.map(([k]) => td(isNum(pm[k]) ? fmtBytes(pm[k]) : DASH, 'num')));
    });
    const dist = (st.executorMetricsDistributions || {});
    const distPeaks = dist.peakMemoryMetrics || {};
    const distRows = Object.entries(distPeaks).filter(([, vs]) => Array.isArray(vs) && vs.some((v) => v))
      .map(([k, vs]) => h('tr', { class: 'executor-quantile-row', 'data-metric': k },
        td(rust && RUST_REGIONS[k] ? [RUST_REGIONS[k], h('div', { class: 'muted small mono' }, k)] : k, rust ? null : 'mono'),
        vs.map((v) => td(fmtBytes(v), 'num'))));
    const execCard = execRows.length ? card('Executors', { id: 'stage-executors' },
      table({ class: 'data compact' },
        ['Executor', ['Tasks done / failed', 'num'], ['Task time', 'num'], ['Input', 'num'], ['Spill (disk)', 'num'],
          ...peakCols.map(([k, label]) => [label, 'num', k])], execRows),
      distRows.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'data compact', id: 'executor-quantiles' },
        h('thead', null, h('tr', null, h('th', null, 'Peak memory across executors'),
          (dist.quantiles || []).map((q) => h('th', { class: 'num' }, Q_LABEL(q))))),
        h('tbody', null, distRows))) : null) : null;

    const title = `Stage ${stageId}.${attemptId}`;
    return {
      title,
      crumbs: [...appCrumbs(app, info), ['Stages', appHref(app, '/stages')], [title, null]],
      nodes: [
        pageHeader(title, statusBadge(st.status), st.name || null),
        st.failureReason ? h('div', { class: 'error-message-box', id: 'stage-failure' },
          h('div', { class: 'error-title' }, 'Failure reason'), h('pre', null, st.failureReason)) : null,
        card('Summary', { id: 'stage-summary' }, summary,
          st.details ? h('details', { class: 'stack' }, h('summary', null, 'Call site'), h('pre', null, st.details)) : null),
        card('Task metrics', { id: 'task-metrics' }, quantiles),
        execCard,
        card(`Tasks (${tasks.length})`, { id: 'tasks' }, table({ id: 'tasks-table' },
          [['Task', 'num'], ['Index', 'num'], ['Attempt', 'num'], 'Status', 'Executor', 'Launched',
            ['Duration', 'num'], ['CPU time', 'num'], ['GC time', 'num'], ['Peak exec. memory', 'num'], 'Error'],
          taskRows, 'No tasks recorded')),
      ],
    };
  }

  // ------------------------------------------------------------------ page: executors

  // Peak memory metrics shown in the executors table (when any executor reports them).
  const PEAK_METRICS = [
    ['JVMHeapMemory', 'Peak JVM heap'],
    ['JVMOffHeapMemory', 'Peak JVM off-heap'],
    ['OffHeapExecutionMemory', 'Peak off-heap exec.'],
    ['ProcessTreeJVMRSSMemory', 'Peak RSS'],
  ];
  // A Rust executor (qprof on DataFusion) fills Spark's slots with its own regions: these are
  // their names (see the README's executor-memory table).
  const RUST_PEAK_METRICS = [
    ['JVMHeapMemory', 'Peak heap'],
    ['OffHeapExecutionMemory', 'Peak execution'],
    ['OffHeapStorageMemory', 'Peak storage'],
    ['ProcessTreeJVMRSSMemory', 'Peak RSS'],
  ];
  const RUST_REGIONS = {
    JVMHeapMemory: 'heap (allocator in use)',
    OffHeapExecutionMemory: 'execution (memory pools)',
    OffHeapStorageMemory: 'storage (caches)',
    OffHeapUnifiedMemory: 'unified (execution + storage)',
    MappedPoolMemory: 'file-backed resident',
    ProcessTreeJVMRSSMemory: 'RSS',
    ProcessTreeJVMVMemory: 'virtual size',
  };
  // Whether the application's executors are qprof's (its environment names no JVM).
  const isRustApp = (env) => /qprof/.test(((env || {}).runtime || {}).javaVersion || '');

  async function pageExecutors(route) {
    const { app } = route;
    const [info, execs, env] = await Promise.all([
      optional(getJson(appUrl(app))),
      getJson(appUrl(app, '/allexecutors')),
      optional(getJson(appUrl(app, '/environment'))),
    ]);
    const list = execs || [];
    const rust = isRustApp(env);
    const peaks = (rust ? RUST_PEAK_METRICS : PEAK_METRICS).filter(([k]) => list.some((e) => e.peakMemoryMetrics && isNum(e.peakMemoryMetrics[k])));
    const sum = (k) => list.reduce((a, e) => a + (isNum(e[k]) ? e[k] : 0), 0);
    const tasksText = (done, failed, total, active) => [
      h('span', null, fmtInt(done)), ' / ',
      failed ? h('span', { class: 'failed-text' }, fmtInt(failed)) : '0', ' / ', fmtInt(total),
      active ? h('span', { class: 'muted' }, ` (${fmtInt(active)} running)`) : null];
    const rows = list.map((e) => {
      const pm = e.peakMemoryMetrics || {};
      return h('tr', { class: `executor-row${e.isActive ? '' : ' dead'}`, 'data-executor-id': e.id },
        td(h('span', { class: 'mono' }, e.id)),
        td(h('span', { class: 'mono' }, e.hostPort || DASH)),
        td(e.isActive ? h('span', { class: 'badge badge-ok' }, 'Active') : h('span', { class: 'badge badge-neutral' }, 'Dead')),
        td(fmtInt(e.totalCores), 'num'),
        td(tasksText(e.completedTasks, e.failedTasks, e.totalTasks, e.activeTasks), 'num'),
        td([fmtMs(e.totalDuration), e.totalGCTime ? h('div', { class: 'muted small' }, `${fmtMs(e.totalGCTime)} GC`) : null], 'num'),
        td(fmtBytes(e.totalInputBytes), 'num'),
        td(fmtBytes(e.totalShuffleRead), 'num'),
        td(fmtBytes(e.totalShuffleWrite), 'num'),
        td([fmtBytes(e.maxMemory), h('div', { class: 'muted small' }, `${fmtBytes(e.memoryUsed)} used`)], 'num', 'storage memory: max / used'),
        peaks.map(([k]) => td(isNum(pm[k]) ? fmtBytes(pm[k]) : DASH, 'num')));
    });
    const active = list.filter((e) => e.isActive).length;
    const foot = list.length > 1 ? h('tfoot', null, h('tr', { class: 'total-row' },
      td('Total'), td(''), td(`${active} active`), td(fmtInt(sum('totalCores')), 'num'),
      td(tasksText(sum('completedTasks'), sum('failedTasks'), sum('totalTasks'), sum('activeTasks')), 'num'),
      td(fmtMs(sum('totalDuration')), 'num'), td(fmtBytes(sum('totalInputBytes')), 'num'),
      td(fmtBytes(sum('totalShuffleRead')), 'num'), td(fmtBytes(sum('totalShuffleWrite')), 'num'),
      td(fmtBytes(sum('maxMemory')), 'num'), peaks.map(() => td('')))) : null;
    const t = table({ id: 'executors-table' },
      ['Executor', 'Address', 'Status', ['Cores', 'num'], ['Tasks done / failed / total', 'num'], ['Task time', 'num'],
        ['Input', 'num'], ['Shuffle read', 'num'], ['Shuffle write', 'num'], ['Max memory', 'num', 'storage memory'],
        ...peaks.map(([k, label]) => [label, 'num', k])],
      rows, 'No executors');
    if (foot) t.querySelector('table').append(foot);

    // Every peak executor metric that some executor reports as non-zero.
    const keys = [];
    for (const e of list) {
      for (const [k, v] of Object.entries(e.peakMemoryMetrics || {})) if (v && !keys.includes(k)) keys.push(k);
    }
    const fmtPeak = (k, v) => (!isNum(v) ? DASH : /Count$/.test(k) ? fmtInt(v) : /Time$/.test(k) ? fmtMs(v) : fmtBytes(v));
    const peakCard = keys.length ? card('Peak executor metrics', { id: 'peak-metrics' }, table({ id: 'peak-table', class: 'data compact' },
      ['Metric', ...list.map((e) => [e.id, 'num'])],
      keys.map((k) => h('tr', { class: 'peak-row' },
        td(rust && RUST_REGIONS[k] ? [RUST_REGIONS[k], h('div', { class: 'muted small mono' }, k)] : k, rust ? null : 'mono'),
        list.map((e) => td(fmtPeak(k, (e.peakMemoryMetrics || {})[k]), 'num')))))) : null;

    return {
      title: 'Executors',
      crumbs: [...appCrumbs(app, info), ['Executors', null]],
      nodes: [
        pageHeader('Executors', null, `${list.length} executor${list.length === 1 ? '' : 's'}, ${active} active`),
        card(null, null, t),
        peakCard,
      ],
    };
  }

  // ------------------------------------------------------------------ router

  // A parameter after the route, e.g. the operator in #/app/A/sql/3?node=7.
  function routeParam(name) {
    const q = location.hash.indexOf('?');
    return q < 0 ? null : new URLSearchParams(location.hash.slice(q + 1)).get(name);
  }

  function parseRoute() {
    const raw = location.hash.replace(/^#\/?/, '').replace(/[?].*$/, '');
    const parts = raw.split('/').filter((p) => p !== '').map((p) => {
      try {
        return decodeURIComponent(p);
      } catch (_) {
        return p;
      }
    });
    if (parts.length === 0) return { page: 'apps' };
    if (parts[0] === 'app' && parts.length >= 2) {
      const app = parts[1];
      if (parts.length === 2) return { page: 'app', app };
      if (parts.length === 3 && parts[2] === 'stages') return { page: 'app', app, focus: 'stages' };
      if (parts.length === 3 && parts[2] === 'executors') return { page: 'executors', app };
      if (parts.length === 4 && parts[2] === 'sql') return { page: 'query', app, id: parts[3], node: routeParam('node') };
      if ((parts.length === 4 || parts.length === 5) && parts[2] === 'stage') {
        return { page: 'stage', app, id: parts[3], attempt: parts[4] != null ? parts[4] : '0' };
      }
    }
    return { page: 'notfound', raw };
  }

  const PAGES = {
    apps: pageApps,
    app: pageApp,
    query: pageQuery,
    stage: pageStage,
    executors: pageExecutors,
    notfound: async (route) => {
      throw new HttpError(0, `Unknown page: #/${route.raw}`, null);
    },
  };

  function baseCrumbs(route) {
    const c = [['Applications', '#/']];
    if (route.app) c.push([route.app, appHref(route.app)]);
    return c;
  }

  function setCrumbs(crumbs) {
    const nav = document.getElementById('crumbs');
    if (!nav) return;
    const items = [];
    crumbs.forEach(([label, href], i) => {
      if (i) items.push(h('span', { class: 'sep', 'aria-hidden': 'true' }, '›'));
      const last = i === crumbs.length - 1;
      items.push(href && !last ? link(href, label) : h('span', { class: 'current', 'aria-current': last ? 'page' : null }, label));
    });
    nav.replaceChildren(...items);
  }

  let renderSeq = 0;

  async function render() {
    const seq = ++renderSeq;
    const route = parseRoute();
    delete document.body.dataset.ready;
    const main = document.getElementById('page');
    main.dataset.page = route.page;
    main.replaceChildren(h('p', { class: 'loading' }, 'Loading…'));
    setCrumbs(baseCrumbs(route));
    let content;
    try {
      content = await PAGES[route.page](route);
    } catch (e) {
      if (!(e instanceof HttpError)) console.error(e);
      content = { title: 'Error', crumbs: baseCrumbs(route), nodes: [errorBox(e)] };
    }
    if (seq !== renderSeq) return;
    try {
      main.replaceChildren(...content.nodes.filter(Boolean));
      setCrumbs(content.crumbs || baseCrumbs(route));
      document.title = content.title ? `${content.title} · qprof` : 'qprof';
      window.scrollTo(0, 0);
      if (content.after) content.after();
    } catch (e) {
      console.error(e);
      main.replaceChildren(errorBox(e));
    }
    document.body.dataset.ready = '1';
  }

  window.addEventListener('hashchange', render);
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', render);
  else render();
})();
