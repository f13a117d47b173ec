import type { Outcome } from '../../runtime/actor-behavior.ts';
import type { ActorContext } from '../kinds.ts';
import { depsOf } from '../deps.ts';
import { writeEndpointSecrets } from '../../persistence/stores/webhooks/endpoints.ts';
import type { EndpointActorState } from './endpoint-state.ts';
import type { EndpointReply } from './protocol.ts';

/** The overlap of a rotation when none is given: a day, as Stripe's default. */
export const DEFAULT_ROTATION_GRACE_SECONDS = 24 * 3600;
/** The longest overlap one may ask for: a week. */
export const MAX_ROTATION_GRACE_SECONDS = 7 * 24 * 3600;

/**
 * A new signing secret (sealed by the caller, bound to this endpoint) replaces the current one, which
 * keeps signing beside it for `graceSeconds` (0: not at all). Only the latest replaced secret is kept: a
 * rotation during an overlap ends the older overlap. Deliveries signed from now on carry both signatures.
 */
export async function rotateSecret(
  state: EndpointActorState,
  msg: { secretSealed: string; graceSeconds: number },
  ctx: ActorContext,
): Promise<Outcome<EndpointActorState, EndpointReply>> {
  const endpoint = state.endpoint;
  if (!endpoint) return { state, reply: undefined };
  const now = ctx.clock.now();
  const at = new Date(now);
  const box = depsOf(ctx).webhooks.secrets;
  const keepsOld = msg.graceSeconds > 0;
  const next = {
    ...endpoint,
    secretSealed: msg.secretSealed,
    secret: box.open(msg.secretSealed, endpoint.id),
    previousSecretSealed: keepsOld ? endpoint.secretSealed : null,
    previousSecretExpiresAt: keepsOld ? new Date(now + msg.graceSeconds * 1000) : null,
    previousSecret: keepsOld ? endpoint.secret : undefined,
    updatedAt: at,
  };
  const written = ctx.writer.write((em) => writeEndpointSecrets(em, endpoint.id, next, at));
  state.endpoint = next;
  const { secret: _secret, previousSecret: _previous, ...row } = next;
  // Deliveries waiting because the secret could not be opened can go now.
  if (endpoint.secret === undefined)
    void written.then(
      () => ctx.actors.tell('whk', ctx.id, { type: 'wake' }),
      () => {},
    );
  return { state, replyWhenDurable: written.then(() => row) };
}
