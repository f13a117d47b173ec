import type { SignatureScheme, WebhookEndpointRow } from '../../persistence/stores/webhooks/rows.ts';
import type { AnyReplyOf, NoReply, Protocol } from '../../runtime/actor-protocol.ts';
import type { AttemptOutcome, WebhookEventType } from './machine.ts';

export interface EndpointPatch {
  url?: string;
  description?: string | null;
  eventTypes?: WebhookEventType[];
  status?: 'active' | 'disabled';
  /** A new signature scheme, with the new secret of its form (sealed, bound to the endpoint). */
  scheme?: { signatureScheme: SignatureScheme; secretSealed: string };
}

export type WebhookMessage =
  /** New deliveries may be waiting (sent after the commit that made them, and by recovery). */
  | { type: 'wake' }
  /** The head delivery's next attempt is due. */
  | { type: 'due' }
  | { type: 'attempt_done'; epoch: number; deliveryId: string; at: number; outcome: AttemptOutcome }
  | { type: 'update'; patch: EndpointPatch }
  | { type: 'delete' }
  /** A new secret (sealed, bound to the endpoint); the current one keeps signing for graceSeconds. */
  | { type: 'rotate_secret'; secretSealed: string; graceSeconds: number };

/** Answer to update and delete: the endpoint as stored, or undefined if it does not exist (any more). */
export type EndpointReply = WebhookEndpointRow | undefined;

/** Each message's reply: the endpoint as stored for a change; nothing for the wake-ups and timers, only ever told. */
export type WebhookProtocol = Protocol<
  WebhookMessage,
  {
    wake: NoReply;
    due: NoReply;
    attempt_done: NoReply;
    update: EndpointReply;
    delete: EndpointReply;
    rotate_secret: EndpointReply;
  }
>;

export type WebhookReply = AnyReplyOf<WebhookProtocol>;
