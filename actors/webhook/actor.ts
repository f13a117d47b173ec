import { randomFillSync } from 'node:crypto';
import { context, isSpanContextValid, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { Outcome } from '../../runtime/actor-behavior.ts';
import type { ActorContext, KindBehavior } from '../kinds.ts';
import { EgressError, fetchGuarded } from '../../runtime/egress.ts';
import { redactedUrl, serverOf } from '../../runtime/tracing.ts';
import type { DeliveryAttempt, WebhookEndpointRow } from '../../persistence/stores/webhooks/rows.ts';
import type { Transaction } from '../../persistence/stores/transaction.ts';
import { findLiveEndpoint, writeEndpointChange, writeEndpointDeleted, writeEndpointHealth } from '../../persistence/stores/webhooks/endpoints.ts';
import { failPendingDeliveries, readDeliveryAttempts, writeDeliveryAttempts, writeDeliveryFinal } from '../../persistence/stores/webhooks/deliveries.ts';
import { depsOf } from '../deps.ts';
import type { EndpointPatch, EndpointReply, WebhookMessage } from './protocol.ts';
import type { NoReply } from '../../runtime/actor-protocol.ts';
import { pendingReaderFor } from './pending-reader.ts';
import { recorderFor } from './recorder.ts';
import { signatureHeaders } from './signing.ts';
import { openEndpointSecrets } from './endpoint-secrets.ts';
import { rotateSecret } from './rotate-secret.ts';
import type { EndpointActorState, QueuedDelivery } from './endpoint-state.ts';
import { parentContextOf } from '../../runtime/trace-context.ts';
import { decide, type AttemptOutcome, type DeliveryEvent, type DeliveryState, type FailureReason } from './machine.ts';
import { DEFAULT_DISABLE_AFTER_MS, judgeAttempt, type HealthVerdict } from './auto-disable.ts';
import { writeEndpointDisabled } from './endpoint-disabled.ts';

/** Pending deliveries read from the database at a time, oldest first. */
const QUEUE_BATCH = 100;
/** A receiver's answer body is read up to this size and dropped; a larger one fails the attempt. */
const MAX_RESPONSE_BYTES = 256 * 1024;

let epochs = 0;

/**
 * One webhook endpoint (`whk:<id>`): its deliveries in creation order, one on the wire at a time, each
 * signed, sent through the egress guard and retried by the backoff of `decide`; every attempt is recorded.
 * The HTTP exchange runs beside the actor, so updates and other endpoints never wait for a slow receiver.
 */
export const webhookEndpointActor: KindBehavior<'whk', EndpointActorState> = {
  kind: 'whk',

  async load(ctx) {
    const row = await findLiveEndpoint(ctx.db, ctx.id);
    let endpoint: EndpointActorState['endpoint'];
    if (row) {
      const { secret, previousSecret, error } = openEndpointSecrets(row, depsOf(ctx).webhooks.secrets, ctx.clock.now());
      // A wrong WEBHOOK_SECRET_KEY: nothing can be signed, so nothing is sent (deliveries wait, pending).
      if (error !== undefined)
        ctx.logger.error({ err: error, endpoint: row.id }, 'the signing secret of a webhook endpoint cannot be opened; check WEBHOOK_SECRET_KEY');
      endpoint = { ...row, secret, previousSecret };
    }
    return { endpoint, queue: [], inFlight: undefined, timer: undefined, settling: new Set(), epoch: ++epochs, unread: true };
  },

  workspaceOf: (state) => state.endpoint?.workspaceId,

  handlers: {
    wake: (state, _msg, ctx) => {
      state.unread = true;
      return pump(state, ctx);
    },
    due: (state, _msg, ctx) => {
      state.timer = undefined;
      return pump(state, ctx);
    },
    attempt_done: attemptDone,
    update: (state, msg, ctx) => update(state, msg.patch, ctx),
    delete: (state, _msg, ctx) => remove(state, ctx),
    rotate_secret: rotateSecret,
  },

  keepAlive: (state) => state.queue.length > 0 || state.inFlight !== undefined || state.settling.size > 0,
};

/** Starts the head delivery if it is due, arms its timer if not, and reads more from the database when the queue is empty. */
async function pump(state: EndpointActorState, ctx: ActorContext): Promise<Outcome<EndpointActorState, NoReply>> {
  const endpoint = state.endpoint;
  if (!endpoint) return { state, passivate: state.inFlight === undefined };
  if (endpoint.status !== 'active') {
    // A delivery made in the same instant as the disabling is failed like the others.
    return { state, replyWhenDurable: failPending(state, 'endpoint_disabled', ctx).then(() => undefined) };
  }
  if (state.inFlight !== undefined || endpoint.secret === undefined) return { state };
  // Cluster mode: while the shard is being handed over, no new attempt starts; the next owner sends it.
  if (depsOf(ctx).handingOver?.(endpoint.workspaceId)) return { state };
  if (state.queue.length === 0 && state.unread) {
    await refill(state, ctx);
    // The handover may have begun while the rows were read: its drain has counted the attempts on the wire
    // already, so one started now would be posted again by the next owner.
    if (depsOf(ctx).handingOver?.(endpoint.workspaceId)) return { state };
  }
  const head = state.queue[0];
  if (!head) return { state };
  const now = ctx.clock.now();
  const due = head.state.nextAttemptAt ?? now;
  if (due > now) {
    state.timer?.cancel();
    state.timer = ctx.clock.setTimer(() => ctx.actors.tell('whk', ctx.id, { type: 'due' }), due - now);
    return { state };
  }
  state.timer?.cancel();
  state.timer = undefined;
  state.inFlight = head.id;
  attempt({ ...endpoint, secret: endpoint.secret }, head, state.epoch, ctx);
  return { state };
}

async function refill(state: EndpointActorState, ctx: ActorContext): Promise<void> {
  state.unread = false;
  // Deliveries whose outcome is being written when the read begins: the read may find them still pending,
  // and their write may commit (and leave `settling`) before its rows come back. Skipped by this set, taken
  // now, they are never queued (and posted) again.
  const settling = new Set(state.settling);
  // Read together with the other endpoints that ran out at the same time: one statement for many.
  const rows = await pendingReaderFor(ctx.db).read(ctx.id, QUEUE_BATCH + settling.size);
  // A full batch may have left deliveries behind: read again when this one is done.
  if (rows.length >= QUEUE_BATCH + settling.size) state.unread = true;
  for (const row of rows) {
    if (settling.has(row.id)) continue;
    const attempts = typeof row.attempts === 'string' ? (JSON.parse(row.attempts) as DeliveryAttempt[]) : row.attempts;
    state.queue.push({
      id: row.id,
      eventType: row.event_type,
      body: row.body,
      traceParent: row.trace_parent ?? null,
      state: {
        status: 'pending',
        attempts,
        nextAttemptAt: row.next_attempt_at === null ? undefined : new Date(row.next_attempt_at).getTime(),
        failureReason: undefined,
      },
    });
  }
}

/** One HTTP attempt beside the actor; its outcome comes back as a message. */
function attempt(
  endpoint: WebhookEndpointRow & { secret: string; previousSecret: string | undefined },
  delivery: QueuedDelivery,
  epoch: number,
  ctx: ActorContext,
): void {
  const deps = depsOf(ctx).webhooks;
  const at = ctx.clock.now();
  // The generation's trace stored with the delivery, whatever message (a retry's timer, a wake after a restart) started this attempt.
  const span = deps.tracer.startSpan(
    'webhook attempt',
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'http.request.method': 'POST',
        'url.full': redactedUrl(endpoint.url),
        ...serverOf(endpoint.url),
        'webhook.endpoint.id': endpoint.id,
        'webhook.delivery.id': delivery.id,
        'webhook.event': delivery.eventType,
        'webhook.attempt': delivery.state.attempts.length + 1,
      },
    },
    parentContextOf(delivery.traceParent) ?? context.active(),
  );
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'generation-service-webhooks/1',
    ...signatureHeaders(
      {
        scheme: endpoint.signatureScheme,
        secret: endpoint.secret,
        previousSecret: endpoint.previousSecret,
        previousSecretExpiresAt: endpoint.previousSecretExpiresAt,
      },
      delivery.id,
      delivery.body,
      at,
    ),
    'x-service-event': delivery.eventType,
    'x-service-delivery': delivery.id,
    traceparent: traceparentOf(span.spanContext()),
  };
  const started = performance.now();
  deps.attemptsInFlight?.begin(endpoint.workspaceId);
  void fetchGuarded(endpoint.url, {
    method: 'POST',
    headers,
    body: delivery.body,
    maxRedirects: 0,
    maxBytes: MAX_RESPONSE_BYTES,
    timeoutMs: deps.timeoutMs,
    allowPrivate: deps.allowPrivateEgress,
    allowLoopback: deps.allowLoopbackEgress,
    connectionsPerOrigin: 'unlimited',
  })
    .then(
      (response): AttemptOutcome => ({ type: 'answered', status: response.status, durationMs: performance.now() - started }),
      (error: unknown): AttemptOutcome => {
        const durationMs = performance.now() - started;
        const message = error instanceof EgressError ? `${error.code}: ${error.message}` : `network_error: ${(error as Error).message}`;
        const refused = error instanceof EgressError && (error.code === 'blocked_address' || error.code === 'invalid_url');
        return { type: refused ? 'refused' : 'error', error: message.slice(0, 500), durationMs };
      },
    )
    .then((outcome) => {
      if (outcome.type === 'answered') span.setAttribute('http.response.status_code', outcome.status);
      const ok = outcome.type === 'answered' && outcome.status >= 200 && outcome.status <= 299;
      // error.type: the status of a non-2xx answer (a receiver answering 3xx did not take the event either), or what kept it from answering.
      if (!ok) span.setAttribute('error.type', outcome.type === 'answered' ? String(outcome.status) : outcome.error.split(':')[0]!);
      span.setStatus({ code: ok ? SpanStatusCode.OK : SpanStatusCode.ERROR });
      span.end();
      depsOf(ctx).metrics?.webhookAttempt(
        ok ? 'success' : outcome.type === 'answered' ? 'http_error' : outcome.type === 'refused' ? 'refused' : 'network_error',
        outcome.durationMs / 1000,
      );
      ctx.actors.tell('whk', ctx.id, { type: 'attempt_done', epoch, deliveryId: delivery.id, at, outcome });
      deps.attemptsInFlight?.end(endpoint.workspaceId);
    });
}

