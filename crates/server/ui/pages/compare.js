// qprof history server UI, page: two runs of a query compared operator by operator
// (#/compare?before=APP:SQLID&after=APP:SQLID&threshold=PCT), as `qprof diff` does: each
// operator of the second run with its twin in the first, the change in self CPU, rows, peak
// memory and spill, regressions over the threshold marked; and a differential flame graph.
'use strict';

(function () {
  const { API, QPROF, enc, getJson, optional, appHref, h, td, table, card, facts, pageHeader, fmtInt, fmtBytes,
    fmtNs, fmtMs, isNum, DASH } = window.qprof;

  const DEFAULT_THRESHOLD = 10;

  function params() {
    const q = location.hash.indexOf('?');
    return new URLSearchParams(q < 0 ? '' : location.hash.slice(q + 1));
  }

  function go(next) {
    const p = params();
    for (const [k, v] of Object.entries(next)) {
      if (v == null || v === '') p.delete(k);
      else p.set(k, v);
    }
    location.hash = `#/compare?${p.toString()}`;
  }

  // "APP:SQLID" as [app, id]; the app id may itself hold colons.
  function splitSide(spec) {
    if (!spec) return [null, null];
    const at = spec.lastIndexOf(':');
    return at < 0 ? [spec, null] : [spec.slice(0, at), spec.slice(at + 1)];
  }

  // A side's pickers: an application, then one of its queries.
  async function picker(key, spec, apps) {
    const [app, id] = splitSide(spec);
    const queries = app ? (await optional(getJson(`${API}/${enc(app)}/sql?details=false&length=100000`))) || [] : [];
    const appSelect = h('select', { id: `${key}-app`, onchange: (e) => go({ [key]: e.target.value ? `${e.target.value}:0` : '' }) },
      h('option', { value: '' }, '(choose an application)'),
      apps.map((a) => h('option', { value: a.id, selected: a.id === app }, `${a.name || a.id} · ${a.id}`)));
    const querySelect = h('select', { id: `${key}-query`, disabled: !app, onchange: (e) => go({ [key]: `${app}:${e.target.value}` }) },
      queries.map((q) => h('option', { value: q.id, selected: String(q.id) === String(id) },
        `${q.id} · ${String(q.description || '').slice(0, 60)} (${fmtMs(q.duration)})`)));
    return h('div', { class: 'compare-side' }, h('label', { for: `${key}-app` }, key === 'before' ? 'First run' : 'Second run'),
      appSelect, querySelect);
  }

  function change(pair, render) {
    const [a, b] = pair;
    if (a === b) return render(b);
    const pct = a > 0 ? ` (${b >= a ? '+' : ''}${(((b - a) * 100) / a).toFixed(0)}%)` : '';
    return `${render(a)} → ${render(b)}${pct}`;
  }

  const MARKS = { same: '', moved: '>', shape: '~', new: '+' };
  const MATCHED = { same: 'same operator', moved: 'moved', shape: 'same place', new: 'new' };

  function operatorRows(diff, afterApp, afterId) {
    return diff.operators.map((o) => h('tr', {
      class: `compare-row${o.regressed ? ' regressed' : ''}`, 'data-op-id': o.id, 'data-matched': o.matched,
    },
    td(o.regressed ? h('span', { class: 'badge badge-failed' }, '!') : MARKS[o.matched] || ''),
    td(h('a', { href: appHref(afterApp, `/sql/${enc(afterId)}?node=${o.id}`) }, `#${o.id} ${o.name}`)),
    td(isNum(o.beforeId) ? `#${o.beforeId}` : DASH, 'num'),
    td(MATCHED[o.matched] || o.matched),
    td(fmtNs(o.selfCpuNanos[0]), 'num'),
    td(fmtNs(o.selfCpuNanos[1]), 'num'),
    td(isNum(o.selfCpuChangePercent) ? `${o.selfCpuChangePercent >= 0 ? '+' : ''}${o.selfCpuChangePercent.toFixed(0)}%` : DASH, 'num'),
    td(change(o.outputRows, fmtInt), 'num'),
    td(change(o.peakMemoryBytes, fmtBytes), 'num'),
    td(o.spillWrittenBytes[0] || o.spillWrittenBytes[1] ? change(o.spillWrittenBytes, fmtBytes) : DASH, 'num')));
  }

  async function pageCompare() {
    const p = params();
    const before = p.get('before');
    const after = p.get('after') || (before ? before : null);
    const threshold = p.get('threshold') || String(DEFAULT_THRESHOLD);
    const apps = (await optional(getJson(API))) || [];
    const pickers = h('div', { class: 'compare-pickers' }, await picker('before', before, apps), await picker('after', after, apps),
      h('div', { class: 'compare-side' }, h('label', { for: 'threshold' }, 'Regression over (%)'),
        h('input', { id: 'threshold', type: 'number', min: 0, step: 1, value: threshold,
          onchange: (e) => go({ threshold: e.target.value }) })));
    const title = 'Compare runs';
    const head = pageHeader(title, null, 'Two runs of a query, operator by operator: each operator of the second run with its twin in the first.');
    const crumbs = [['Applications', '#/'], [title, null]];
    const [beforeApp, beforeId] = splitSide(before);
    const [afterApp, afterId] = splitSide(after);
    if (!beforeApp || beforeId == null || !afterApp || afterId == null) {
      return { title, crumbs, nodes: [head, card('Runs', { id: 'compare-pickers' }, pickers)] };
    }
    const diff = await getJson(`${QPROF.replace(/\/applications$/, '')}/compare?before=${enc(before)}&after=${enc(after)}&threshold=${enc(threshold)}`);
    const regressions = diff.operators.filter((o) => o.regressed).length;
    const summary = facts([
      ['First run', h('a', { href: appHref(beforeApp, `/sql/${enc(beforeId)}`) }, `${beforeApp} · query ${beforeId}`)],
      ['Second run', h('a', { href: appHref(afterApp, `/sql/${enc(afterId)}`) }, `${afterApp} · query ${afterId}`)],
      ['Duration', change(diff.durationNanos, fmtNs)],
      ['Regressions', h('span', { id: 'regression-count', class: regressions ? 'bad' : null },
        `${regressions} operator${regressions === 1 ? '' : 's'} over ${diff.thresholdPercent}%`)],
      diff.sql && diff.sql[0] !== diff.sql[1] ? ['SQL', 'the two runs ran different SQL', 'span2'] : null,
    ]);
    const flameUrl = `${QPROF.replace(/\/applications$/, '')}/compare/flamegraph.svg?before=${enc(before)}&after=${enc(after)}`;
    const flameGraph = card('Flame graph', { id: 'compare-flame-graph' },
      h('div', { class: 'legend' },
        h('span', { class: 'muted' }, 'The second run\'s self CPU by operator and function; red grew since the first run, blue shrank. '),
        h('a', { href: flameUrl, target: '_blank', id: 'compare-flame-graph-link' }, 'Open on its own')),
      h('object', { data: flameUrl, type: 'image/svg+xml', class: 'flame-graph' }, 'Differential flame graph'));
    const gone = diff.gone.length
      ? card('Only in the first run', { id: 'compare-gone' }, h('ul', null, diff.gone.map((g) => h('li', { 'data-op-id': g.id }, `#${g.id} ${g.name}`))))
      : null;
    return {
      title,
      crumbs,
      nodes: [
        head,
        card('Runs', { id: 'compare-pickers' }, pickers),
        card('Summary', { id: 'compare-summary' }, summary),
        card('Operators', { id: 'compare-operators' },
          h('p', { class: 'muted' }, '! self CPU grew over the threshold (and by 1 ms or more) · > found at another place · ~ matched by place · + new'),
          table({ class: 'data compact', id: 'compare-table' },
            ['', 'Operator', ['Was', 'num'], 'Matched', ['Self CPU before', 'num'], ['after', 'num'], ['Change', 'num'],
              ['Rows', 'num'], ['Peak memory', 'num'], ['Spilled', 'num']],
            operatorRows(diff, afterApp, afterId))),
        gone,
        flameGraph,
      ],
    };
  }

  window.qprof.pages.compare = pageCompare;
})();
