// qprof history server UI, page: a query (#/app/{app}/sql/{id}): findings, the plan DAG with
// self-time heat, the selected operator's metrics, functions, the task timeline, the flame
// graph, memory over time, SQL and plan; a link to compare it with another run.
'use strict';

(function () {
  const { QPROF, enc, getJson, optional, settle, appUrl, appHref, DASH, isNum, fmtBytes, fmtDate, fmtInt,
    fmtMs, fmtNs, fmtPct, parseDate, firstLine, h, s, link, td, statusBadge, table, card, facts, pageHeader, appCrumbs,
    jobIdsCell } = window.qprof;

  const { WSCG_RE, parseSparkMetric, computeHeat, heatFill, buildDag } = window.qprof.plan;
  const { taskTimeline } = window.qprof.timeline;

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

  // Every metric of the metric catalog (/qprof/v1/metrics): qprof's, then DataFusion's.
  function catalogMetrics(catalog) {
    if (!catalog) return [];
    const df = catalog.datafusion || {};
    return [...(catalog.metrics || []), ...(df.common || []), ...(df.operators || []).flatMap((o) => o.metrics || [])];
  }

  // What each metric measures, by name.
  function metricDescriptions(catalog) {
    const out = new Map();
    for (const m of catalogMetrics(catalog)) if (!out.has(m.name)) out.set(m.name, m.description);
    return out;
  }

  // Samples per operator of the query's sampled stacks, and the CPU time one stands for.
  function sampledStacks(profile) {
    const stacks = profile && profile.stackSamples;
    const counts = new Map();
    if (!stacks || !Array.isArray(stacks.stacks)) return { counts, periodNanos: 0 };
    for (const s of stacks.stacks) counts.set(s.nodeId, (counts.get(s.nodeId) || 0) + (s.count || 0));
    return { counts, periodNanos: stacks.periodNanos || 0 };
  }

  // An operator's sampled stacks: how many, and their flame graph.
  function operatorStacks(app, id, n, sampled) {
    const count = sampled.counts.get(n.nodeId) || 0;
    if (!count) return null;
    const url = `${QPROF}/${enc(app)}/sql/${enc(id)}/operators/${enc(n.nodeId)}/flamegraph.svg`;
    return h('div', { class: 'operator-stacks', id: 'operator-stacks' },
      h('div', { class: 'legend' },
        h('strong', null, `Sampled stacks: ${fmtInt(count)} samples, ~${fmtNs(count * sampled.periodNanos)} of CPU. `),
        h('a', { href: url, target: '_blank', id: 'operator-flame-graph-link' }, 'Open on its own')),
      h('object', { data: url, type: 'image/svg+xml', class: 'flame-graph operator-flame-graph' }, 'Sampled stacks'));
  }

  function nodeDetails(n, prof, heat, descriptions, stacks) {
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
          td(m.displayName || k, 'metric-name', descriptions.has(k) ? `${k}: ${descriptions.get(k)}` : k),
          td(fmtProfileValue(m, m.value), 'num', m.spark != null ? `Spark: ${m.spark}` : null),
          td(fmtProfileValue(m, m.min), 'num'), td(fmtProfileValue(m, m.median), 'num'),
          td(fmtProfileValue(m, m.max), 'num', m.maxTaskId != null ? `task ${m.maxTaskId}` : null),
          td(m.tasks != null ? fmtInt(m.tasks) : DASH, 'num')))));
      if (sparkTable) out.push(h('details', { class: 'more-metrics' }, h('summary', null, `Spark metrics (${n.metrics.length})`), sparkTable));
    } else if (sparkTable) {
      out.push(sparkTable);
    }
    // what the optimizer expected, beside what the operator produced
    if (prof && prof.estimate && isNum(prof.estimate.rows)) {
      const produced = prof.metrics && prof.metrics.outputRows ? prof.metrics.outputRows.value : null;
      const sign = prof.estimate.rowsPrecision === 'exact' ? '' : '~';
      out.push(facts([
        ['Estimated rows', h('span', { id: 'estimated-rows' }, `${sign}${fmtInt(prof.estimate.rows)}`
          + (isNum(produced) ? ` (produced ${fmtInt(produced)})` : ''))],
        isNum(prof.estimate.bytes) ? ['Estimated bytes', `${prof.estimate.bytesPrecision === 'exact' ? '' : '~'}${fmtBytes(prof.estimate.bytes)}`] : null,
      ]));
    }
    if (prof && prof.info && Object.keys(prof.info).length) {
      out.push(facts(Object.entries(prof.info).map(([k, v]) => [k, typeof v === 'object' ? JSON.stringify(v) : String(v)])));
    }
    if (stacks) out.push(stacks);
    if (!out.slice(1).length) out.push(h('p', { class: 'muted' }, 'No metrics.'));
    return out;
  }

  async function pageQuery(route) {
    const { app, id } = route;
    const [info, sql, prof, jobs, stages, catalog] = await Promise.all([
      optional(getJson(appUrl(app))),
      getJson(appUrl(app, `/sql/${enc(id)}?details=true&planDescription=true`)),
      settle(getJson(`${QPROF}/${enc(app)}/sql/${enc(id)}/profile`)),
      optional(getJson(appUrl(app, '/jobs'))),
      optional(getJson(appUrl(app, '/stages'))),
      optional(getJson('qprof/v1/metrics')),
    ]);
    const descriptions = metricDescriptions(catalog);
    const panelOnly = new Set(catalogMetrics(catalog).filter((m) => m.onPlanGraph === false).map((m) => m.name));
    const profile = prof.value ? unwrapProfile(prof.value, id) : null;
    const profNote = prof.error && prof.error.status !== 404 ? `qprof profile unavailable: ${prof.error.message}` : null;
    const profMap = profile ? flattenPlan(profile.plan) : new Map();
    const sampled = sampledStacks(profile);

    let nodes = Array.isArray(sql.nodes) ? sql.nodes : [];
    let edges = Array.isArray(sql.edges) ? sql.edges : [];
    if (!nodes.length && profile && profile.plan) ({ nodes, edges } = graphFromProfile(profile));
    const byId = new Map(nodes.map((n) => [n.nodeId, n]));
    const heat = computeHeat(nodes, profMap);

    const details = h('div', { id: 'node-details', class: 'node-details' });
    let dag = null;
    const onSelect = (nid) => {
      if (dag) dag.select(nid);
      const node = byId.get(nid);
      details.replaceChildren(...nodeDetails(node, profMap.get(nid), heat, descriptions,
        node ? operatorStacks(app, id, node, sampled) : null));
    };
    let graphEl;
    try {
      dag = nodes.length ? buildDag(nodes, edges, heat, profMap, onSelect, panelOnly) : null;
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
    const queryStages = [];
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
        queryStages.push(st);
        stageLinks.push(link(appHref(app, `/stage/${sid}/${st.attemptId}`), `${sid}`,
          { class: `chip stage-chip st-${String(st.status).toLowerCase()}`, title: `stage ${sid}.${st.attemptId} · ${st.status}` }));
      }
    }

    // What the advisor found, ranked by what it cost: warnings with their cost and fix; the
    // minor ones folded. A finding about an operator selects it.
    const findings = profile && Array.isArray(profile.findings) ? profile.findings : [];
    const costText = (c) => {
      if (!c || !isNum(c.amount)) return null;
      const amount = c.kind === 'memory' ? fmtBytes(c.amount) : fmtNs(c.amount);
      const of = { wall: 'wall time', cpu: 'CPU', taskTime: 'task time', memory: 'memory' }[c.kind] || c.kind;
      const whole = { wall: "the query's", cpu: 'its operator CPU', taskTime: "its tasks' time", memory: 'the limit' }[c.kind] || 'the whole';
      return `${amount} of ${of}` + (c.whole > 0 ? ` (${(c.sharePermille / 10).toFixed(1)}% of ${whole})` : '');
    };
    const findingRow = (f) => h('li', { class: `finding finding-${f.severity}`, 'data-rule': f.rule, 'data-rank': isNum(f.rank) ? String(f.rank) : null },
      isNum(f.rank) ? h('span', { class: 'finding-rank' }, `${f.rank}.`) : null,
      ' ',
      h('span', { class: `badge ${f.severity === 'warn' ? 'badge-failed' : 'badge-neutral'}` }, f.severity),
      ' ',
      h('span', { class: 'mono small finding-rule' }, f.rule),
      ' ',
      isNum(f.nodeId) && byId.has(f.nodeId)
        ? h('button', { type: 'button', class: 'linkish', onclick: () => onSelect(f.nodeId) }, f.message)
        : h('span', null, f.message),
      costText(f.cost) ? h('div', { class: 'finding-cost muted' }, `cost ${costText(f.cost)}`) : null,
      f.action ? h('div', { class: 'finding-action' }, `fix: ${f.action}`) : null);
    const warned = findings.filter((f) => f.severity === 'warn');
    const minor = findings.filter((f) => f.severity !== 'warn');
    const findingsCard = findings.length ? card('Findings', { id: 'findings' },
      warned.length ? h('ol', { class: 'findings' }, warned.map(findingRow))
        : h('p', { class: 'muted', id: 'no-warnings' }, 'Nothing cost this query enough to warn about.'),
      minor.length ? h('details', { class: 'findings-minor', id: 'minor-findings' },
        h('summary', null, `${minor.length} minor finding${minor.length === 1 ? '' : 's'} (info)`),
        h('ul', { class: 'findings' }, minor.map(findingRow))) : null) : null;

    const submitted = parseDate(sql.submissionTime);
    const criticalTasks = new Set((profile && Array.isArray(profile.criticalPath) ? profile.criticalPath : []).map((s) => s.taskId));
    const timeline = await taskTimeline(app, queryStages, submitted ? submitted.getTime() : null, criticalTasks);
    const flameUrl = `${QPROF}/${enc(app)}/sql/${enc(id)}/flamegraph.svg`;
    const flameGraph = profile ? card('Flame graph', { id: 'flame-graph' },
      h('div', { class: 'legend' },
        h('span', { class: 'muted' }, sampled.counts.size
          ? 'Self CPU by stage, operator and the functions its sampled stacks ran; click a frame to zoom, Ctrl-F to search. '
          : 'Self CPU by stage, operator and function; click a frame to zoom, Ctrl-F to search. '),
        h('a', { href: flameUrl, target: '_blank', id: 'flame-graph-link' }, 'Open on its own')),
      h('object', { data: flameUrl, type: 'image/svg+xml', class: 'flame-graph' }, 'Flame graph')) : null;
    const compareHref = `#/compare?before=${enc(`${app}:${id}`)}`;

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
      profile && profile.memoryPool ? ['Memory pool', `${fmtBytes(profile.memoryPool.peakBytes)} peak`
        + (isNum(profile.memoryPool.limitBytes) ? ` of ${fmtBytes(profile.memoryPool.limitBytes)}` : ' (no limit)')] : null,
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
          profile ? h('a', { class: 'button-link', id: 'compare-link', href: compareHref }, 'Compare with another run') : null,
        ]),
        failed && sql.errorMessage ? h('div', { class: 'error-message-box banner' },
          h('span', { class: 'error-title' }, 'Failed: '), h('span', { class: 'banner-text' }, firstLine(sql.errorMessage))) : null,
        findingsCard,
        card('Physical plan', { id: 'plan', class: 'card plan-card' }, legend, graphEl),
        h('div', { class: 'two-col' },
          card('Top operators by self time', { id: 'top-operators' },
            topRows.length ? table({ class: 'data compact' }, ['', 'Operator', ['Self time', 'num'], 'Share'], topRows)
              : h('p', { class: 'muted' }, 'No operator timings.')),
          card('Selected operator', { class: 'card' }, details)),
        timeline,
        flameGraph,
        memoryChart(profile),
        planningCard(profile),
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

  // ------------------------------------------------------------------ planning

  // How the query planned: its phases, then its slowest rules (those that changed the
  // plan marked).
  const PLANNING_TOP_RULES = 12;

  function planningCard(profile) {
    const planning = profile && profile.planning;
    if (!planning || !Array.isArray(planning.phases)) return null;
    const phaseRows = planning.phases.map((p) => h('tr', { class: 'planning-phase' },
      td(p.phase), td(fmtNs(p.wallNanos), 'num'), td(fmtNs(p.cpuNanos), 'num')));
    const rules = [...(planning.rules || [])].sort((a, b) => b.wallNanos - a.wallNanos).slice(0, PLANNING_TOP_RULES);
    const ruleRows = rules.map((r) => h('tr', { class: 'planning-rule' },
      td(r.phase), td(h('span', { class: 'mono' }, r.name)), td(fmtNs(r.wallNanos), 'num'),
      td(fmtInt(r.calls), 'num'), td(r.changed ? 'changed the plan' : '')));
    return card('Planning', { id: 'planning' },
      h('p', { id: 'planning-summary' }, planning.summary),
      h('div', { class: 'two-col' },
        table({ class: 'data compact', id: 'planning-phases' }, ['Phase', ['Wall', 'num'], ['CPU', 'num']], phaseRows),
        ruleRows.length ? table({ class: 'data compact', id: 'planning-rules' },
          ['Phase', 'Slowest rules', ['Wall', 'num'], ['Calls', 'num'], ''], ruleRows) : null));
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

  window.qprof.pages.query = pageQuery;
})();
