/**
 * The LoRA adapters a mock worker serves, as vLLM keeps them: by name, each with the integer id
 * the engine hashes into its blocks and publishes (`lora_id`), given in load order from 1 and
 * never reused. Those of `loraModules` are loaded at start; with `runtimeLoraUpdating` (vLLM's
 * `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`) `POST /v1/load_lora_adapter` and
 * `/v1/unload_lora_adapter` add and remove them while it runs, answered as vLLM answers them.
 * @internal
 * @module
 */

import type { FastifyInstance } from 'fastify';
import { BadRequest, NotFound } from './bad-request.js';

/** An adapter's name, and the integer id vLLM gives it. */
export class LoraAdapters {
  private readonly ids = new Map<string, number>();
  private nextId = 1;

  constructor(private readonly initial: readonly string[]) {
    this.reset();
  }

  /** Back to the adapters loaded at start, numbered from 1 again (what a restarted engine serves). */
  reset(): void {
    this.ids.clear();
    this.nextId = 1;
    for (const name of this.initial) this.load(name);
  }

  /** The adapter's id, or undefined when it is not loaded. */
  id(name: string): number | undefined {
    return this.ids.get(name);
  }

  /** The loaded adapters' names, in load order. */
  names(): string[] {
    return [...this.ids.keys()];
  }

  load(name: string): number {
    const id = this.nextId++;
    this.ids.set(name, id);
    return id;
  }

  unload(name: string): boolean {
    return this.ids.delete(name);
  }
}

function nameOf(body: unknown): string {
  const name = (body as { lora_name?: unknown } | null)?.lora_name;
  if (typeof name !== 'string' || name === '') throw new BadRequest("'lora_name' must be provided.");
  return name;
}

/** vLLM's runtime adapter routes (its texts): a name already loaded is 400, an unknown one 404. */
export function registerLoraUpdating(app: FastifyInstance, adapters: LoraAdapters, model: string): void {
  app.post('/v1/load_lora_adapter', async (req, reply) => {
    const name = nameOf(req.body);
    const path = (req.body as { lora_path?: unknown }).lora_path;
    if (typeof path !== 'string' || path === '') throw new BadRequest("Both 'lora_name' and 'lora_path' must be provided.");
    if (name === model || adapters.id(name) !== undefined) throw new BadRequest(`The lora adapter '${name}' has already been loaded.`);
    adapters.load(name);
    return reply.type('text/plain').send(`Success: LoRA adapter '${name}' added successfully.`);
  });
  app.post('/v1/unload_lora_adapter', async (req, reply) => {
    const name = nameOf(req.body);
    if (!adapters.unload(name)) throw new NotFound(`The lora adapter '${name}' cannot be found.`);
    return reply.type('text/plain').send(`Success: LoRA adapter '${name}' removed successfully.`);
  });
}
