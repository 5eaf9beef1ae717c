/**
 * TensorRT-LLM's hand-over between a request's two legs (`trtllm-serve` context and generation
 * servers with a cache transceiver), as its own disaggregated server drives it: the context leg
 * carries `disaggregated_params.request_type: "context_only"`; its answer's first choice carries
 * the parameters (`ctx_request_id`, `first_gen_tokens`, `encoded_opaque_state`, ...) that the
 * generation leg sends back with `request_type: "generation_only"`, and the prompt's token ids,
 * which a completion's generation leg sends as its prompt. A context answer that already ended
 * (a stop at the first token) is the request's answer: no generation leg runs.
 * @internal
 * @module
 */

import type { TwoStepProtocol } from './legs.js';

/** The finish reasons of a context answer whose request goes on in a generation leg (TensorRT-LLM's proxy's rule). */
const GOES_ON = new Set(['length', 'not_finished']);

interface ContextAnswer {
  choices?: { finish_reason?: unknown; disaggregated_params?: unknown }[];
  prompt_token_ids?: unknown;
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

export const TRTLLM_HANDOVER: TwoStepProtocol = {
  gatewaySet: ['disaggregated_params'],
  /** The request unstreamed, as a context-only request (the server generates its first token). */
  prefillBody(body) {
    const { stream_options: _options, ...rest } = body;
    return JSON.stringify({ ...rest, stream: false, disaggregated_params: { request_type: 'context_only' } });
  },
  /** The request as a generation-only one with the context answer's parameters; without any, the request as sent (a generation server serves it whole). */
  decodeBody(body, answer, forward) {
    const first = (answer as ContextAnswer | undefined)?.choices?.[0];
    if (first !== undefined && typeof first.finish_reason === 'string' && !GOES_ON.has(first.finish_reason)) {
      // The client's answer, without what was for the generation leg (as TensorRT-LLM's proxy drops it).
      const { disaggregated_params: _params, ...choice } = first;
      const { prompt_token_ids: _ids, ...rest } = answer as Record<string, unknown>;
      return { finished: { ...rest, choices: [choice, ...((answer as ContextAnswer).choices ?? []).slice(1)] } };
    }
    const params = first?.disaggregated_params;
    if (!isRecord(params)) return { body: forward, transferred: false };
    const ids = (answer as ContextAnswer).prompt_token_ids;
    // A completion's generation leg takes the prompt as the context server tokenized it, as
    // TensorRT-LLM's proxy sends it; a chat's messages are rendered again.
    const prompt = body.prompt !== undefined && Array.isArray(ids) && ids.every(Number.isInteger) ? { prompt: ids } : {};
    return {
      body: JSON.stringify({ ...body, ...prompt, disaggregated_params: { ...params, request_type: 'generation_only' } }),
      transferred: true,
    };
  },
};
