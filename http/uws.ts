import { createRequire } from 'node:module';
import type * as UWS from 'uWebSockets.js';

export type Engine = 'uws-native' | 'uws-fallback';

const require = createRequire(import.meta.url);

/**
 * Loads uWebSockets.js and tells which engine it gave us: the package silently falls back
 * to a slow pure-Node emulation when its native addon cannot load.
 */
export function loadUws(): { uws: typeof UWS; engine: Engine } {
  const uws = require('uWebSockets.js') as typeof UWS;
  const native = Object.keys(require.cache).some((file) => /[\\/]uWebSockets\.js[\\/]binaries[\\/]uws_[^\\/]+\.node$/.test(file));
  return { uws, engine: native ? 'uws-native' : 'uws-fallback' };
}
