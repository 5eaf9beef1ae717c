import { describe, expect, test } from 'vitest';
import { type MockWorkerOptions, mockTokenize } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { postJson } from './helpers/http.js';
import { mockWorkerSuite, PROMPT, textBlocks } from './helpers/mock-worker.js';
import { waitFor } from './helpers/wait.js';

const { subscribed } = mockWorkerSuite();

describe.each(BACKENDS)('mock worker: LoRA adapters and cache salts, published into kvroute (%s)', (backend) => {
  const fleetOf = (opts: MockWorkerOptions = {}) => subscribed(backend, opts);

  test.each([
    ['vllm-0.33', 'a1'],
    ['sglang', 'lora-id:1'],
  ] as const)(
    'LoRA adapters and cache salts: the engine keeps their blocks apart and publishes them so (%s wire; adapter indexed as %s)',
    async (wire, loraName) => {
      const { w, index, src } = await fleetOf({ wire, loraModules: ['a1'] });
      const scopes: [Record<string, string>, { loraName?: string; cacheNamespace?: string }][] = [
        [{}, {}],
        [{ model: 'a1' }, { loraName }],
        [{ cache_salt: 's1' }, { cacheNamespace: 's1' }],
        [
          { model: 'a1', cache_salt: 's1' },
          { loraName, cacheNamespace: 's1' },
        ],
      ];
      for (const [body] of scopes) {
        const r = await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 2, ...body });
        expect([r.json.model, r.json.usage.prompt_tokens_details.cached_tokens]).toEqual([body.model ?? 'mock-model', 0]);
      }
      const n = textBlocks(PROMPT);
      await waitFor(async () => {
        await index.flush();
        return index.stats().blocks >= 4 * n;
      }, 'four scopes of blocks');
      for (const [body, hash] of scopes)
        expect(
          index.findMatchesForRequest(mockTokenize(PROMPT), hash).scores.map((x) => x.blocks),
          JSON.stringify(body),
        ).toEqual([n]);
      expect(index.findMatchesForRequest(mockTokenize(PROMPT), { cacheNamespace: 's2' }).scores).toEqual([]);
      expect(src.stats().ranks[0]).toMatchObject({ decodeErrors: 0 });
      const models = (await (await fetch(`${w.url}/v1/models`)).json()) as { data: { id: string; parent: unknown }[] };
      expect(models.data.map((m) => [m.id, m.parent])).toEqual([
        ['mock-model', null],
        ['a1', 'mock-model'],
      ]);
      const unknown = await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, model: 'a2' });
      expect([unknown.status, unknown.json.error.message]).toEqual([404, 'The model `a2` does not exist.']);
    },
  );

  test("adapters loaded at run time: served, and published under a fresh id each load, as vLLM numbers them; vLLM's refusals", async () => {
    const { w, index } = await fleetOf({ wire: 'sglang', runtimeLoraUpdating: true, loraModules: ['a1'] });
    const load = (name: string, path = '/x') => postJson(`${w.url}/v1/load_lora_adapter`, { lora_name: name, lora_path: path });
    const unload = (name: string) => postJson(`${w.url}/v1/unload_lora_adapter`, { lora_name: name });
    const blocksUnder = async (prompt: string, loraName: string) => {
      await index.flush();
      return index.findMatchesForRequest(mockTokenize(prompt), { loraName }).scores.map((x) => x.blocks);
    };
    const other = 'An entirely different prompt, so every one of its blocks is new.';
    const ok = await load('x');
    expect([ok.status, ok.text]).toEqual([200, "Success: LoRA adapter 'x' added successfully."]);
    expect((await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, model: 'x', max_tokens: 2 })).status).toBe(200);
    // SGLang's wire names adapters by id: `a1` is 1, `x` is 2.
    await waitFor(async () => (await blocksUnder(PROMPT, 'lora-id:2')).length === 1, 'the adapter blocks');
    expect(await blocksUnder(PROMPT, 'lora-id:2')).toEqual([textBlocks(PROMPT)]);
    expect((await unload('x')).text).toBe("Success: LoRA adapter 'x' removed successfully.");
    expect((await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, model: 'x' })).status).toBe(404);
    // Loaded again it gets a new id (vLLM never reuses one); its blocks hash by name, so the cache still serves them.
    expect((await load('x')).status).toBe(200);
    const again = await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, model: 'x', max_tokens: 2 });
    expect(again.json.usage.prompt_tokens_details.cached_tokens).toBe(textBlocks(PROMPT) * 4);
    expect((await postJson(`${w.url}/v1/completions`, { prompt: other, model: 'x', max_tokens: 2 })).status).toBe(200);
    await waitFor(async () => (await blocksUnder(other, 'lora-id:3')).length === 1, 'the reloaded adapter blocks');
    const models = (await (await fetch(`${w.url}/v1/models`)).json()) as { data: { id: string; parent: unknown }[] };
    expect(models.data.map((m) => [m.id, m.parent])).toEqual([
      ['mock-model', null],
      ['a1', 'mock-model'],
      ['x', 'mock-model'],
    ]);
    // A restarted engine has only the adapters it was started with.
    w.fault({ kind: 'restart' });
    const served = async () => ((await (await fetch(`${w.url}/v1/models`)).json()) as { data: { id: string }[] }).data.map((m) => m.id);
    expect(await served()).toEqual(['mock-model', 'a1']);
    expect((await load('x')).status).toBe(200);
    for (const [r, status, message] of [
      [await load('x'), 400, "The lora adapter 'x' has already been loaded."],
      [await load('mock-model'), 400, "The lora adapter 'mock-model' has already been loaded."],
      [await load('y', ''), 400, "Both 'lora_name' and 'lora_path' must be provided."],
      [await unload('y'), 404, "The lora adapter 'y' cannot be found."],
      [await postJson(`${w.url}/v1/unload_lora_adapter`, {}), 400, "'lora_name' must be provided."],
    ] as const)
      expect([r.status, r.json.error.message]).toEqual([status, message]);
  });
});
