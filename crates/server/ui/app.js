// qprof history server UI: one page, hash routing, plain DOM + SVG, no dependencies.
//
// Scripts, loaded in this order by index.html: lib.js (shared helpers, published as
// window.qprof), pages/*.js (each registers its page in window.qprof.pages), then this one,
// the router, which renders the page the location hash names.
//
// Routes:
//   #/                                   applications
//   #/app/{app}                          an application's queries and stages (#/app/{app}/stages scrolls to stages)
//   #/app/{app}/sql/{id}                 a query: findings, plan DAG with self-time heat, task timeline,
//                                        flame graph, memory, SQL, plan description
//   #/app/{app}/stage/{id}/{attempt}     a stage: summary, task quantiles, tasks
//   #/app/{app}/executors                executors
//   #/compare?before=APP:ID&after=APP:ID two runs of a query compared operator by operator
//   #/sql?q=SELECT…                      SQL over every logged run (the qprof.* tables); runs q if given
//
// Test hooks: <main id="page" data-page="...">, body[data-ready="1"] once a page is rendered,
// #error holding the message of a failed fetch.
'use strict';

(function () {
  const { HttpError, appHref, h, link, errorBox } = window.qprof;

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
    if (parts.length === 1 && parts[0] === 'compare') return { page: 'compare' };
    if (parts.length === 1 && parts[0] === 'sql') return { page: 'sql', q: routeParam('q') };
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

  const PAGES = Object.assign({}, window.qprof.pages, {
    notfound: async (route) => {
      throw new HttpError(0, `Unknown page: #/${route.raw}`, null);
    },
  });

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
