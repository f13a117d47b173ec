import { readFileSync } from 'node:fs';
import type { Config } from '../../runtime/config.ts';
import { readCatalogFileSync } from '../../runtime/catalog-source.ts';
import { ADAPTER_KINDS, readProviderSettings, targetProblems } from '../../providers/kinds.ts';
import type { ModelCatalog } from '../../domain/catalog/index.ts';
import { loadUws } from '../../http/uws.ts';
import { StartupError } from './startup-error.ts';

export const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

/** Provider kinds the catalog may name: the built-in local one and the adapters' (providers/kinds.ts). */
const PROVIDER_KINDS = ['local', ...Object.keys(ADAPTER_KINDS)];

export interface StartSettings {
  engine: ReturnType<typeof loadUws>['engine'];
  /** Each provider kind's settings, from the environment. */
  kinds: ReturnType<typeof readProviderSettings>['settings'];
  /** How a catalog file is read: the first one here, each reload later. */
  catalogBuild: Parameters<typeof readCatalogFileSync>[1];
  firstCatalog: ModelCatalog;
}

/** What must be right before anything opens: the HTTP engine, each provider kind's settings, the catalog file. */
export function readStartSettings(config: Config): StartSettings {
  const { engine } = loadUws();
  if (engine === 'uws-fallback' && !config.allowUwsFallback) {
    throw new StartupError(
      'uWebSockets.js could not load its native addon and fell back to its slow pure-Node emulation; set ALLOW_UWS_FALLBACK=true to run on it anyway.',
    );
  }
  const kinds = readProviderSettings(config.env);
  if (kinds.problems.length > 0) throw new StartupError(`provider settings:\n  ${kinds.problems.join('\n  ')}`, 78);
  const catalogBuild = {
    knownProviders: new Set<string>(PROVIDER_KINDS),
    configuredProviders: new Set<string>(['local', ...kinds.settings.keys()]),
    requestsPerMinuteOverrides: config.rateLimitOverrides,
    targetProblems,
    env: config.env,
  };
  const firstCatalog = readCatalogFileSync(config.catalog.file, catalogBuild);
  if (!firstCatalog.ok) {
    throw new StartupError(
      `the catalog file ${config.catalog.file} has ${firstCatalog.problems.length} problem${firstCatalog.problems.length === 1 ? '' : 's'}:\n  ${firstCatalog.problems.join('\n  ')}`,
      78,
    );
  }
  return { engine, kinds: kinds.settings, catalogBuild, firstCatalog: firstCatalog.catalog };
}
