import type { Config } from '../../runtime/config.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CleanupStack } from '../../runtime/cleanup-stack.ts';
import type { Metrics } from '../../runtime/metrics/index.ts';
import { CatalogSource } from '../../runtime/catalog-source.ts';
import type { DeploymentRecord, ModelCatalog } from '../../domain/catalog/index.ts';
import type { StartSettings } from './start-settings.ts';

/** Every deployment of every catalog served since the start: a job of one a reload removed finishes on it. */
export class DeploymentBook {
  private readonly records = new Map<string, DeploymentRecord>();
  private readonly retargetListeners: Array<(deploymentId: string) => void> = [];

  get(deploymentId: string): DeploymentRecord | undefined {
    return this.records.get(deploymentId);
  }

  /** Told of each deployment a reload gave another target (its adapter is made again). */
  onRetarget(listener: (deploymentId: string) => void): void {
    this.retargetListeners.push(listener);
  }

  remember(catalog: ModelCatalog): void {
    for (const deployment of catalog.deployments()) {
      const before = this.records.get(deployment.id);
      this.records.set(deployment.id, deployment);
      if (before && JSON.stringify(before.target) !== JSON.stringify(deployment.target)) {
        for (const listener of this.retargetListeners) listener(deployment.id);
      }
    }
  }
}

export interface ServedCatalog {
  /** The catalog served; each request reads the one current then. */
  source: CatalogSource;
  deployments: DeploymentBook;
  /** Told of each new catalog served, after its deployments are remembered. */
  onChanged(listener: (catalog: ModelCatalog) => void): void;
}

/** The catalog served, from the file read at start; it follows the file once `followCatalogFile` starts it. */
export function buildCatalog(config: Config, settings: StartSettings, metrics: Metrics | undefined, logger: Logger): ServedCatalog {
  const deployments = new DeploymentBook();
  deployments.remember(settings.firstCatalog);
  const listeners: Array<(catalog: ModelCatalog) => void> = [];
  // Reloaded on SIGHUP and when its file changes.
  const source = new CatalogSource(settings.firstCatalog, {
    file: config.catalog.file,
    build: settings.catalogBuild,
    pollMs: config.catalog.pollMs,
    onChanged: (catalog) => {
      deployments.remember(catalog);
      for (const listener of listeners) listener(catalog);
    },
    // Each reload counted once by its outcome, whatever asked for it (SIGHUP, the file's events, the poll).
    onOutcome: (result) => {
      metrics?.catalog.reloaded(result.outcome);
      if (result.outcome === 'applied') {
        const catalog = source.current;
        logger.info({ file: config.catalog.file, version: catalog.version, models: catalog.all().length, plans: catalog.plans().length }, 'catalog reloaded');
      } else if (result.outcome === 'refused') {
        logger.error({ file: config.catalog.file, problems: result.problems }, 'the catalog file was refused; the catalog served stays as it was');
      } else {
        logger.info(
          { file: config.catalog.file, version: result.version, ...(result.problems ? { problems: result.problems } : {}) },
          'catalog file unchanged',
        );
      }
    },
  });
  return { source, deployments, onChanged: (listener) => listeners.push(listener) };
}

/** Starts following the catalog file; stopped first of what the actors used, once they have stopped. */
export function followCatalogFile(stack: CleanupStack, catalog: ServedCatalog, metrics: Metrics | undefined): void {
  metrics?.catalog.observe(() => catalog.source.current.version);
  catalog.source.start();
  stack.defer(() => catalog.source.stop());
}
