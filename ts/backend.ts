/**
 * Backend selection. `KVROUTE_BACKEND` (`native`, `js` or `auto`, the default) picks the
 * process-wide default once, at import; classes and functions also accept `{ backend }` to pick
 * one per object, which is how the test suite runs everything against both.
 */

import type { Backend, BackendName } from './backend-types.js';
import { KvRouteError } from './errors.js';
import { jsHashing } from './js/hashing.js';
import { JsIndex } from './js/index/js-index.js';
import { decodeEngineBatchJs } from './js/ingest/decode.js';
import { JsRouterCore } from './js/router-core.js';
import { jsTextTokenizer } from './js/text-tokenizer.js';
import { nativeBackend } from './native/backend.js';
import { loadNativeBinding } from './native/binding.js';
import { JsFleet } from './replay/fleet.js';
import { describe } from './validate.js';

export type { BackendName } from './backend-types.js';

const JS_BACKEND: Backend = {
  name: 'js',
  hashing: jsHashing,
  createIndex: () => new JsIndex(),
  decodeEngineBatch: decodeEngineBatchJs,
  createRouterCore(index) {
    if (!(index instanceof JsIndex)) throw new KvRouteError('ERR_INTERNAL', 'a JS router core needs a JS index');
    return new JsRouterCore(index);
  },
  createReplayFleet: (spec) => new JsFleet(spec),
  createTextTokenizer: jsTextTokenizer,
};

const nativeLoad = loadNativeBinding();
const NATIVE_BACKEND: Backend | undefined = nativeLoad.binding ? nativeBackend(nativeLoad.binding) : undefined;

/**
 * Why the native backend could not be loaded, or `undefined` when it loaded. When `auto`
 * fell back to JS, this is the reason.
 * @group Backends
 */
export const nativeLoadError: string | undefined = nativeLoad.error;

function nativeUnavailable(): KvRouteError {
  return new KvRouteError('ERR_NATIVE_UNAVAILABLE', `the native backend cannot be loaded: ${nativeLoadError}`);
}

function chooseDefault(): BackendName {
  const requested = process.env.KVROUTE_BACKEND ?? 'auto';
  switch (requested) {
    case 'auto':
    case '':
      if (NATIVE_BACKEND) return 'native';
      // An explicit binding path that does not load is a configuration error, not a reason to
      // run slower without saying so.
      if (process.env.KVROUTE_NATIVE_PATH) {
        throw new KvRouteError('ERR_NATIVE_UNAVAILABLE', `KVROUTE_NATIVE_PATH is set but does not load: ${nativeLoadError}`);
      }
      if (process.env.KVROUTE_NO_FALLBACK_WARNING !== '1') {
        process.emitWarning(
          `the native backend cannot be loaded (${nativeLoadError}); kvroute runs on the pure-JS backend, which behaves the same and is slower. Set KVROUTE_BACKEND=js to choose it explicitly, or KVROUTE_NO_FALLBACK_WARNING=1 to silence this.`,
          { type: 'KvRouteWarning', code: 'KVROUTE_JS_FALLBACK' },
        );
      }
      return 'js';
    case 'js':
      return 'js';
    case 'native':
      if (!NATIVE_BACKEND) throw nativeUnavailable();
      return 'native';
    default:
      throw new KvRouteError('ERR_INVALID_ARG', `KVROUTE_BACKEND must be native, js or auto, got "${requested}"`);
  }
}

/**
 * The backend used when none is given: what `KVROUTE_BACKEND` (default `auto`) chose.
 * @group Backends
 */
export const backend: BackendName = chooseDefault();

/**
 * True when the native backend loaded on this machine.
 * @group Backends
 */
export const nativeAvailable: boolean = NATIVE_BACKEND !== undefined;

/**
 * Resolves a `backend` option to an implementation.
 * @internal
 */
export function resolveBackend(requested: unknown, optionName = 'backend'): Backend {
  const name = requested ?? backend;
  if (name === 'js') return JS_BACKEND;
  if (name === 'native') {
    if (!NATIVE_BACKEND) throw nativeUnavailable();
    return NATIVE_BACKEND;
  }
  throw new KvRouteError('ERR_INVALID_ARG', `${optionName} must be 'native' or 'js', got ${describe(name)}`);
}
