import type { Reply } from '../../route.ts';
import type { Services } from '../../services.ts';
import type { Ended } from './door-job.ts';

/**
 * What the door answers of a job that did not succeed, in OpenAI's error shape, with a status the SDKs map
 * to their classes (docs/openai-compatible.md, Errors): the provider refused the input 400, its rate limit
 * 429, a timeout 504, any other provider failure 502; expired in the queue 503; cancelled 409.
 */
const STATUS_OF_ERROR: Record<string, number> = {
  provider_input_rejected: 400,
  provider_content_policy: 400,
  provider_rate_limited: 429,
  provider_timeout: 504,
  storage_limit_reached: 507,
};

export function failureOf(generation: Ended): { status: number; body: { error: { message: string; type: string; param: null; code: string } } } {
  const status = generation.status === 'cancelled' ? 409 : generation.status === 'expired' ? 503 : (STATUS_OF_ERROR[generation.errorCode ?? ''] ?? 502);
  const message =
    generation.status === 'cancelled'
      ? `The generation ${generation.id} was cancelled.`
      : generation.status === 'expired'
        ? `The generation ${generation.id} waited in its workspace's queue past its deadline.`
        : (generation.errorMessage ?? 'The generation failed.');
  const code = generation.status === 'failed' ? (generation.errorCode ?? 'generation_failed') : `generation_${generation.status}`;
  return { status, body: { error: { message, type: status >= 500 ? 'server_error' : 'invalid_request_error', param: null, code } } };
}

export function failureReply(generation: Ended): Reply {
  const failure = failureOf(generation);
  return { status: failure.status, body: failure.body, headers: { 'X-Generation-Id': generation.id } };
}

/** The jobs a node keeps following after their client went away, until their end (OPENAI_DRAINS_PER_NODE). */
const draining = new WeakMap<Services, { active: number }>();

/**
 * The client of a job went away before its end: the job goes on to its end (its provider's usage is the
 * billing truth) while this node drains fewer than its bound; past it, it is cancelled, and charged for
 * what it streamed (actors/generation/actor.ts, chargedRow). `ended` tells when a drained job ends.
 */
export function clientGone(services: Services, workspaceId: string, generationId: string): { ended(): void } {
  let count = draining.get(services);
  if (!count) {
    count = { active: 0 };
    draining.set(services, count);
  }
  if (count.active < services.config.door.drainsPerNode) {
    count.active++;
    const held = count;
    let done = false;
    return {
      ended: () => {
        if (done) return;
        done = true;
        held.active--;
      },
    };
  }
  services.actors.ask('gen', generationId, { type: 'cancel', by: 'user' }).catch((error: unknown) => {
    services.logger.warn({ err: error, generationId, workspaceId }, 'cancelling a job whose client went away failed');
  });
  return { ended: () => {} };
}

/** Jobs drained now on this node (tests and metrics). */
export function drainingNow(services: Services): number {
  return draining.get(services)?.active ?? 0;
}
