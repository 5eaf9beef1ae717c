/**
 * The `--html` page of `kvroute replay`: one self-contained file (inline SVG, no scripts, no
 * network) with the run's configuration, the summary table, TTFT and end-to-end latency CDFs per
 * policy, and per-worker requests and prefix-cache hit ratios with their values on the bars.
 * Every chart keeps its title, legend and axis titles in separate rows, and scales down to the
 * window's width (a phone shows it without scrolling sideways).
 * @internal
 * @module
 */

import { fleetWords } from './disaggregation.js';
import type { PolicyReport, ReplayReport } from './report.js';

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];
const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c] as string);
const fmt = (n: number) => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2));
const color = (i: number) => COLORS[i % COLORS.length];

/** Title (row 1), legend (row 2) and the SVG element around a chart's body. */
function frame(w: number, h: number, title: string, names: string[], body: string): string {
  const legend = names.map(
    (name, i) => `<text class="chrome legend" x="${12 + i * 150}" y="38" fill="${color(i)}">■ ${esc(name.slice(0, 22))}</text>`,
  );
  return `<svg viewBox="0 0 ${w} ${h}" width="100%" style="max-width:${w}px" font-size="11" font-family="sans-serif" role="img" aria-label="${esc(title)}"><text class="chrome title" x="${w / 2}" y="16" text-anchor="middle" font-weight="bold">${esc(title)}</text>${legend.join('')}${body}</svg>`;
}

/** A CDF chart on a log-scaled x axis (latencies span orders of magnitude). */
function cdfChart(title: string, series: Array<{ name: string; points: number[] }>): string {
  const w = 560;
  const h = 320;
  const m = { l: 56, r: 16, t: 56, b: 48 };
  // Loops, not Math.min(...all): a large report would overflow the stack.
  let least = 1;
  let most = 10;
  for (const s of series) {
    for (const v of s.points) {
      if (v > 0 && v < least) least = v;
      if (v > most) most = v;
    }
  }
  const lo = Math.log10(Math.max(0.1, least));
  const hi = Math.log10(most);
  const x = (v: number) => m.l + ((Math.log10(Math.max(v, 10 ** lo)) - lo) / (hi - lo || 1)) * (w - m.l - m.r);
  const y = (q: number) => h - m.b - q * (h - m.t - m.b);
  const parts: string[] = [];
  for (let e = Math.floor(lo); e <= Math.ceil(hi); e++) {
    const v = 10 ** e;
    if (v < 10 ** lo || v > 10 ** hi) continue;
    parts.push(
      `<line x1="${x(v)}" x2="${x(v)}" y1="${m.t}" y2="${h - m.b}" stroke="#eee"/><text class="tick" x="${x(v)}" y="${h - m.b + 14}" text-anchor="middle">${v >= 1000 ? `${v / 1000}s` : `${v}ms`}</text>`,
    );
  }
  for (const q of [0, 0.5, 0.9, 1]) {
    parts.push(
      `<text class="tick" x="${m.l - 6}" y="${y(q) + 4}" text-anchor="end">${q}</text><line x1="${m.l}" x2="${w - m.r}" y1="${y(q)}" y2="${y(q)}" stroke="#eee"/>`,
    );
  }
  for (const [i, s] of series.entries()) {
    const pts = s.points.map((v, k) => `${x(v).toFixed(1)},${y(k / Math.max(1, s.points.length - 1)).toFixed(1)}`).join(' ');
    parts.push(`<polyline fill="none" stroke="${color(i)}" stroke-width="2" points="${pts}"/>`);
  }
  parts.push(
    `<text class="chrome axis-title" x="${(m.l + w - m.r) / 2}" y="${h - 12}" text-anchor="middle">latency (log scale)</text>`,
    `<text class="chrome axis-title" transform="translate(14 ${(m.t + h - m.b) / 2}) rotate(-90)" text-anchor="middle">fraction of requests</text>`,
  );
  return frame(
    w,
    h,
    title,
    series.map((s) => s.name),
    parts.join(''),
  );
}

/** One bar group per worker, one bar per policy, each bar with its value above it. */
function barChart(
  title: string,
  yTitle: string,
  policies: PolicyReport[],
  value: (p: PolicyReport, worker: number) => number,
  label: (v: number) => string,
): string {
  const workers = policies[0]?.workers.length ?? 0;
  let max = 0;
  for (const p of policies) for (let k = 0; k < workers; k++) max = Math.max(max, value(p, k));
  if (max <= 0) max = 1;
  const bw = Math.max(14, Math.floor(44 / Math.max(1, policies.length)));
  const gw = bw * policies.length + 10;
  const m = { l: 56, t: 70, b: 44 };
  const w = Math.max(560, m.l + 16 + workers * gw);
  const h = 280;
  const plot = h - m.t - m.b;
  const parts: string[] = [];
  for (const [i, p] of policies.entries()) {
    for (let k = 0; k < workers; k++) {
      const v = value(p, k);
      const bh = (v / max) * plot;
      const bx = m.l + k * gw + i * bw;
      const share = p.workers[k];
      parts.push(
        `<rect x="${bx}" y="${h - m.b - bh}" width="${bw - 2}" height="${bh}" fill="${color(i)}"><title>${esc(p.name)}, ${share.role ? `${share.role} ` : ''}worker ${share.workerId}: ${share.requests} requests, ${share.cachedTokens} of ${share.promptTokens} prompt tokens cached</title></rect>`,
        `<text class="value" x="${bx + (bw - 2) / 2}" y="${h - m.b - bh - 3}" text-anchor="middle" font-size="8">${label(v)}</text>`,
      );
    }
  }
  for (let k = 0; k < workers; k++) {
    // A disaggregated fleet's pools: P for a prefill worker, D for a decode one.
    const role = policies[0]?.workers[k]?.role;
    const tag = role === undefined ? '' : role === 'prefill' ? ' P' : ' D';
    parts.push(`<text class="tick" x="${m.l + k * gw + (gw - 10) / 2}" y="${h - m.b + 14}" text-anchor="middle">${k}${tag}</text>`);
  }
  parts.push(
    `<line x1="${m.l - 4}" x2="${w - 8}" y1="${h - m.b}" y2="${h - m.b}" stroke="#999"/>`,
    `<text class="chrome axis-title" x="${(m.l + w) / 2}" y="${h - 12}" text-anchor="middle">worker</text>`,
    `<text class="chrome axis-title" transform="translate(14 ${m.t + plot / 2}) rotate(-90)" text-anchor="middle">${esc(yTitle)}</text>`,
  );
  return frame(
    w,
    h,
    title,
    policies.map((p) => p.name),
    parts.join(''),
  );
}

