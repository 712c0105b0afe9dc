// qprof history server UI, for the query page: Spark's metric strings, the self-time heat of
// the operators, and the plan DAG drawn in SVG. Publishes window.qprof.plan.
'use strict';

(function () {
  const { SVGNS, s, isNum, fmtMs, fmtNs, fmtPct } = window.qprof;

  // ------------------------------------------------------------------ Spark metric strings

  // "total (min, med, max (stageId: taskId))\n337 ms (166 ms, ...)" -> "337 ms"; plain values unchanged.
  function sparkTotal(v) {
    if (v == null) return '';
    const str = String(v);
    const lines = str.split('\n');
    if (lines.length > 1 && /^\s*(total|avg)\b/i.test(lines[0])) {
      const m = lines[1].match(/^(.*?)\s*\(/);
      return (m ? m[1] : lines[1]).trim();
    }
    return str.replace(/\s+/g, ' ').trim();
  }

  function parseSparkMetric(v) {
    const str = v == null ? '' : String(v);
    const lines = str.split('\n');
    if (lines.length > 1 && /^\s*(total|avg)\b/i.test(lines[0])) {
      const m = lines[1].match(/^(.*?) \((.*?), (.*?), (.*?) \((.*)\)\)\s*$/);
      if (m) return { total: m[1], min: m[2], med: m[3], max: m[4], where: m[5] };
      return { total: sparkTotal(str) };
    }
    return { total: str };
  }

  // Spark renders durations as "18 ms", "1.0 s", "2.5 m" / "2.5 min", "1.25 h". Returns ms or null.
  function parseSparkTime(str) {
    const m = String(str).trim().match(/^(-?[\d.,]+)\s*(ns|µs|us|ms|s|sec|m|min|h|hr|hours?)$/i);
    if (!m) return null;
    const n = parseFloat(m[1].replace(/,/g, ''));
    if (!Number.isFinite(n)) return null;
    const unit = m[2].toLowerCase();
    const f = { ns: 1e-6, 'µs': 1e-3, us: 1e-3, ms: 1, s: 1e3, sec: 1e3, m: 6e4, min: 6e4, h: 36e5, hr: 36e5, hour: 36e5, hours: 36e5 }[unit];
    return f == null ? null : n * f;
  }

  const isZeroValue = (v) => /^-?0(\.0+)?(\s*[a-zµ]+)?$/i.test(String(v).trim());

  // ------------------------------------------------------------------ heat (self time per operator)

  const WSCG_RE = /^WholeStageCodegen\s*\((\d+)\)/;

  function sparkTimeOfNode(n) {
    let sum = 0;
    let any = false;
    for (const m of n.metrics || []) {
      // "time to collect" waits for the child job and wait times are not work: both left out.
      if (!/\b(time|duration)\b/i.test(m.name || '') || /wait|collect/i.test(m.name || '')) continue;
      const t = parseSparkTime(sparkTotal(m.value));
      if (t != null) {
        sum += t;
        any = true;
      }
    }
    return any ? sum : 0;
  }

  function profileMetric(p, key) {
    const m = p && p.metrics && p.metrics[key];
    return m && isNum(m.value) ? m.value : null;
  }

  function computeHeat(nodes, profMap) {
    const self = new Map();
    let source = null;
    let unit = 'ms';
    let total = 0;
    if (profMap && profMap.size) {
      let key = null;
      for (const k of ['selfCpuNanos', 'selfWallNanos']) {
        for (const p of profMap.values()) {
          if ((profileMetric(p, k) || 0) > 0) {
            key = k;
            break;
          }
        }
        if (key) break;
      }
      if (key) {
        for (const n of nodes) {
          const v = profileMetric(profMap.get(n.nodeId), key);
          if (v > 0) self.set(n.nodeId, v);
        }
        if (self.size) {
          source = key === 'selfCpuNanos' ? 'qprof self CPU time' : 'qprof self wall time';
          unit = 'ns';
          for (const p of profMap.values()) total += Math.max(0, profileMetric(p, key) || 0);
        }
      }
    }
    if (!source) {
      const times = new Map(nodes.map((n) => [n.nodeId, sparkTimeOfNode(n)]));
      for (const n of nodes) {
        let t = times.get(n.nodeId) || 0;
        const m = WSCG_RE.exec(n.nodeName || '');
        if (m) {
          // A codegen stage's duration includes its members' own timers.
          const cid = Number(m[1]);
          for (const x of nodes) if (x !== n && x.wholeStageCodegenId === cid) t -= times.get(x.nodeId) || 0;
          t = Math.max(0, t);
        }
        if (t > 0) self.set(n.nodeId, t);
      }
      for (const v of self.values()) total += v;
      source = self.size ? 'Spark time metrics (approximate)' : null;
    }
    const share = new Map();
    if (total > 0) for (const [id, v] of self) share.set(id, v / total);
    const ranked = [...share.entries()].sort((a, b) => b[1] - a[1]);
    const hot = new Set();
    ranked.forEach(([id, sh], i) => {
      if (sh <= 0) return;
      if (i === 0 || (i < 3 && sh >= 0.1) || sh >= 0.25) hot.add(id);
    });
    const fmt = unit === 'ns' ? fmtNs : fmtMs;
    return { source, unit, self, share, hot, total, ranked, fmt };
  }

  function heatFill(share) {
    if (!isNum(share) || share <= 0) return '#ffffff';
    const t = Math.min(1, Math.sqrt(share));
    const hue = 50 - 50 * t;
    const light = 95 - 26 * t;
    return `hsl(${hue.toFixed(0)}, 95%, ${light.toFixed(0)}%)`;
  }

  // ------------------------------------------------------------------ text measuring

  let measureCtx = null;
  let fontFamily = null;

  function textWidth(text, size, weight) {
    if (fontFamily == null) fontFamily = getComputedStyle(document.body).fontFamily || 'sans-serif';
    if (measureCtx === null) {
      try {
        measureCtx = document.createElement('canvas').getContext('2d') || false;
      } catch (_) {
        measureCtx = false;
      }
    }
    if (!measureCtx) return String(text).length * size * 0.6;
    measureCtx.font = `${weight || 400} ${size}px ${fontFamily}`;
    return measureCtx.measureText(String(text)).width;
  }

  function fitText(text, size, weight, maxW) {
    text = String(text);
    if (textWidth(text, size, weight) <= maxW) return text;
    let lo = 0;
    let hi = text.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (textWidth(text.slice(0, mid) + '…', size, weight) <= maxW) lo = mid;
      else hi = mid - 1;
    }
    return text.slice(0, Math.max(1, lo)) + '…';
  }

  // ------------------------------------------------------------------ plan DAG

  const G = {
    padX: 10, padY: 8, nameSize: 13, metricSize: 11.5, nameH: 19, lineH: 16,
    hgap: 30, vgap: 42, margin: 16, clusterPad: 9, labelH: 19, labelSize: 11,
    maxLines: 8, maxTextW: 330, minW: 96, pillSize: 11,
  };

  // `panelOnly`: the metrics the catalog leaves to the operator's panel (qprof's timers and
  // the counts behind them: the node shows its self time instead); the panel shows them all.
  function nodeLines(n, prof, heat, maxLines, panelOnly) {
    const lines = [];
    if (heat.unit === 'ns' && heat.self.has(n.nodeId)) {
      lines.push({ label: heat.source.replace(/^qprof /, ''), value: heat.fmt(heat.self.get(n.nodeId)), cls: 'm-self' });
    }
    let metrics;
    let omitted = 0;
    if (n.fromProfile && prof && prof.metrics) {
      // A graph derived from the profile: show qprof's own renderings.
      const all = Object.entries(prof.metrics);
      const kept = all.filter(([k]) => !panelOnly.has(k));
      omitted += all.length - kept.length;
      metrics = kept.map(([k, m]) => ({ label: m.displayName || k, value: sparkTotal(m.spark ?? m.value), full: String(m.spark ?? m.value) }));
    } else {
      metrics = (n.metrics || []).map((m) => ({ label: m.name, value: sparkTotal(m.value), full: String(m.value) }));
      if (prof && prof.metrics && lines.length) {
        const redundant = new Set([...panelOnly].map((k) => prof.metrics[k] && prof.metrics[k].displayName).filter(Boolean));
        const kept = metrics.filter((m) => !redundant.has(m.label));
        omitted += metrics.length - kept.length;
        metrics = kept;
      }
    }
    const room = Math.max(1, maxLines - lines.length);
    if (metrics.length > room) {
      const nonZero = metrics.filter((m) => !isZeroValue(m.value));
      omitted += metrics.length - nonZero.length;
      metrics = nonZero;
    }
    if (metrics.length + (omitted ? 1 : 0) > room) {
      const keep = Math.max(0, room - 1);
      omitted += metrics.length - keep;
      metrics = metrics.slice(0, keep);
    }
    if (omitted) metrics.push({ label: `+${omitted} more`, value: '', cls: 'm-more' });
    return lines.concat(metrics);
  }

  function buildLayout(graphNodes, graphEdges, heat, profMap, panelOnly) {
    const byId = new Map(graphNodes.map((n) => [n.nodeId, n]));
    const touched = new Set();
    const edges = [];
    for (const e of graphEdges || []) {
      if (byId.has(e.fromId) && byId.has(e.toId) && e.fromId !== e.toId) {
        edges.push(e);
        touched.add(e.fromId);
        touched.add(e.toId);
      }
    }

    // WholeStageCodegen nodes without edges become clusters around their members.
    const clusters = [];
    const clusterOf = new Map(); // member id -> cluster
    const boxes = [];
    for (const n of graphNodes) {
      const m = WSCG_RE.exec(n.nodeName || '');
      if (m && !touched.has(n.nodeId)) {
        const cid = Number(m[1]);
        const members = graphNodes.filter((x) => x !== n && x.wholeStageCodegenId === cid && !WSCG_RE.test(x.nodeName || ''));
        if (members.length) {
          const c = { node: n, cid, memberIds: members.map((x) => x.nodeId) };
          clusters.push(c);
          for (const x of members) if (!clusterOf.has(x.nodeId)) clusterOf.set(x.nodeId, c);
          continue;
        }
      }
      boxes.push(n);
    }

    const L = new Map();
    for (const n of boxes) {
      L.set(n.nodeId, { id: n.nodeId, raw: n, prof: profMap ? profMap.get(n.nodeId) : null, kids: [], parents: [], depth: 0, order: 0 });
    }
    for (const e of edges) {
      const c = L.get(e.fromId);
      const p = L.get(e.toId);
      if (c && p) {
        c.parents.push(p.id);
        p.kids.push(c.id);
      }
    }
    for (const v of L.values()) v.kids.sort((a, b) => a - b);

    // Spanning forest from the sinks (operators whose output goes nowhere).
    const ids = [...L.keys()].sort((a, b) => a - b);
    const roots = ids.filter((id) => L.get(id).parents.length === 0);
    const treeKids = new Map(ids.map((id) => [id, []]));
    const seen = new Set();
    let order = 0;
    const visit = (root) => {
      const stack = [[root, 0]];
      seen.add(root);
      while (stack.length) {
        const [id, depth] = stack.pop();
        const v = L.get(id);
        v.depth = depth;
        v.order = order++;
        const fresh = v.kids.filter((k) => !seen.has(k));
        for (const k of fresh) seen.add(k);
        treeKids.set(id, fresh);
        for (let i = fresh.length - 1; i >= 0; i--) stack.push([fresh[i], depth + 1]);
      }
    };
    for (const r of roots) visit(r);
    for (const id of ids) {
      if (!seen.has(id)) {
        roots.push(id);
        visit(id);
      }
    }
    // DAG nodes reached again deeper down go below their deepest consumer.
    for (let pass = 0; pass < ids.length; pass++) {
      let changed = false;
      for (const v of L.values()) {
        for (const pid of v.parents) {
          const p = L.get(pid);
          if (treeKids.get(pid).includes(v.id) && v.depth < p.depth + 1) {
            v.depth = p.depth + 1;
            changed = true;
          }
        }
      }
      if (!changed) break;
      for (const v of L.values()) for (const k of treeKids.get(v.id)) L.get(k).depth = Math.max(L.get(k).depth, v.depth + 1);
    }
    const maxDepth = Math.max(0, ...[...L.values()].map((v) => v.depth));
    for (const v of L.values()) v.row = maxDepth - v.depth; // leaves on top, sinks at the bottom

    // Cluster labels sit above the member highest up; that member gets wide enough for the label.
    for (const c of clusters) {
      const ms = c.memberIds.map((id) => L.get(id)).filter(Boolean);
      c.members = ms;
      if (!ms.length) continue;
      ms.sort((a, b) => a.row - b.row || a.order - b.order);
      c.top = ms[0];
      const dur = (c.node.metrics || []).find((m) => /duration/i.test(m.name));
      const share = heat.share.get(c.node.nodeId);
      c.label = `${c.node.nodeName}${dur ? ' · ' + sparkTotal(dur.value) : ''}`;
      c.pct = share ? fmtPct(share) : '';
      c.labelW = textWidth(c.label, G.labelSize, 600) + (c.pct ? textWidth(c.pct, G.pillSize, 700) + 18 : 0) + 14;
    }

    // Box sizes; big plans get terser boxes.
    const maxLines = L.size <= 12 ? G.maxLines : L.size <= 24 ? 6 : 4;
    for (const v of L.values()) {
      const n = v.raw;
      const share = heat.share.get(v.id);
      v.pct = share ? fmtPct(share) : '';
      const pillW = v.pct ? textWidth(v.pct, G.pillSize, 700) + 12 : 0;
      const maxName = G.maxTextW - (pillW ? pillW + 8 : 0);
      v.name = fitText(n.nodeName || `#${v.id}`, G.nameSize, 600, maxName);
      let w = textWidth(v.name, G.nameSize, 600) + (pillW ? pillW + 8 : 0);
      v.lines = nodeLines(n, v.prof, heat, maxLines, panelOnly).map((ln) => {
        const valueW = ln.value ? textWidth(ln.value, G.metricSize, 600) : 0;
        const sep = ln.value ? ': ' : '';
        const label = fitText(ln.label, G.metricSize, 400, Math.max(60, G.maxTextW - valueW - 8));
        const lw = textWidth(label + sep, G.metricSize, 400) + valueW;
        w = Math.max(w, lw);
        return Object.assign({}, ln, { label, sep });
      });
      v.w = Math.ceil(Math.max(G.minW, w + 2 * G.padX));
      v.h = Math.ceil(2 * G.padY + G.nameH + v.lines.length * G.lineH - (v.lines.length ? 0 : 4));
    }
    for (const c of clusters) if (c.top) c.top.w = Math.max(c.top.w, Math.ceil(c.labelW - 2 * G.clusterPad));

    // Horizontal placement: tidy-ish tree layout, parents centred over their children.
    const subW = new Map();
    const measure = (id) => {
      const v = L.get(id);
      const kids = treeKids.get(id);
      let sum = 0;
      kids.forEach((k, i) => {
        sum += measure(k) + (i ? G.hgap : 0);
      });
      const w = Math.max(v.w, sum);
      subW.set(id, w);
      return w;
    };
    const place = (id, left) => {
      const v = L.get(id);
      const sw = subW.get(id);
      const kids = treeKids.get(id);
      let cx;
      if (kids.length) {
        let sum = 0;
        kids.forEach((k, i) => {
          sum += subW.get(k) + (i ? G.hgap : 0);
        });
        let x = left + (sw - sum) / 2;
        for (const k of kids) {
          place(k, x);
          x += subW.get(k) + G.hgap;
        }
        const first = L.get(kids[0]);
        const last = L.get(kids[kids.length - 1]);
        cx = (first.x + first.w / 2 + last.x + last.w / 2) / 2;
        cx = Math.min(Math.max(cx, left + v.w / 2), left + sw - v.w / 2);
      } else {
        cx = left + sw / 2;
      }
      v.x = Math.round(cx - v.w / 2);
    };
    let x0 = G.margin + G.clusterPad;
    for (const r of roots) {
      measure(r);
      place(r, x0);
      x0 += subW.get(r) + G.hgap;
    }

    // Vertical placement by rows.
    const rowH = [];
    for (const v of L.values()) rowH[v.row] = Math.max(rowH[v.row] || 0, v.h);
    const topExtra = clusters.some((c) => c.top && c.top.row === 0) ? G.labelH : 0;
    const rowY = [];
    let y = G.margin + G.clusterPad + topExtra;
    for (let r = 0; r <= maxDepth; r++) {
      rowY[r] = y;
      y += (rowH[r] || 0) + G.vgap;
    }
    for (const v of L.values()) v.y = Math.round(rowY[v.row] + ((rowH[v.row] || 0) - v.h) / 2);

    let width = 0;
    let height = 0;
    for (const v of L.values()) {
      width = Math.max(width, v.x + v.w);
      height = Math.max(height, v.y + v.h);
    }
    width += G.margin + G.clusterPad;
    height += G.margin + G.clusterPad;

    // Cluster outline: one rect per member plus connectors across the gaps between members.
    const P = G.clusterPad;
    for (const c of clusters) {
      if (!c.members || !c.members.length) continue;
      const memberSet = new Set(c.members.map((m) => m.id));
      c.rects = c.members.map((m) => {
        const extra = m === c.top ? G.labelH : 0;
        return { x: m.x - P, y: m.y - P - extra, w: m.w + 2 * P, h: m.h + 2 * P + extra };
      });
      for (const m of c.members) {
        for (const pid of m.parents) {
          if (!memberSet.has(pid)) continue;
          const p = L.get(pid);
          const y1 = m.y + m.h + P;
          const y2 = p.y - P - (p === c.top ? G.labelH : 0);
          if (y2 <= y1) continue;
          const xa = Math.max(m.x, p.x);
          const xb = Math.min(m.x + m.w, p.x + p.w);
          const inside = xb - xa >= 24;
          const x1 = inside ? xa - P : Math.min(m.x, p.x) - P;
          const x2 = inside ? xb + P : Math.max(m.x + m.w, p.x + p.w) + P;
          const o = inside ? P : 1; // reach into both boxes' padding to hide the rounded corners
          c.rects.push({ x: x1, y: y1 - o, w: x2 - x1, h: y2 - y1 + 2 * o, connector: true });
        }
      }
    }

    return { L, edges, clusters, boxes, width, height };
  }

  function buildDag(graphNodes, graphEdges, heat, profMap, onSelect, panelOnly = new Set()) {
    const lay = buildLayout(graphNodes, graphEdges, heat, profMap, panelOnly);
    const { L, edges, clusters, width, height } = lay;

    const svg = s('svg', {
      id: 'plan-dag', class: 'dag', xmlns: SVGNS, width, height, viewBox: `0 0 ${width} ${height}`,
      role: 'img', 'aria-label': 'Physical plan',
      style: `min-width:${Math.min(width, Math.round(width * 0.7))}px`,
    });
    svg.append(s('defs', null,
      s('marker', { id: 'dag-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse', markerUnits: 'userSpaceOnUse' },
        s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow-head' }))));

    const gClusters = s('g', { class: 'clusters' });
    const gEdges = s('g', { class: 'edges' });
    const gNodes = s('g', { class: 'nodes' });
    svg.append(gClusters, gEdges, gNodes);
    const groups = new Map();

    const selectable = (g, id) => {
      g.setAttribute('tabindex', '0');
      g.addEventListener('click', () => onSelect(id));
      g.addEventListener('keydown', (ev) => {
        if (ev.key === 'Enter' || ev.key === ' ') {
          ev.preventDefault();
          onSelect(id);
        }
      });
      groups.set(id, g);
    };

    for (const c of clusters) {
      if (!c.rects) continue;
      const id = c.node.nodeId;
      const hot = heat.hot.has(id);
      const g = s('g', { class: `node cluster${hot ? ' hot' : ''}`, 'data-node-id': id, 'data-codegen-id': c.cid },
        s('title', null, `${c.node.nodeName}\n${(c.node.metrics || []).map((m) => `${m.name}: ${m.value}`).join('\n')}`));
      const strokes = s('g', { class: 'cl-stroke' });
      const fills = s('g', { class: 'cl-fill' });
      for (const r of c.rects) {
        const rx = r.connector ? 0 : 8;
        strokes.append(s('rect', { x: r.x, y: r.y, width: r.w, height: r.h, rx }));
        fills.append(s('rect', { x: r.x, y: r.y, width: r.w, height: r.h, rx }));
      }
      g.append(strokes, fills);
      const lx = c.top.x - G.clusterPad + 8;
      const ly = c.top.y - G.clusterPad - 6;
      g.append(s('text', { class: 'cl-label', x: lx, y: ly }, c.label));
      if (c.pct) {
        const tw = textWidth(c.label, G.labelSize, 600);
        const pw = textWidth(c.pct, G.pillSize, 700) + 10;
        const px = lx + tw + 8;
        g.append(s('rect', { class: 'pct-pill', x: px, y: ly - 11, width: pw, height: 15, rx: 7.5, style: `fill:${heatFill(heat.share.get(id))}` }),
          s('text', { class: 'pct-text', x: px + pw / 2, y: ly }, c.pct));
      }
      selectable(g, id);
      gClusters.append(g);
    }

    // Edges: from the producer's bottom to the consumer's top, arrivals spread over the consumer.
    const arrivals = new Map();
    for (const e of edges) {
      if (!arrivals.has(e.toId)) arrivals.set(e.toId, []);
      arrivals.get(e.toId).push(e.fromId);
    }
    for (const list of arrivals.values()) list.sort((a, b) => (L.get(a).x - L.get(b).x) || (a - b));
    for (const e of edges) {
      const c = L.get(e.fromId);
      const p = L.get(e.toId);
      const list = arrivals.get(e.toId);
      const i = list.indexOf(e.fromId);
      const spread = Math.min(p.w * 0.6, 28 * (list.length - 1));
      const px = p.x + p.w / 2 + (list.length > 1 ? -spread / 2 + (spread * i) / (list.length - 1) : 0);
      const cx = c.x + c.w / 2;
      let d;
      if (c.y + c.h <= p.y) {
        const y1 = c.y + c.h;
        const y2 = p.y - 1;
        const my = (y1 + y2) / 2;
        d = `M${cx},${y1} C${cx},${my} ${px},${my} ${px},${y2}`;
      } else {
        const y1 = c.y;
        const y2 = p.y + p.h + 1;
        const my = (y1 + y2) / 2;
        d = `M${cx},${y1} C${cx},${my} ${px},${my} ${px},${y2}`;
      }
      gEdges.append(s('path', { class: 'edge', d, 'data-from': e.fromId, 'data-to': e.toId, 'marker-end': 'url(#dag-arrow)' }));
    }

    for (const v of L.values()) {
      const n = v.raw;
      const share = heat.share.get(v.id);
      const hot = heat.hot.has(v.id);
      const tip = [`#${v.id} ${n.nodeName || ''}`];
      if (n.desc && n.desc !== n.nodeName) tip.push(n.desc);
      if (share) tip.push(`${fmtPct(share)} of ${heat.source}`);
      const g = s('g', {
        class: `node${hot ? ' hot' : ''}${share ? ' has-heat' : ''}`, 'data-node-id': v.id,
        'data-share': share ? share.toFixed(4) : null, transform: `translate(${v.x},${v.y})`,
      }, s('title', null, tip.join('\n')));
      g.append(s('rect', { class: 'box', x: 0, y: 0, width: v.w, height: v.h, rx: 6, style: `fill:${heatFill(share)}` }));
      g.append(s('text', { class: 'n-name', x: G.padX, y: G.padY + 13 }, v.name));
      if (v.pct) {
        const pw = textWidth(v.pct, G.pillSize, 700) + 12;
        const px = v.w - G.padX - pw + 4;
        g.append(s('rect', { class: 'pct-pill', x: px, y: G.padY + 1, width: pw, height: 16, rx: 8 }),
          s('text', { class: 'pct-text', x: px + pw / 2, y: G.padY + 13 }, v.pct));
      }
      v.lines.forEach((ln, i) => {
        const y = G.padY + G.nameH + i * G.lineH + 11;
        g.append(s('text', { class: `n-metric ${ln.cls || ''}`.trim(), x: G.padX, y },
          ln.full && ln.full !== ln.value ? s('title', null, `${ln.label}: ${ln.full}`) : null,
          s('tspan', { class: 'm-label' }, ln.label + (ln.sep || '')),
          ln.value ? s('tspan', { class: 'm-value' }, ln.value) : null));
      });
      selectable(g, v.id);
      gNodes.append(g);
    }

    function select(id) {
      for (const [gid, g] of groups) g.classList.toggle('selected', gid === id);
    }
    return { svg, select };
  }

  window.qprof.plan = { WSCG_RE, parseSparkMetric, computeHeat, heatFill, buildDag };
})();
