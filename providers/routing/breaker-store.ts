import { randomUUID } from 'node:crypto';
import type { Clock } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { RedisClient } from '../../runtime/redis.ts';
import type { BreakerMetrics } from '../../runtime/metrics/breakers.ts';
import {
  breakerSettings,
  verdictOf,
  DEFAULT_BREAKER_SETTINGS,
  type Admission,
  type BreakerSettings,
  type BreakerView,
  type JobOutcome,
  type Transition,
} from './breaker.ts';
import { MemoryBreakerBackend, type BreakerBackend } from './breaker-backend.ts';
import { RedisBreakerBackend } from './redis-breaker-store.ts';

export type { Admission, BreakerSettings, BreakerView, JobOutcome } from './breaker.ts';
export type { BreakerBackend } from './breaker-backend.ts';

/** Settings for every deployment (`defaults`, over DEFAULT_BREAKER_SETTINGS) and per deployment over those. */
export interface BreakerSettingsInput {
  defaults?: Partial<BreakerSettings>;
  deployments?: Record<string, Partial<BreakerSettings>> | ((deploymentId: string) => Partial<BreakerSettings> | undefined);
}

/** A deployment's breaker as read: its view and its id. */
export interface DeploymentBreaker extends BreakerView {
  deploymentId: string;
}

export interface BreakersOptions {
  /** Set (REDIS_URL): the state is shared by every node through Redis; unset, kept in this process. */
  redis?: RedisClient;
  /** REDIS_KEY_PREFIX; a deployment's keys are `<prefix>breaker:{<deployment>}` and its `:ok` and `:fail` windows. */
  prefix: string;
  clock: Clock;
  settings?: BreakerSettingsInput;
  /** The gauge reads `deployments()` through this store at each collection; transitions are counted as made. */
  metrics?: BreakerMetrics;
  deployments?: () => readonly string[];
  logger?: Logger;
}

/**
 * The circuit breakers of provider deployments, as the router consults them (docs/routing.md):
 *
 *   const admission = await breakers.admit(deploymentId);
 *   if (!admission.allowed) → another deployment, or wait until admission.retryAt
 *   … the job runs …
 *   await breakers.record(deploymentId, { ok: true } | { ok: false, errorCode, retryAfterMs? }, admission.ticket);
 *
 * Every admitted job must be recorded once, whatever its end (our own validation failures included: they are
 * neutral, and give a half-open ticket back). A store that cannot be reached never stops jobs: admit lets them
 * through and record drops the outcome, each with a warning.
 */
export class Breakers {
  private readonly defaults: BreakerSettings;
  readonly backend: BreakerBackend;

  constructor(
    private readonly options: BreakersOptions,
    backend?: BreakerBackend,
  ) {
    this.defaults = breakerSettings(options.settings?.defaults ?? {}, DEFAULT_BREAKER_SETTINGS);
    this.backend = backend ?? (options.redis ? new RedisBreakerBackend(options.redis, options.prefix) : new MemoryBreakerBackend());
    // Every deployment's own settings checked now, not at its first job.
    const perDeployment = options.settings?.deployments;
    if (perDeployment && typeof perDeployment === 'object') for (const id of Object.keys(perDeployment)) this.settingsOf(id);
    const deployments = options.deployments;
    if (options.metrics && deployments) {
      options.metrics.observe(async () => (await this.read(deployments())).map(({ deploymentId, status }) => ({ deploymentId, status })));
    }
  }

  /** Whether `redis` shares the state with other nodes, or `memory` keeps it in this process. */
  get kind(): 'memory' | 'redis' {
    return this.backend.kind;
  }

  settingsOf(deploymentId: string): BreakerSettings {
    const perDeployment = this.options.settings?.deployments;
    const own = typeof perDeployment === 'function' ? perDeployment(deploymentId) : perDeployment?.[deploymentId];
    return own ? breakerSettings(own, this.defaults) : this.defaults;
  }

  /** May a job go to this deployment now? A half-open breaker's one job gets `ticket`, to hand back to `record`. */
  async admit(deploymentId: string): Promise<Admission> {
    try {
      const { admission, transition } = await this.backend.admit(deploymentId, this.options.clock.now(), this.settingsOf(deploymentId), randomUUID());
      this.counted(deploymentId, transition);
      return admission;
    } catch (error) {
      this.options.logger?.warn({ err: error, deploymentId }, 'circuit breaker: the store did not answer; the job goes ahead');
      return { allowed: true };
    }
  }

  /** A job's outcome at the deployment; `ticket` is the one its admission gave, if any. */
  async record(deploymentId: string, outcome: JobOutcome, ticket?: string): Promise<void> {
    const settings = this.settingsOf(deploymentId);
    try {
      const transition = await this.backend.record(deploymentId, verdictOf(outcome, settings), this.options.clock.now(), settings, ticket, randomUUID());
      this.counted(deploymentId, transition);
    } catch (error) {
      this.options.logger?.warn({ err: error, deploymentId }, 'circuit breaker: the store did not answer; this outcome is not counted');
    }
  }

  /** The breakers of these deployments now, in their order (a deployment never seen reads closed). Throws if the store fails. */
  async read(deploymentIds: readonly string[]): Promise<DeploymentBreaker[]> {
    const views = await this.backend.read(deploymentIds, this.options.clock.now(), (id) => this.settingsOf(id));
    return views.map((view, i) => ({ deploymentId: deploymentIds[i]!, ...view }));
  }

  private counted(deploymentId: string, transition: Transition | undefined): void {
    if (!transition) return;
    this.options.metrics?.transition(deploymentId, transition.from, transition.to);
    this.options.logger?.info({ deploymentId, from: transition.from, to: transition.to }, 'circuit breaker changed state');
  }
}

/** The breakers of the service: in Redis when one is given (a cluster shares them), else in memory. */
export function createBreakers(options: BreakersOptions): Breakers {
  return new Breakers(options);
}
