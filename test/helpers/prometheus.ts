/** Reads a `/metrics` endpoint through a real Prometheus text parser. */
import parsePrometheus from 'parse-prometheus-text-format';
import { type Dispatcher, request } from 'undici';

export type Family = {
  name: string;
  type: string;
  metrics: { value?: string; count?: string; labels?: Record<string, string> }[];
};

export interface Scrape {
  /** The families by name. */
  families: Map<string, Family>;
  /** Adds the values (a histogram's counts, from its `_count` lines) of a family's series that carry `labels`. */
  sum(name: string, labels?: Record<string, string>): number;
  /** Whether the family is exposed. */
  has(name: string): boolean;
}

/**
 * A histogram's `_count` series, read from the text: the parser loses a histogram's labels when
 * `le` comes first in its bucket lines, as prom-client writes them.
 */
function histogramCounts(text: string, name: string): { value: string; labels: Record<string, string> }[] {
  const out: { value: string; labels: Record<string, string> }[] = [];
  for (const line of text.split('\n')) {
    const m = /^(\w+)_count(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    out.push({ value: m[3], labels });
  }
  return out;
}

/** Reads `url`; over HTTPS with a self-signed or client certificate, through `dispatcher` (an undici Agent). */
export async function scrape(url: string, dispatcher?: Dispatcher): Promise<Scrape> {
  const text = dispatcher ? await (await request(url, { dispatcher })).body.text() : await (await fetch(url)).text();
  const parsed = parsePrometheus(text) as Family[];
  const families = new Map(parsed.map((f) => [f.name, f]));
  return {
    families,
    has: (name) => families.has(name),
    sum: (name, labels = {}) => {
      const family = families.get(name);
      const series = family?.type === 'HISTOGRAM' ? histogramCounts(text, name) : (family?.metrics ?? []);
      return series
        .filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
        .reduce((n, m) => n + Number((m as { value?: string }).value ?? (m as { count?: string }).count ?? 0), 0);
    },
  };
}
