import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, test } from 'vitest';
import { generateTrace, replay } from '../ts/index.js';
import { renderHtml } from '../ts/replay/html.js';
import { BACKENDS } from './helpers/backends.js';
import { scratchDir } from './helpers/scratch-dir.js';
import { requireTool } from './helpers/tools.js';

/** Debian's `chromium` (`.ci/run` installs it). */
const chromium = () => requireTool(['chromium', 'chromium-browser', 'google-chrome'], 'chromium');

/**
 * Runs in the rendered page: overlapping chart labels, horizontal overflow, missing axis titles
 * and bar values, written into the page for `--dump-dom` to carry back.
 */
const PROBE = `<script>
addEventListener('load', () => {
  const out = { overflow: document.documentElement.scrollWidth - innerWidth, charts: [] };
  for (const svg of document.querySelectorAll('svg')) {
    const texts = [...svg.querySelectorAll('text')].map((t) => ({ t, r: t.getBoundingClientRect(), chrome: t.classList.contains('chrome') }));
    const overlaps = [];
    for (const a of texts) for (const b of texts) {
      if (a === b || !a.chrome) continue;
      const x = Math.min(a.r.right, b.r.right) - Math.max(a.r.left, b.r.left);
      const y = Math.min(a.r.bottom, b.r.bottom) - Math.max(a.r.top, b.r.top);
      if (x > 1 && y > 1) overlaps.push(a.t.textContent + ' / ' + b.t.textContent);
    }
    out.charts.push({
      title: svg.getAttribute('aria-label'),
      overlaps,
      axisTitles: svg.querySelectorAll('.axis-title').length,
      bars: svg.querySelectorAll('rect').length,
      values: svg.querySelectorAll('.value').length,
      outside: svg.getBoundingClientRect().right - innerWidth,
    });
  }
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.append(pre);
});
</script>`;

function probe(
  html: string,
  width: number,
): {
  overflow: number;
  charts: { title: string; overlaps: string[]; axisTitles: number; bars: number; values: number; outside: number }[];
} {
  const dir = scratchDir('kvroute-html-');
  const file = join(dir, 'report.html');
  writeFileSync(file, html.replace('</body>', `${PROBE}</body>`));
  const dom = execFileSync(
    chromium(),
    [
      '--headless=new',
      '--no-sandbox',
      '--disable-gpu',
      `--window-size=${width},900`,
      '--virtual-time-budget=3000',
      '--dump-dom',
      pathToFileURL(file).href,
    ],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 60_000 },
  );
  const m = /<pre id="probe">([^<]*)<\/pre>/.exec(dom);
  if (!m) throw new Error('the probe did not run in Chromium');
  return JSON.parse(
    m[1]
      .replace(/&quot;/g, '"')
      .replace(/&amp;/g, '&')
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>'),
  );
}

describe.each(BACKENDS)('the replay HTML report (%s)', (backend) => {
  test('renders in headless Chromium at desktop and phone widths without overlaps or overflow', async () => {
    const report = await replay({
      trace: generateTrace({ requests: 300, seed: 3 }),
      workers: 16,
      policies: ['kv', 'round-robin'],
      backend,
      seed: 5,
    });
    const html = renderHtml(report);
    // The run's configuration and both per-worker charts are on the page.
    for (const key of ['blockSize', 'numGpuBlocks', 'seed', 'backend']) expect(html).toContain(`<th>${key}</th>`);
    expect(html).toContain(`<td>${backend}</td>`);
    for (const width of [1280, 390]) {
      const page = probe(html, width);
      expect(page.overflow).toBeLessThanOrEqual(0);
      expect(page.charts.map((c) => c.title)).toEqual([
        'TTFT (CDF)',
        'End-to-end latency (CDF)',
        'Requests per worker',
        'Prefix-cache hit ratio per worker',
      ]);
      for (const c of page.charts) {
        expect(c.overlaps, `${c.title} at ${width}px`).toEqual([]);
        expect(c.axisTitles).toBe(2);
        expect(c.values).toBe(c.bars);
        expect(c.outside).toBeLessThanOrEqual(0);
      }
      expect(page.charts[2].bars).toBe(32);
    }
  });
});
