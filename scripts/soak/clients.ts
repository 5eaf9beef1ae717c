/**
 * The soak's clients: completions (one prompt or a batch), chats, Anthropic messages and
 * Responses API turns on 12 shared prefixes, streamed and not, half of them in one of 40
 * sessions, one in seven left by its client at a random moment; each request's ending is classified, and whatever ends uncleanly (a cut
 * stream without an error event, a 4xx, a failed connection to the gateway) is kept in words.
 */

import type { Rng } from '../../test/helpers/random.js';

export class SoakClients {
  /** How the requests ended, by kind of ending. */
  readonly endings = new Map<string, number>();
  /** What ended uncleanly, in words. */
  readonly unclean: string[] = [];
  sent = 0;

  /**
   * `gateway`: the base URL of the gateway the next request goes to; `crashed`: the URLs of
   * gateways crashed on purpose, whose cut requests are expected.
   */
  constructor(
    private readonly rng: Rng,
    private readonly gateway: () => string,
    private readonly crashed: ReadonlySet<string> = new Set(),
  ) {}

  /** `count` clients, each sending one request after another until `over()`. */
  async run(count: number, over: () => boolean): Promise<void> {
    await Promise.all(
      Array.from({ length: count }, async () => {
        while (!over()) await this.oneRequest(this.sent++);
      }),
    );
  }

  private ended(how: string, why?: string): void {
    this.endings.set(how, (this.endings.get(how) ?? 0) + 1);
    if (why !== undefined) this.unclean.push(why);
  }

  /** The body and path of one request: a completion (one prompt or a batch), a chat, an Anthropic message or a Responses API turn. */
  private requestOf(n: number, prefix: string, stream: boolean): { path: string; body: Record<string, unknown> } {
    const kind = this.rng.int(100);
    const maxTokens = 4 + this.rng.int(40);
    const prompt = `${prefix} q${n}`;
    if (kind < 50) return { path: 'completions', body: { model: 'mock-model', prompt, max_tokens: maxTokens, stream } };
    if (kind < 62) {
      const prompts = Array.from({ length: 2 + this.rng.int(2) }, (_, i) => `${prompt} part ${i}`);
      return { path: 'completions', body: { model: 'mock-model', prompt: prompts, max_tokens: maxTokens, stream } };
    }
    const messages = [{ role: 'user', content: prompt }];
    if (kind < 80) return { path: 'chat/completions', body: { model: 'mock-model', messages, max_tokens: maxTokens, stream } };
    if (kind < 90) return { path: 'messages', body: { model: 'mock-model', messages, max_tokens: maxTokens, stream } };
    return { path: 'responses', body: { model: 'mock-model', input: prompt, max_output_tokens: maxTokens, stream } };
  }

  /** One request on one of 12 shared prefixes, streamed or not, perhaps left by its client. */
  private async oneRequest(n: number): Promise<void> {
    const prefix = `${'shared system prompt '.repeat(8)}${this.rng.int(12)} `.repeat(4);
    const stream = this.rng.chance(0.6);
    const { path, body } = this.requestOf(n, prefix, stream);
    const leaveAfterMs = this.rng.chance(0.15) ? this.rng.int(400) : undefined;
    const client = new AbortController();
    const leave = leaveAfterMs === undefined ? undefined : setTimeout(() => client.abort(), leaveAfterMs);
    const url = this.gateway();
    // Half the requests belong to one of 40 sessions, which the routers bind to a worker.
    const session: Record<string, string> = this.rng.chance(0.5) ? { 'x-dynamo-session-id': `session ${this.rng.int(40)}` } : {};
    try {
      const res = await fetch(`${url}/v1/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...session },
        body: JSON.stringify(body),
        signal: client.signal,
      });
      const text = await res.text();
      if (res.status !== 200) this.ended(`status ${res.status}`, res.status < 500 ? `${res.status} ${text.slice(0, 200)}` : undefined);
      else if (!stream) this.ended('whole');
      else if (/"error":\{|event: error|event: response\.failed/.test(text)) this.ended('stream ended by an error event');
      else if (/data: \[DONE\]\s*$|event: message_stop|event: response\.completed/.test(text)) this.ended('stream whole');
      else this.ended('stream cut without an error event', text.slice(-200));
    } catch (err) {
      if (client.signal.aborted) this.ended('left by its client');
      else if (this.crashed.has(url)) this.ended('cut by its gateway crashing');
      else this.ended('gateway connection failed', `${url}: ${(err as Error).message} ${(err as { cause?: Error }).cause?.message ?? ''}`);
    } finally {
      clearTimeout(leave);
    }
  }
}
