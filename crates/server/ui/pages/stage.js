// qprof history server UI, page: a stage attempt (#/app/{app}/stage/{id}/{attempt}): summary,
// task quantiles, executors, tasks.
'use strict';

(function () {
  const { enc, getJson, optional, settle, appUrl, appHref, DASH, isNum, fmtBytes, fmtDate, fmtInt, fmtMs,
    spanMs, firstLine, h, link, td, statusBadge, tasksCell, table, card, facts, pageHeader, appCrumbs,
    PEAK_METRICS, RUST_PEAK_METRICS, RUST_REGIONS, isRustApp } = window.qprof;

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

  function bytesRecords(bytes, records) {
    if (!isNum(bytes) && !isNum(records)) return DASH;
    if (!bytes && !records) return DASH;
    return `${fmtBytes(bytes)} / ${fmtInt(records)}`;
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

  window.qprof.pages.stage = pageStage;
})();