function configTable(config: Record<string, unknown>): string {
  const rows = Object.entries(config)
    .filter(([, v]) => v !== undefined && typeof v !== 'function')
    .map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(typeof v === 'object' ? JSON.stringify(v) : String(v))}</td></tr>`);
  return `<table class="config"><caption>run configuration</caption>${rows.join('')}</table>`;
}

export function renderHtml(report: ReplayReport): string {
  const p = report.policies;
  const row = (label: string, f: (x: PolicyReport) => string) => `<tr><th>${label}</th>${p.map((x) => `<td>${f(x)}</td>`).join('')}</tr>`;
  const table = `<table class="summary"><tr><th></th>${p.map((x) => `<th>${esc(x.name)}</th>`).join('')}</tr>
${row('TTFT mean / p50 / p99 ms', (x) => `${fmt(x.ttftMs.mean)} / ${fmt(x.ttftMs.p50)} / ${fmt(x.ttftMs.p99)}`)}
${row('ITL mean / p99 ms', (x) => `${fmt(x.itlMs.mean)} / ${fmt(x.itlMs.p99)}`)}
${row('E2E mean / p99 ms', (x) => `${fmt(x.e2eMs.mean)} / ${fmt(x.e2eMs.p99)}`)}
${row('prefix-cache hit ratio', (x) => `${(100 * x.hitRatio).toFixed(1)}%`)}
${p.some((x) => x.preemptions > 0) ? row('hit ratio at first admission', (x) => `${(100 * x.firstAdmissionHitRatio).toFixed(1)}%`) : ''}
${row('throughput req/s, output tok/s', (x) => `${fmt(x.throughput.requestsPerSec)}, ${fmt(x.throughput.outputTokensPerSec)}`)}
${row('simulated s', (x) => fmt(x.simulatedSeconds))}
${row('preemptions', (x) => String(x.preemptions))}
${p.some((x) => x.hostLoadedBlocks > 0) ? row('blocks loaded back from host memory', (x) => String(x.hostLoadedBlocks)) : ''}
${p.some((x) => x.acceptLength !== undefined) ? row('accept length (tokens a decode step)', (x) => (x.acceptLength === undefined ? '-' : fmt(x.acceptLength))) : ''}</table>`;
  const hit = (x: PolicyReport, k: number) => {
    const s = x.workers[k];
    return s && s.promptTokens > 0 ? (100 * s.cachedTokens) / s.promptTokens : 0;
  };
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>kvroute replay</title>
<style>body{font-family:sans-serif;margin:16px;color:#222;max-width:1200px}table{border-collapse:collapse;margin:12px 0;max-width:100%;display:block;overflow-x:auto}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}th{background:#f4f4f4}caption{text-align:left;font-weight:bold;padding:4px 0}.charts{display:flex;flex-wrap:wrap;gap:16px}.charts>svg{flex:1 1 320px}</style>
</head><body>
<h1>kvroute replay</h1>
<p>${report.trace.requests} requests from ${esc(report.trace.path ?? 'the built-in generated workload')}; ${esc(fleetWords(report.config))}.
${report.config.prefixCaching === false ? 'Engines without prefix caching: nothing is reused.' : `Ceiling of the prefix-cache hit ratio (one infinite cache): ${(100 * report.trace.upperBoundHitRatio).toFixed(1)}%.`}</p>
${table}
${configTable(report.config)}
<div class="charts">
${cdfChart(
  'TTFT (CDF)',
  p.map((x) => ({ name: x.name, points: x.cdf.ttftMs })),
)}
${cdfChart(
  'End-to-end latency (CDF)',
  p.map((x) => ({ name: x.name, points: x.cdf.e2eMs })),
)}
</div>
<h2>Per worker</h2>
<div class="charts">
${barChart(
  'Requests per worker',
  'requests',
  p,
  (x, k) => x.workers[k]?.requests ?? 0,
  (v) => String(v),
)}
${barChart('Prefix-cache hit ratio per worker', 'cached prompt tokens, %', p, hit, (v) => v.toFixed(0))}
</div>
</body></html>
`;
}
