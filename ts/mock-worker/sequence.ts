/**
 * One sampled sequence of a completion or chat request: what the mock model would say, where the
 * request's stops end it (so the engine generates only that much and its KV cache holds only
 * that), and what the client is shown of it, whole or token by token: the echoed prompt, the text
 * cut at a stop, vLLM's `finish_reason` and `stop_reason`, and log probabilities when asked for.
 * @module
 */

import { chatLogprobs, completionLogprobs, type PositionLogprobs, positionLogprobs } from './logprobs.js';
import type { ParsedRequest } from './openai.js';
import { mockOutput } from './output.js';
import { type SequenceEnd, StreamedText, sequenceEnd } from './stop.js';
import { detokenize } from './tokenizer.js';

/** A choice of the response: its text, logprobs, how it ended, and its token ids when asked for. */
export interface ChoiceOut {
  text: string;
  logprobs: unknown;
  end: SequenceEnd;
  /** With `return_token_ids`: the prompt's and the generated tokens (a stop's included, as the engine made them). */
  tokenIds?: { prompt: number[]; output: number[] };
}

/** What one streamed chunk adds: its tokens' text (maybe empty, while a stop string may still match), logprobs, and their ids when asked for. */
export interface StreamDelta {
  text: string;
  logprobs: unknown;
  /** With `return_token_ids`: the chunk's token ids, and on a completion's first chunk the prompt's. */
  tokenIds?: { prompt?: number[]; output: number[] };
}

export class MockSequence {
  /** The tokens the engine generates for this sequence. */
  readonly output: number[];
  readonly end: SequenceEnd;
  private readonly text: string;
  private readonly streamed: StreamedText;
  /** Text offset of the next streamed token (completions' logprobs count it). */
  private offset = 0;
  private echoed = false;

  /**
   * @param prompt the prompt's tokens as the engine runs them
   * @param seed the seed this sample's text is drawn with
   */
  constructor(
    private readonly req: ParsedRequest,
    readonly prompt: number[],
    seed: number,
  ) {
    const whole = mockOutput(prompt, req.maxTokens, seed);
    // ASCII words: one character per token, so the text's positions are the output's.
    const wholeText = detokenize(whole);
    // vLLM runs an echo of the prompt alone (`max_tokens` 0) as one generated token it does not show.
    this.end = req.echoOnly
      ? { generated: whole.length, shown: 0, finishReason: 'length', stopReason: null }
      : sequenceEnd(whole, wholeText, req.sampling);
    this.output = whole.slice(0, this.end.generated);
    this.text = wholeText.slice(0, this.end.generated);
    this.streamed = new StreamedText(this.text, this.end, req.sampling);
  }

  /** The text that comes before the generated text: the prompt's (completions) or the assistant message's it continues (chat). */
  private get echo(): string {
    if (!this.req.sampling.echo) return '';
    if (this.req.chat) return this.req.chatEcho;
    // With `return_token_ids` vLLM gives a completion's prompt as its ids alone: the echoed
    // text is empty (its logprobs still cover the prompt).
    return this.req.sampling.returnTokenIds ? '' : detokenize([...this.prompt]);
  }

  /** Log probabilities of `tokens` at output positions from `from`, with the prompt's first (`withPrompt`, completions' echo). */
  private logprobs(tokens: readonly number[], from: number, withPrompt: boolean): unknown {
    const k = this.req.sampling.logprobs;
    if (k === undefined) return null;
    const out = tokens.map((t, i) => positionLogprobs(this.prompt.length + from + i, t, k));
    if (this.req.chat) return chatLogprobs(out, k);
    const prompt: (PositionLogprobs | null)[] = withPrompt ? this.prompt.map((t, i) => (i === 0 ? null : positionLogprobs(i, t, k))) : [];
    return completionLogprobs([...prompt, ...out], [...(withPrompt ? this.prompt : []), ...tokens], k, this.offset);
  }

  /** The whole choice. */
  choice(): ChoiceOut {
    const echoPrompt = this.req.sampling.echo && !this.req.chat;
    // An echo without generation reports the prompt alone, and its logprobs.
    const reported = this.req.echoOnly ? [] : this.output;
    const text = this.echo + this.text.slice(0, this.end.shown);
    const ids = this.req.sampling.returnTokenIds ? { tokenIds: { prompt: this.prompt, output: this.output } } : {};
    return { text, logprobs: this.logprobs(reported, 0, echoPrompt), end: this.end, ...ids };
  }

  /**
   * What generated tokens `from` up to `to` (0-based, `to` excluded; each token once, in order)
   * add to the stream: one token, or several when the engine streams at an interval; a
   * completion's echo comes with the first.
   */
  delta(from: number, to: number): StreamDelta {
    const first = !this.echoed;
    this.echoed = true;
    const echoPrompt = first && this.req.sampling.echo && !this.req.chat;
    // A chat's echo and prompt ids come in its opening chunks (`chatOpening`), a completion's here.
    let text = first && !this.req.chat ? this.echo : '';
    if (!this.req.echoOnly) for (let i = from; i < to; i++) text += this.streamed.next(i);
    // Built only when asked for: this runs once per streamed chunk.
    const logprobs =
      this.req.sampling.logprobs === undefined
        ? null
        : this.logprobs(this.req.echoOnly ? [] : this.output.slice(from, to), from, echoPrompt);
    this.offset += text.length;
    if (!this.req.sampling.returnTokenIds) return { text, logprobs };
    return {
      text,
      logprobs,
      tokenIds: { ...(first && !this.req.chat ? { prompt: this.prompt } : {}), output: this.output.slice(from, to) },
    };
  }
}
