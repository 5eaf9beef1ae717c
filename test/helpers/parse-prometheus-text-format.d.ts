/** The test-only Prometheus text parser ships no types; this is the part the tests read. */
declare module 'parse-prometheus-text-format' {
  interface Family {
    name: string;
    help: string;
    type: string;
    metrics: { value?: string; count?: string; labels?: Record<string, string> }[];
  }
  export default function parse(text: string): Family[];
}
