import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { workspaceOfRow } from '../../owner.ts';
import { claimRecoveryKey, RECOVER_MAX_DELIVERIES, RECOVER_WINDOW_MS, recoverRange, storeRecoveryAnswer } from '../../../actors/webhook/resend-failed.ts';
import { IDEMPOTENCY_KEY, requestHash } from '../generations/draft.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { openEndpoint, requireActive } from './access.ts';
import { WebhookParams } from './shapes.ts';

const DAYS = RECOVER_WINDOW_MS / 86_400_000;

export const RecoverIn = Type.Object(
  {
    workspaceId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'The workspace; an API key must name its own.' })),
    since: Type.String({ format: 'date-time', description: `Start of the range (included), by the deliveries' createdAt; at most ${DAYS} days ago.` }),
    until: Type.Optional(Type.String({ format: 'date-time', description: `End of the range (excluded); default now, at most ${DAYS} days after since.` })),
  },
  { additionalProperties: false },
);

export const RecoverOut = Type.Object(
  {
    endpointId: Type.String(),
    since: Type.String({ format: 'date-time' }),
    until: Type.String({ format: 'date-time' }),
    count: Type.Integer({ minimum: 0, maximum: RECOVER_MAX_DELIVERIES, description: 'Deliveries queued by this request, oldest first.' }),
    firstDeliveryId: Type.Union([Type.String(), Type.Null()], { description: 'The first new delivery (dlv_…); null when none was queued.' }),
    lastDeliveryId: Type.Union([Type.String(), Type.Null()], { description: 'The last new delivery; null when none was queued.' }),
    nextSince: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: `Set when the range held more than ${RECOVER_MAX_DELIVERIES} deliveries: send the request again with this as since.`,
    }),
  },
  { additionalProperties: false },
);

export const recoverWebhook = defineRoute({
  method: 'POST',
  path: '/v1/webhooks/:id/recover',
  operationId: 'recoverWebhook',
  summary: 'Send again every failed or expired delivery of an endpoint made in a time range, in order',
  description: `Queues a re-send of every failed or expired delivery the endpoint had in [since, until), oldest first, each keeping its original body and id. The range is at most ${DAYS} days and starts at most ${DAYS} days ago; one request queues at most ${RECOVER_MAX_DELIVERIES} (nextSince continues). Send an Idempotency-Key header to make retries safe (the same key and body answer the first result again, another body is 409); without one, a delivery whose re-send is still pending is not queued again. A disabled endpoint is 409.`,
  tags: ['webhooks'],
  access: { scopes: ['webhooks.manage'] },
  errors: ['conflict'],
  owner: workspaceOfRow('webhook_endpoints'),
  params: WebhookParams,
  body: RecoverIn,
  responses: { 202: RecoverOut },
  handler: async ({ auth, params, body, headers, services }) => {
    const key = headers['idempotency-key'];
    if (key !== undefined && !IDEMPOTENCY_KEY.test(key)) throw new ApiError('validation_error', 'Idempotency-Key: 1 to 255 visible ASCII characters');
    const now = services.clock.now();
    const since = Date.parse(body.since);
    // Without until, everything made up to now, this very millisecond included.
    const until = body.until === undefined ? now + 1 : Date.parse(body.until);
    if (!(until > since)) throw new ApiError('validation_error', 'body.until: must be after since');
    if (since < now - RECOVER_WINDOW_MS)
      throw new ApiError('validation_error', `body.since: must be within the last ${DAYS} days (older deliveries are not kept for recovery)`);
    if (until - since > RECOVER_WINDOW_MS + 1) throw new ApiError('validation_error', `body.until: the range is at most ${DAYS} days`);
    const endpoint = await openEndpoint(openUnit(services.db), auth, params.id, body.workspaceId);
    requireActive(endpoint);
    const hash = requestHash({ since: new Date(since).toISOString(), until: body.until === undefined ? null : new Date(until).toISOString() });
    const result = await inTransaction(openUnit(services.db), async (tx) => {
      if (key !== undefined) {
        const claim = await claimRecoveryKey(tx, endpoint, key, hash, now);
        if (claim.kind === 'conflict') throw new ApiError('conflict', 'Idempotency-Key: was used with another request body for this endpoint');
        if (claim.kind === 'replay') return { answer: claim.answer, replayed: true };
      }
      const answer = await recoverRange(tx, endpoint.id, new Date(since), new Date(until), now);
      if (key !== undefined) await storeRecoveryAnswer(tx, endpoint.id, key, answer);
      return { answer, replayed: false };
    });
    if (result.replayed) return { status: 202, body: result.answer, headers: { 'Idempotent-Replayed': 'true' } };
    if (result.answer.count > 0) services.actors.tell('whk', endpoint.id, { type: 'wake' });
    return { status: 202, body: result.answer };
  },
});
