// qprof history server UI: a query's task timeline (Spark's event timeline): each task a bar
// from its launch to its end, in lanes per executor, coloured by stage; failed tasks red.
// Read from Spark's REST task lists, so it draws Spark's logs as well as qprof's.
'use strict';

(function () {
  const { getJson, appUrl, appHref, h, s, card, parseDate, fmtMs, fmtDate } = window.qprof;

  // Tasks asked per stage; a stage with more shows its first ones and says so.
  const MAX_TASKS_PER_STAGE = 2000;
  const STAGE_COLOURS = ['#2563eb', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#65a30d', '#475569'];
  const stageColour = (id) => STAGE_COLOURS[id % STAGE_COLOURS.length];
  // Epoch milliseconds of a Spark date (or null).
  const millis = (v) => {
    const d = parseDate(v);
    return d ? d.getTime() : null;
  };

  // Tasks as {stage, attempt, task, index, executor, start, end, status}, from the stages'
  // task lists (a task still running ends at `now`).
  async function loadTasks(app, stages, now) {
    const lists = await Promise.all(stages.map((st) =>
      getJson(appUrl(app, `/stages/${st.stageId}/${st.attemptId}/taskList?length=${MAX_TASKS_PER_STAGE}`))
        .then((tasks) => ({ st, tasks }), () => ({ st, tasks: [] }))));
    const out = [];
    let truncated = false;
    for (const { st, tasks } of lists) {
      if (tasks.length >= MAX_TASKS_PER_STAGE && st.numTasks > tasks.length) truncated = true;
      for (const t of tasks) {
        const start = millis(t.launchTime);
        if (start == null) continue;
        const end = typeof t.duration === 'number' ? start + t.duration : now;
        out.push({ stage: st.stageId, attempt: st.attemptId, task: t.taskId, index: t.index, executor: String(t.executorId),
          start, end: Math.max(end, start), status: String(t.status || '') });
      }
    }
    return { tasks: out, truncated };
  }

  // Lanes per executor: each task in the first lane of its executor free at its start.
  function packLanes(tasks) {
    const byExecutor = new Map();
    for (const t of [...tasks].sort((a, b) => a.start - b.start || a.end - b.end)) {
      if (!byExecutor.has(t.executor)) byExecutor.set(t.executor, []);
      const lanes = byExecutor.get(t.executor);
      let lane = lanes.findIndex((end) => end <= t.start);
      if (lane < 0) {
        lane = lanes.length;
        lanes.push(0);
      }
      lanes[lane] = t.end;
      t.lane = lane;
    }
    const executors = [...byExecutor.keys()].sort((a, b) => (a === 'driver' ? -1 : b === 'driver' ? 1 : a.localeCompare(b, 'en', { numeric: true })));
    let row = 0;
    const firstRow = new Map();
    for (const e of executors) {
      firstRow.set(e, row);
      row += byExecutor.get(e).length;
    }
    for (const t of tasks) t.row = firstRow.get(t.executor) + t.lane;
    return { executors, firstRow, lanes: byExecutor, rows: row };
  }

  // The timeline card of a query's stages (`stages`: the latest attempt of each), or null
  // when they have no tasks.
  async function taskTimeline(app, stages, queryStart, criticalTasks) {
    const critical = criticalTasks || new Set();
    if (!stages.length) return null;
    const now = Date.now();
    const { tasks, truncated } = await loadTasks(app, stages, now);
    if (!tasks.length) return null;
    const layout = packLanes(tasks);
    const t0 = Math.min(queryStart != null ? queryStart : Infinity, ...tasks.map((t) => t.start));
    const t1 = Math.max(t0 + 1, ...tasks.map((t) => t.end));
    const W = 960, L = 110, R = 12, T = 18, ROW = 14, B = 22;
    const H = T + layout.rows * ROW + B;
    const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
    const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => t0 + f * (t1 - t0));
    const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'task-timeline' },
      ticks.map((t) => s('g', { class: 'tick' },
        s('line', { x1: x(t), y1: T - 4, x2: x(t), y2: H - B, stroke: '#e2e8f0' }),
        s('text', { x: x(t), y: H - 6, 'text-anchor': 'middle', 'font-size': 10, fill: '#64748b' }, `+${fmtMs(t - t0)}`))),
      layout.executors.map((e) => s('g', { class: 'executor-lanes', 'data-executor': e },
        s('text', { x: L - 6, y: T + layout.firstRow.get(e) * ROW + 10, 'text-anchor': 'end', 'font-size': 10 },
          e === 'driver' ? 'driver' : `executor ${e}`),
        s('line', { x1: L, y1: T + layout.firstRow.get(e) * ROW, x2: W - R, y2: T + layout.firstRow.get(e) * ROW, stroke: '#cbd5e1' }))),
      tasks.map((t) => {
        const failed = /FAILED|KILLED/.test(t.status);
        const onPath = critical.has(t.task);
        const width = Math.max(1, x(t.end) - x(t.start));
        return s('a', { href: appHref(app, `/stage/${t.stage}/${t.attempt}`) },
          s('rect', {
            class: `task-bar${failed ? ' task-failed' : ''}${onPath ? ' critical' : ''}`, 'data-stage': t.stage, 'data-task': t.task,
            stroke: onPath ? '#0f172a' : null, 'stroke-width': onPath ? 1.5 : null,
            x: x(t.start).toFixed(1), y: T + t.row * ROW + 2, width: width.toFixed(1), height: ROW - 4, rx: 2,
            fill: failed ? '#dc2626' : stageColour(t.stage),
          }, s('title', null, `stage ${t.stage}.${t.attempt} · task ${t.task} (partition ${t.index}) · ${t.status}\n`
            + `${fmtDate(t.start)} · ${fmtMs(t.end - t.start)}`)));
      }));
    const stageIds = [...new Set(tasks.map((t) => t.stage))].sort((a, b) => a - b);
    const legend = h('div', { class: 'legend' },
      stageIds.map((id) => h('span', { class: 'legend-item' },
        h('span', { class: 'legend-swatch', style: `background:${stageColour(id)}` }), ` stage ${id} `)),
      tasks.some((t) => critical.has(t.task))
        ? h('span', { class: 'legend-item' }, h('span', { class: 'legend-swatch critical-swatch', style: 'background:#fff;border:1.5px solid #0f172a' }), ' critical path ') : null,
      tasks.some((t) => /FAILED|KILLED/.test(t.status))
        ? h('span', { class: 'legend-item' }, h('span', { class: 'legend-swatch', style: 'background:#dc2626' }), ' failed ') : null,
      h('span', { class: 'muted' }, `${tasks.length} task${tasks.length === 1 ? '' : 's'} over ${fmtMs(t1 - t0)}`
        + (truncated ? `; the first ${MAX_TASKS_PER_STAGE} of each stage` : '')));
    return card('Task timeline', { id: 'task-timeline' }, legend, h('div', { class: 'dag-scroll' }, svg));
  }

  window.qprof.timeline = { taskTimeline };
})();