async function attemptDone(
  state: EndpointActorState,
  msg: Extract<WebhookMessage, { type: 'attempt_done' }>,
  ctx: ActorContext,
): Promise<Outcome<EndpointActorState, NoReply>> {
  if (msg.epoch !== state.epoch || state.inFlight !== msg.deliveryId) return { state };
  state.inFlight = undefined;
  const head = state.queue[0];
  const event: DeliveryEvent = { type: 'attempted', at: msg.at, outcome: msg.outcome, jitter: depsOf(ctx).webhooks.random() };
  if (!head || head.id !== msg.deliveryId) {
    // The delivery was failed meanwhile (endpoint disabled or deleted): the attempt is still recorded.
    const recorded = recordLateAttempt(msg.deliveryId, msg.at, msg.outcome, ctx);
    const next = await pump(state, ctx);
    return { ...next, replyWhenDurable: Promise.all([recorded, next.replyWhenDurable]).then(() => undefined) };
  }
  const decision = decide(head.state, event);
  if (!decision.ok) throw new Error(`delivery ${head.id}: ${decision.reason}`);
  head.state = decision.state;
  const health = judgeHealth(state, msg.at, decision.state, ctx);
  if (health.disable) return disableItself(state, head, health, ctx);
  const written = writeDelivery(head.id, decision.state, ctx);
  if (decision.state.status !== 'pending') {
    state.queue.shift();
    state.settling.add(head.id);
    void written.then(
      () => state.settling.delete(head.id),
      () => state.settling.delete(head.id),
    );
  }
  const next = await pump(state, ctx);
  // A failed write makes the actor reload from the database, so the delivery is sent again (at least once).
  return { ...next, replyWhenDurable: Promise.all([written, next.replyWhenDurable, health.written]).then(() => undefined) };
}

