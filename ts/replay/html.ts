/**
 * The `--html` page of `kvroute replay`: one self-contained file (inline SVG, no scripts, no
 * network) with TTFT and end-to-end latency CDFs per policy and per-worker load bars.
 * @internal
 * @module
 */

import type { PolicyReport, ReplayReport } from './report.js';

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];
const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c] as string);
const fmt = (n: number) => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2));

/** A CDF chart on a log-scaled x axis (latencies span orders of magnitude). */
function cdfChart(title: string, series: Array<{ name: string; points: number[] }>): string {
  const w = 560;
  const h = 300;
  const m = { l: 50, r: 16, t: 28, b: 40 };
  const all = series.flatMap((s) => s.points).filter((v) => v > 0);
  // Loops, not Math.min(...all): a large report would overflow the stack.
  let least = 1;
  let most = 10;
  for (const v of all) {
    if (v < least) least = v;
    if (v > most) most = v;
  }
  const lo = Math.log10(Math.max(0.1, least));
  const hi = Math.log10(most);
  const x = (v: number) => m.l + ((Math.log10(Math.max(v, 10 ** lo)) - lo) / (hi - lo || 1)) * (w - m.l - m.r);
  const y = (q: number) => h - m.b - q * (h - m.t - m.b);
  const ticks: string[] = [];
  for (let e = Math.floor(lo); e <= Math.ceil(hi); e++) {
    const v = 10 ** e;
    if (v < 10 ** lo || v > 10 ** hi) continue;
    ticks.push(
      `<line x1="${x(v)}" x2="${x(v)}" y1="${m.t}" y2="${h - m.b}" stroke="#eee"/><text x="${x(v)}" y="${h - m.b + 16}" text-anchor="middle">${v >= 1000 ? `${v / 1000}s` : `${v}ms`}</text>`,
    );
  }
  for (const q of [0, 0.5, 0.9, 1])
    ticks.push(
      `<text x="${m.l - 6}" y="${y(q) + 4}" text-anchor="end">${q}</text><line x1="${m.l}" x2="${w - m.r}" y1="${y(q)}" y2="${y(q)}" stroke="#eee"/>`,
    );
  const lines = series.map((s, i) => {
    const pts = s.points.map((v, k) => `${x(v).toFixed(1)},${y(k / Math.max(1, s.points.length - 1)).toFixed(1)}`).join(' ');
    return `<polyline fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="2" points="${pts}"/>`;
  });
  const legend = series.map(
    (s, i) => `<text x="${m.l + 10 + i * 130}" y="${m.t - 10}" fill="${COLORS[i % COLORS.length]}">■ ${esc(s.name)}</text>`,
  );
  return `<svg viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" font-size="11" font-family="sans-serif"><text x="${w / 2}" y="14" text-anchor="middle" font-weight="bold">${esc(title)}</text>${ticks.join('')}${lines.join('')}${legend.join('')}</svg>`;
}

/** Requests per worker, one bar group per worker. */
function loadBars(policies: PolicyReport[]): string {
  const workers = policies[0]?.workers.length ?? 0;
  const max = Math.max(1, ...policies.flatMap((p) => p.workers.map((w) => w.requests)));
  const bw = Math.max(3, Math.floor(36 / policies.length));
  const gw = bw * policies.length + 8;
  const w = Math.max(560, 60 + workers * gw);
  const h = 220;
  const bars = policies.flatMap((p, i) =>
    p.workers.map((s) => {
      const bh = (s.requests / max) * (h - 70);
      return `<rect x="${50 + s.workerId * gw + i * bw}" y="${h - 40 - bh}" width="${bw - 1}" height="${bh}" fill="${COLORS[i % COLORS.length]}"><title>${esc(p.name)}, worker ${s.workerId}: ${s.requests} requests, ${s.cachedTokens} of ${s.promptTokens} prompt tokens cached</title></rect>`;
    }),
  );
  const labels = Array.from(
    { length: workers },
    (_, k) => `<text x="${50 + k * gw + (gw - 8) / 2}" y="${h - 26}" text-anchor="middle">${k}</text>`,
  );
  const legend = policies.map((p, i) => `<text x="${60 + i * 130}" y="18" fill="${COLORS[i % COLORS.length]}">■ ${esc(p.name)}</text>`);
  return `<svg viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" font-size="11" font-family="sans-serif">${legend.join('')}<text x="${w / 2}" y="${h - 6}" text-anchor="middle">requests per worker (max ${max})</text>${bars.join('')}${labels.join('')}</svg>`;
}

export function renderHtml(report: ReplayReport): string {
  const p = report.policies;
  const row = (label: string, f: (x: PolicyReport) => string) => `<tr><th>${label}</th>${p.map((x) => `<td>${f(x)}</td>`).join('')}</tr>`;
  const table = `<table><tr><th></th>${p.map((x) => `<th>${esc(x.name)}</th>`).join('')}</tr>
${row('TTFT mean / p50 / p99 ms', (x) => `${fmt(x.ttftMs.mean)} / ${fmt(x.ttftMs.p50)} / ${fmt(x.ttftMs.p99)}`)}
${row('ITL mean / p99 ms', (x) => `${fmt(x.itlMs.mean)} / ${fmt(x.itlMs.p99)}`)}
${row('E2E mean / p99 ms', (x) => `${fmt(x.e2eMs.mean)} / ${fmt(x.e2eMs.p99)}`)}
${row('prefix-cache hit ratio', (x) => `${(100 * x.hitRatio).toFixed(1)}%`)}
${row('throughput req/s, output tok/s', (x) => `${fmt(x.throughput.requestsPerSec)}, ${fmt(x.throughput.outputTokensPerSec)}`)}
${row('simulated s', (x) => fmt(x.simulatedSeconds))}
${row('preemptions', (x) => String(x.preemptions))}</table>`;
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>kvroute replay</title>
<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}th{background:#f4f4f4}.charts{display:flex;flex-wrap:wrap;gap:16px}</style>
</head><body>
<h1>kvroute replay</h1>
<p>${report.trace.requests} requests from ${esc(report.trace.path ?? 'the built-in generated workload')}; ${esc(String(report.config.workers))} workers.
Ceiling of the prefix-cache hit ratio (one infinite cache): ${(100 * report.trace.upperBoundHitRatio).toFixed(1)}%.</p>
${table}
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
<h2>Load per worker</h2>
${loadBars(p)}
</body></html>
`;
}
