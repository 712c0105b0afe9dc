// qprof history server UI, page: the applications in the log directory (#/).
'use strict';

(function () {
  const { API, getJson, optional, appHref, DASH, fmtDate, fmtMs, parseDate, h, link, td, statusBadge,
    pageHeader, card, table } = window.qprof;

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

  window.qprof.pages.apps = pageApps;
})();
