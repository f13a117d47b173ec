import type { Tracer } from '@opentelemetry/api';
import type { SecretBox } from '../../persistence/secret-box.ts';
import type { InFlightCounter } from '../../runtime/in-flight.ts';
import type { DisablePolicy } from './auto-disable.ts';

/** What endpoint actors need from the service (part of ActorDeps). */
export interface WebhookDeps {
  /** Seals and opens the endpoints' signing secrets. */
  secrets: SecretBox;
  /** Time-out of one attempt (WEBHOOK_TIMEOUT_MS, default 10 s). */
  timeoutMs: number;
  /** ALLOW_PRIVATE_EGRESS: endpoints on loopback and private addresses are reachable (development and tests). */
  allowPrivateEgress: boolean;
  /** Development mode: loopback receivers allowed (config LOOPBACK_EGRESS). */
  allowLoopbackEgress?: boolean;
  tracer: Tracer;
  /** Source of jitter, 0 to 1. */
  random: () => number;
  /**
   * Cluster mode: attempts on the wire, by workspace. A shard's drain waits for them to end (and their
   * outcomes to be recorded) before the handover, so the next owner does not post them again.
   */
  attemptsInFlight?: InFlightCounter;
  /** When an endpoint disables itself (auto-disable.ts); default 5 days of failures, no expiry count. */
  autoDisable?: DisablePolicy;
}

/** Endpoint secrets are bound to this purpose in the key derivation. */
export const WEBHOOK_SECRET_PURPOSE = 'webhook-endpoint-signing-secret';