/** The endpoint's health after an attempt (auto-disable.ts), kept in memory and written only when it changes. */
function judgeHealth(state: EndpointActorState, at: number, delivery: DeliveryState, ctx: ActorContext): HealthVerdict & { written?: Promise<void> } {
  const endpoint = state.endpoint!;
  const policy = depsOf(ctx).webhooks.autoDisable ?? { afterMs: DEFAULT_DISABLE_AFTER_MS, afterExpired: 0 };
  const before = { failingSince: endpoint.failingSince?.getTime(), consecutiveExpired: endpoint.consecutiveExpired };
  const verdict = judgeAttempt(before, { ok: delivery.status === 'delivered', at, status: delivery.status }, policy);
  if (!verdict.changed || verdict.disable) return verdict;
  endpoint.failingSince = verdict.health.failingSince === undefined ? null : new Date(verdict.health.failingSince);
  endpoint.consecutiveExpired = verdict.health.consecutiveExpired;
  return { ...verdict, written: ctx.writer.write((em) => writeEndpointHealth(em, endpoint.id, verdict.health)) };
}

/**
 * Auto-disable: the head delivery's outcome (failed now, if it was to be retried) and the endpoint's
 * disabling commit together with the failing of its other pending deliveries and the
 * webhook_endpoint.disabled event for the workspace's other endpoints, which are woken after the commit.
 */
