// qprof history server UI, shared by every page: DOM helpers, fetching, formatting and the
// widgets several pages use. Loaded first; publishes them as window.qprof.
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

  // One line of a possibly multi-line text (error messages, SQL).
  function firstLine(s) {
    const str = String(s || '');
    const i = str.indexOf('\n');
    return i < 0 ? str : str.slice(0, i);
  }

  // The job ids of a query, failed ones marked (application and query pages).
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

  // ------------------------------------------------------------------ executor memory

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

  // ------------------------------------------------------------------ published

  // What the page scripts take; each registers its page functions in `pages`, by route name.
  window.qprof = {
    API, QPROF, enc, SVGNS, h, s, link, HttpError, getJson, optional, settle, appUrl, appHref, DASH, isNum,
    fmtInt, fmtBytes, fmtMs, fmtNs, fmtPct, parseDate, fmtDate, spanMs, firstLine, statusBadge, table, td,
    card, facts, errorBox, pageHeader, appName, appCrumbs, tasksCell, jobIdsCell, PEAK_METRICS,
    RUST_PEAK_METRICS, RUST_REGIONS, isRustApp,
    pages: {},
  };
})();
