// qprof history server UI, page: an application's queries and stages (#/app/{app}), and
// what a run's own UI has running now.
'use strict';

(function () {
  const { getJson, optional, appUrl, appHref, DASH, fmtBytes, fmtDate, fmtInt, fmtMs, spanMs, firstLine, h,
    link, td, statusBadge, tasksCell, table, card, facts, pageHeader, appName, appCrumbs, jobIdsCell } = window.qprof;

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
      td(progressCell(q), 'progress-cell'),
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
      table({ id: 'live-table' }, [['Query', 'num'], 'SQL', ['Running for', 'num'], 'Progress', ['Tasks done', 'num'],
        ['Rows scanned', 'num'], ['Bytes read', 'num']], rows, 'No query running'),
    ];
  }

  // A bar of the fraction done, its percentage and the time left (while there is a rate).
  function progressCell(q) {
    const fraction = Math.min(Math.max(Number(q.progress) || 0, 0), 1);
    const percent = `${Math.floor(fraction * 100)} %`;
    const left = q.etaMillis == null ? '' : ` · ${fmtMs(q.etaMillis)} left`;
    return h('span', { class: 'live-progress', 'data-progress': String(fraction) },
      h('progress', { max: '1', value: String(fraction) }),
      ` ${percent}${left}`);
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

  window.qprof.pages.app = pageApp;
})();
