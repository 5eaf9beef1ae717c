/**
 * The router's key for a client's session. Dynamo runs a router per model, so a session that
 * talks to two models (an agent's planner and its executor) has a binding with each; one
 * `KvRouter` serves every model behind this gateway, so the model is part of the key: each
 * model's requests of the session stay on that model's worker, instead of the binding moving
 * every time the model changes. A key longer than the router takes is replaced by its SHA-256
 * (hex), which every replica computes alike.
 * @internal
 * @module
 */

import { createHash } from 'node:crypto';
import { MAX_SESSION_ID_LENGTH } from '../limits.js';

export function sessionKey(sessionId: string, model: string | undefined): string {
  if (model === undefined) return sessionId;
  const key = `${model}\u0000${sessionId}`;
  return key.length <= MAX_SESSION_ID_LENGTH ? key : createHash('sha256').update(key).digest('hex');
}