function disableItself(state: EndpointActorState, head: QueuedDelivery, verdict: HealthVerdict, ctx: ActorContext): Outcome<EndpointActorState, NoReply> {
  const endpoint = state.endpoint!;
  const reason = verdict.disable!;
  const now = ctx.clock.now();
  const final = head.state.status === 'pending' ? decide(head.state, { type: 'endpoint_disabled' }) : { ok: true as const, state: head.state };
  if (!final.ok) throw new Error(`delivery ${head.id}: ${final.reason}`);
  state.endpoint = {
    ...endpoint,
    status: 'disabled',
    disabledReason: reason,
    updatedAt: new Date(now),
    failingSince: verdict.health.failingSince === undefined ? null : new Date(verdict.health.failingSince),
    consecutiveExpired: verdict.health.consecutiveExpired,
  };
  let woken: string[] = [];
  const written = failPending(state, 'endpoint_disabled', ctx, async (em) => {
    await writeDeliveryFinal(em, head.id, final.state, new Date(now));
    woken = await writeEndpointDisabled(em, endpoint, reason, verdict.health, now);
  }).then(() => {
    ctx.logger.warn({ endpoint: endpoint.id, reason }, 'webhook endpoint disabled: its deliveries keep failing');
    for (const id of woken) ctx.actors.tell('whk', id, { type: 'wake' });
    return undefined;
  });
  return { state, replyWhenDurable: written };
}

function writeDelivery(id: string, next: DeliveryState, ctx: ActorContext): Promise<void> {
  return recorderFor(ctx.writer).record(id, next, new Date(ctx.clock.now()));
}

function recordLateAttempt(id: string, at: number, outcome: AttemptOutcome, ctx: ActorContext): Promise<void> {
  return ctx.writer.write(async (em) => {
    const row = await readDeliveryAttempts(em, id);
    if (!row) return;
    const attempts = row.attempts;
    // Replayed on a copy in the pending state, only to shape the attempt record the same way.
    const replay = decide({ status: 'pending', attempts, nextAttemptAt: undefined, failureReason: undefined }, { type: 'attempted', at, outcome, jitter: 0 });
    if (!replay.ok) return;
    await writeDeliveryAttempts(em, id, replay.state.attempts, new Date(ctx.clock.now()));
  });
}

/** Every pending delivery of the endpoint becomes failed (disabled or deleted), in memory and in the database. */
function failPending(state: EndpointActorState, reason: FailureReason, ctx: ActorContext, also?: (em: Transaction) => Promise<void>): Promise<void> {
  state.timer?.cancel();
  state.timer = undefined;
  state.queue = [];
  const at = new Date(ctx.clock.now());
  return ctx.writer.write(async (em) => {
    if (also) await also(em);
    await failPendingDeliveries(em, ctx.id, reason, at);
  });
}

