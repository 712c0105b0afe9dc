// qprof history server UI, page: an application's executors (#/app/{app}/executors).
'use strict';

(function () {
  const { getJson, optional, appUrl, DASH, isNum, fmtBytes, fmtInt, fmtMs, h, td, table, card, pageHeader,
    appCrumbs, PEAK_METRICS, RUST_PEAK_METRICS, RUST_REGIONS, isRustApp } = window.qprof;

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

  window.qprof.pages.executors = pageExecutors;
})();
