/**
 * Documented maximums of the API, enforced with `ERR_INVALID_ARG` (or `ERR_INVALID_EVENT` for
 * events), so that a corrupted or hostile argument fails loudly instead of exhausting memory or
 * the stack. Each is far above what a real fleet uses.
 * @module
 */

/**
 * Workers registered in one router.
 * @group Limits
 */
export const MAX_WORKERS = 65_536;
/**
 * Data-parallel ranks of one worker (`dataParallelSize`).
 * @group Limits
 */
export const MAX_RANKS_PER_WORKER = 1024;
/**
 * Characters of a session id (`RouteRequest.sessionId`, the gateway's session header, a peer's
 * binding).
 * @group Limits
 */
export const MAX_SESSION_ID_LENGTH = 1024;
/**
 * Tokens in one request (16 Mi: far beyond any model's context).
 * @group Limits
 */
export const MAX_TOKENS_PER_REQUEST = 1 << 24;
/**
 * Blocks (or hashes) in one KV event.
 * @group Limits
 */
export const MAX_BLOCKS_PER_EVENT = 1 << 20;
/**
 * Prompts in one request's `batchPrompts` (besides its `tokens`): each is scored on every
 * candidate, so a batch's routing time grows with it.
 * @group Limits
 */
export const MAX_PROMPTS_PER_BATCH = 4096;