async function update(state: EndpointActorState, patch: EndpointPatch, ctx: ActorContext): Promise<Outcome<EndpointActorState, EndpointReply>> {
  const endpoint = state.endpoint;
  if (!endpoint) return { state, reply: undefined };
  const at = new Date(ctx.clock.now());
  const next = {
    ...endpoint,
    url: patch.url ?? endpoint.url,
    description: patch.description === undefined ? endpoint.description : patch.description,
    eventTypes: patch.eventTypes ?? endpoint.eventTypes,
    status: patch.status ?? endpoint.status,
    updatedAt: at,
    // A new scheme comes with a new secret of its form (signing.ts); the old one, of the other form, stops at once.
    ...(patch.scheme ? schemeChange(patch.scheme, ctx) : {}),
  };
  // Enabling starts its health afresh; a PATCH that disables gives no reason (the operator knows why).
  if (next.status !== endpoint.status) Object.assign(next, { disabledReason: null, failingSince: null, consecutiveExpired: 0 });
  const writeEndpoint = (em: Transaction) => writeEndpointChange(em, endpoint.id, next, at);
  state.endpoint = next;
  const { secret: _secret, previousSecret: _previous, ...row } = next;
  if (next.status === 'disabled' && endpoint.status !== 'disabled') {
    return { state, replyWhenDurable: failPending(state, 'endpoint_disabled', ctx, writeEndpoint).then(() => row) };
  }
  const written = ctx.writer.write(writeEndpoint);
  if (next.status === 'active' && endpoint.status !== 'active')
    void written.then(
      () => ctx.actors.tell('whk', ctx.id, { type: 'wake' }),
      () => {},
    );
  return { state, replyWhenDurable: written.then(() => row) };
}

async function remove(state: EndpointActorState, ctx: ActorContext): Promise<Outcome<EndpointActorState, EndpointReply>> {
  const endpoint = state.endpoint;
  if (!endpoint) return { state, reply: undefined };
  const at = new Date(ctx.clock.now());
  state.endpoint = undefined;
  // The sealed secret is wiped with the endpoint; the row stays (without it) until the retention job purges it.
  const written = failPending(state, 'endpoint_deleted', ctx, (em) => writeEndpointDeleted(em, endpoint.id, at));
  const { secret: _secret, previousSecret: _previous, ...row } = endpoint;
  return { state, replyWhenDurable: written.then(() => ({ ...row, deletedAt: at, updatedAt: at })), passivate: state.inFlight === undefined };
}

/** The fields a change of signature scheme sets: the scheme, its new secret (sealed by the caller), no previous secret. */
function schemeChange(scheme: NonNullable<EndpointPatch['scheme']>, ctx: ActorContext) {
  return {
    signatureScheme: scheme.signatureScheme,
    secretSealed: scheme.secretSealed,
    secret: depsOf(ctx).webhooks.secrets.open(scheme.secretSealed, ctx.id),
    previousSecretSealed: null,
    previousSecretExpiresAt: null,
    previousSecret: undefined,
  };
}

/** W3C trace context of the attempt's span; a random one when tracing is off, so receivers can still correlate. */
function traceparentOf(spanContext: { traceId: string; spanId: string; traceFlags: number }): string {
  if (isSpanContextValid(spanContext)) return `00-${spanContext.traceId}-${spanContext.spanId}-${(spanContext.traceFlags & 1) === 1 ? '01' : '00'}`;
  return `00-${randomHex(16)}-${randomHex(8)}-00`;
}

/** Random bytes for trace ids, drawn from a pool refilled in blocks (one call to the CSPRNG per 170 traceparents, not two per each). */
const randomPool = Buffer.alloc(4096);
let randomUsed = randomPool.length;

function randomHex(bytes: number): string {
  if (randomUsed + bytes > randomPool.length) {
    randomFillSync(randomPool);
    randomUsed = 0;
  }
  const hex = randomPool.toString('hex', randomUsed, randomUsed + bytes);
  randomUsed += bytes;
  return hex;
}
