/** Reads a `/metrics` endpoint through a real Prometheus text parser. */
import parsePrometheus from 'parse-prometheus-text-format';

type Family = { name: string; type: string; metrics: { value?: string; labels?: Record<string, string> }[] };

/** The scrape's series: `sum(name, labels?)` adds the values of a family's series that carry `labels`; `has(name)` says whether the family is exposed. */
export async function scrape(
  url: string,
): Promise<{ sum: (name: string, labels?: Record<string, string>) => number; has: (name: string) => boolean }> {
  const families = new Map((parsePrometheus(await (await fetch(url)).text()) as Family[]).map((f) => [f.name, f]));
  return {
    has: (name) => families.has(name),
    sum: (name, labels = {}) =>
      (families.get(name)?.metrics ?? [])
        .filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
        .reduce((n, m) => n + Number(m.value ?? 0), 0),
  };
}
