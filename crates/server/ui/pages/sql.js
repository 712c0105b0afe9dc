// qprof history server UI, page: SQL over every logged run (#/sql?q=…): a query box over the
// qprof.* tables and its answer as a table. The statement runs when the route names one.
'use strict';

(function () {
  const { HttpError, h, card, table, td, pageHeader, errorBox, fmtInt } = window.qprof;

  const SQL_URL = 'qprof/v1/sql';

  const EXAMPLES = [
    ['Operators by self CPU',
      'SELECT name, sum(self_cpu_nanos) AS self_cpu_nanos, count(*) AS operators\nFROM qprof.operators\nGROUP BY name\nORDER BY 2 DESC'],
    ['Slowest queries',
      'SELECT app_id, query_id, description, duration_ms\nFROM qprof.queries\nORDER BY duration_ms DESC\nLIMIT 20'],
    ['Applications',
      'SELECT app_id, name, start_time, end_time, log_bytes\nFROM qprof.applications\nORDER BY start_time DESC'],
  ];

  // The answer to `sql`, or an HttpError with the server's one-line message.
  async function postSql(sql) {
    let resp;
    try {
      resp = await fetch(SQL_URL, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({ sql }),
      });
    } catch (e) {
      throw new HttpError(0, `Cannot reach the server: ${e.message}`, SQL_URL);
    }
    const text = await resp.text();
    let body = null;
    try {
      body = JSON.parse(text);
    } catch (_) {
      body = null;
    }
    if (!resp.ok) {
      const msg = (body && body.message) || text.trim().slice(0, 500) || `${resp.status} ${resp.statusText}`;
      throw new HttpError(resp.status, resp.status === 404 ? `This server answers no SQL (${msg})` : msg, SQL_URL);
    }
    return body;
  }

  const NUMERIC = /^(U?Int|Float|Decimal)/;

  function stoppedNote(answer) {
    const s = answer.stopped;
    if (!s) return null;
    const why = s.limit === 'rows' ? `the first ${fmtInt(s.rows)} rows (the server's row limit)`
      : s.limit === 'bytes' ? `the rows within ${fmtInt(s.bytes)} bytes (the server's answer size limit)`
      : `the rows of the first ${fmtInt(s.afterMs)} ms (the server's time limit)`;
    return h('p', { id: 'sql-stopped', class: 'warning-line' }, `Stopped: showing ${why}.`);
  }

  function answerNodes(answer) {
    const numeric = answer.columns.map((c) => NUMERIC.test(c.type));
    const rows = answer.rows.map((row) => h('tr', { class: 'sql-row' },
      row.map((v, i) => td(v == null ? 'null' : String(v), v == null ? 'muted' : (numeric[i] ? 'num mono' : null)))));
    const count = `${fmtInt(answer.rows.length)} row${answer.rows.length === 1 ? '' : 's'} in ${fmtInt(answer.elapsedMs)} ms`;
    return [
      stoppedNote(answer),
      card(count, { id: 'sql-answer' }, table({ id: 'sql-rows' },
        answer.columns.map((c, i) => [c.name, numeric[i] ? 'num' : null, c.type]), rows, 'No rows')),
    ];
  }

  async function pageSql(route) {
    const sql = route.q || EXAMPLES[0][1];
    const box = h('textarea', { id: 'sql-text', class: 'sql-box mono', rows: 7, spellcheck: 'false', 'aria-label': 'SQL statement' }, sql);
    const run = () => {
      location.hash = `#/sql?q=${encodeURIComponent(box.value)}`;
    };
    box.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) run();
    });
    const examples = EXAMPLES.map(([label, text]) => h('button', {
      type: 'button', class: 'linkish', onclick: () => {
        box.value = text;
        run();
      },
    }, label));
    let answer = [];
    if (route.q) {
      try {
        answer = answerNodes(await postSql(route.q));
      } catch (e) {
        if (!(e instanceof HttpError)) throw e;
        answer = [errorBox(e)];
      }
    }
    return {
      title: 'SQL',
      crumbs: [['Applications', '#/'], ['SQL', null]],
      nodes: [
        pageHeader('SQL over every logged run', null,
          'Tables qprof.applications, qprof.queries and qprof.operators: every run qprof or Spark logged in this directory. Read-only.'),
        card(null, { id: 'sql-form' },
          box,
          h('div', { class: 'sql-actions' },
            h('button', { id: 'sql-run', type: 'button', class: 'button', onclick: run }, 'Run'),
            h('span', { class: 'muted' }, 'Ctrl+Enter runs it. Examples: '),
            examples)),
        ...answer,
      ],
    };
  }

  window.qprof.pages.sql = pageSql;
})();
