/**
 * The mock worker's descriptions of itself, in the engines' shapes: vLLM's and SGLang's
 * `GET /version`, and SGLang's `GET /get_model_info` and `/get_server_info` (newer SGLang names
 * the latter `/server_info`), which SGLang's own clients read when they connect. Only the fields
 * a client reads to find the model and its limits; the mock's version is kvroute's.
 * @internal
 * @module
 */

import type { FastifyInstance } from 'fastify';
import { packageVersion } from '../version.js';
import type { ResolvedMockOptions } from './options.js';

export function registerServerInfo(app: FastifyInstance, o: ResolvedMockOptions): void {
  app.get('/version', async () => ({ version: packageVersion() }));
  app.get('/get_model_info', async () => ({ model_path: o.model, tokenizer_path: o.model, is_generation: true }));
  const serverInfo = async () => ({
    model_path: o.model,
    served_model_name: o.model,
    page_size: o.blockSize,
    dp_size: o.dpSize,
    context_length: o.maxModelLen,
    version: packageVersion(),
  });
  app.get('/get_server_info', serverInfo);
  app.get('/server_info', serverInfo);
}
