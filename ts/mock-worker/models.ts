/**
 * The mock worker's `GET /v1/models`: vLLM's model cards, the base model first, then each LoRA
 * adapter with the base as its parent (an adapter's root is its name: the mock has no paths).
 * @module
 */

import { randomUUID } from 'node:crypto';

/** The model list as vLLM answers it. */
export function modelList(model: string, adapters: readonly string[], maxModelLen: number): unknown {
  const created = Math.floor(Date.now() / 1000);
  return {
    object: 'list',
    data: [model, ...adapters].map((id, i) => ({
      id,
      object: 'model',
      created,
      owned_by: 'vllm',
      root: id,
      parent: i === 0 ? null : model,
      max_model_len: maxModelLen,
      permission: [modelPermission(created)],
    })),
  };
}

/** The permission vLLM lists with each model card (always the same grants). */
function modelPermission(created: number): unknown {
  return {
    id: `modelperm-${randomUUID().replaceAll('-', '')}`,
    object: 'model_permission',
    created,
    allow_create_engine: false,
    allow_sampling: true,
    allow_logprobs: true,
    allow_search_indices: false,
    allow_view: true,
    allow_fine_tuning: false,
    organization: '*',
    group: null,
    is_blocking: false,
  };
}
