import type { Timer } from '../../runtime/clock.ts';
import type { WebhookEndpointRow } from '../../persistence/stores/webhooks/rows.ts';
import type { DeliveryState } from './machine.ts';

/** A delivery waiting in the endpoint actor's queue. */
export interface QueuedDelivery {
  id: string;
  eventType: string;
  body: string;
  /** The trace the delivery was made in; every attempt continues it. */
  traceParent: string | null;
  state: DeliveryState;
}

/** What the endpoint actor holds in memory between messages. */
export interface EndpointActorState {
  /** Undefined when no such endpoint exists (or it was deleted). */
  /** secret is undefined when it cannot be opened (another WEBHOOK_SECRET_KEY): nothing is sent then. */
  endpoint: (WebhookEndpointRow & { secret: string | undefined; previousSecret: string | undefined }) | undefined;
  /** Pending deliveries in creation order; the head is the one being delivered. */
  queue: QueuedDelivery[];
  /** The delivery whose attempt is on the wire. */
  inFlight: string | undefined;
  timer: Timer | undefined;
  /** Deliveries finished in memory whose final write has not committed yet: never read back as pending. */
  settling: Set<string>;
  /** Results of attempts started before the last load are ignored (the delivery is simply tried again). */
  epoch: number;
  /**
   * Deliveries may have been committed since the last read of the queue: set by every wake (sent after
   * the commit that made them) and at load, cleared just before each read; an empty queue is read again only if set.
   */
  unread: boolean;
}
