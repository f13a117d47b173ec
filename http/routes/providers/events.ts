import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { placeReadBody } from '../../pipeline/placement.ts';
import { readLimited } from '../../../runtime/read-limited.ts';
import { Lru } from '../../../runtime/lru.ts';
import { jobOfProviderEvent } from '../../../persistence/stores/generations/provider-events.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

/** Providers' events are small (a prediction's state, a request id); larger ones are refused. */
const MAX_EVENT_BYTES = 1024 * 1024;

/** Event ids this node applied, to answer a redelivery without applying it twice (adapters keep one outcome besides). */
const applied = new Lru<string, true>(100_000);

export const ProviderEventAck = Type.Object(
  {
    received: Type.Literal(true),
    applied: Type.Boolean({ description: 'false for an event this node already took, or one about a job it does not know (acknowledged and ignored).' }),
  },
  { additionalProperties: false },
);

export const receiveProviderJobEvent = defineRoute({
  method: 'POST',
  path: '/v1/providers/:deployment/events',
  operationId: 'receiveProviderJobEvent',
  summary: "A provider's events about the jobs of one catalog deployment (Replicate, fal, Cog webhooks), verified before anything changes",
  description:
    "Where a provider sends its events about the jobs of one catalog deployment: Replicate's Standard Webhooks signature (webhook-id, webhook-timestamp, webhook-signature), fal's ED25519 signature (X-Fal-Webhook-*), or Cog's per-job token in the query. A bad signature is 400 and changes nothing; an event for an unknown job is acknowledged and ignored; any node takes an event and hands it to the node that runs the job.",
  tags: ['providers'],
  access: 'public',
  errors: ['payload_too_large', 'validation_error', 'not_found'],
  params: Type.Object({ deployment: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false }),
  query: Type.Object({}, { additionalProperties: true }),
  rawBody: 'stream',
  responses: { 200: ProviderEventAck },
  handler: async (ctx) => {
    const { params, headers, bodyStream, services } = ctx;
    const provider = services.providers.forDeployment(params.deployment);
    if (!provider?.verifyEvent) throw new ApiError('not_found', `No deployment ${params.deployment} whose provider sends events on this service.`);
    const raw = await readLimited(bodyStream!, MAX_EVENT_BYTES, () => new ApiError('payload_too_large', `An event is at most ${MAX_EVENT_BYTES} bytes.`));
    const query = Object.fromEntries(new URLSearchParams(ctx.rawQuery));
    const verified = provider.verifyEvent({ headers: lowerCased(headers), body: raw, query, now: services.clock.now() });
    if (!verified.ok) throw new ApiError('validation_error', `The event was refused: ${verified.message}`);
    // A provider that runs the job under our own id (Cog) may post its start before the id is written (the
    // answer to its submission and the event race), and one whose event URL carries our id with its token (fal)
    // may post about a job whose submission's answer was lost: the job, still reserved, is found by that id too.
    const find = () => jobOfProviderEvent(openUnit(services.db), params.deployment, verified.providerJobId, verified.jobId ?? verified.providerJobId);
    // The write of a job's provider id is queued, not awaited, by its actor: an event that beats it is looked
    // for once more after this node's queued writes commit.
    let job = await find();
    if (!job) {
      await services.writer.flush();
      job = await find();
    }
    if (!job) return { body: { received: true, applied: false } };
    // Cluster mode: the node that runs the job's workspace takes it; the very bytes received go there.
    const elsewhere = await placeReadBody(ctx, job.workspace_id, raw);
    if (elsewhere) return elsewhere;
    const key = `${params.deployment}:${verified.eventId}`;
    if (applied.get(key)) return { body: { received: true, applied: false } };
    applied.set(key, true);
    services.actors.tell('gen', job.id, {
      type: 'provider_event',
      providerJobId: verified.providerJobId,
      payload: verified.payload,
      ...(verified.jobId ? { jobId: verified.jobId } : {}),
    });
    return { body: { received: true, applied: true } };
  },
});

function lowerCased(headers: Record<string, string | undefined>): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));
}
