/** Reads a `/metrics` endpoint through a real Prometheus text parser. */
import parsePrometheus from 'parse-prometheus-text-format';

export type Family = {
  name: string;
  type: string;
  metrics: { value?: string; count?: string; labels?: Record<string, string> }[];
};

export interface Scrape {
  /** The families by name. */
  families: Map<string, Family>;
  /** Adds the values (a histogram's counts) of a family's series that carry `labels`. */
  sum(name: string, labels?: Record<string, string>): number;
  /** Whether the family is exposed. */
  has(name: string): boolean;
}

export async function scrape(url: string): Promise<Scrape> {
  const parsed = parsePrometheus(await (await fetch(url)).text()) as Family[];
  const families = new Map(parsed.map((f) => [f.name, f]));
  return {
    families,
    has: (name) => families.has(name),
    sum: (name, labels = {}) =>
      (families.get(name)?.metrics ?? [])
        .filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
        .reduce((n, m) => n + Number(m.value ?? m.count ?? 0), 0),
  };
}
