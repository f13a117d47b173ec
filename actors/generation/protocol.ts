import type { GenerationRow } from '../../persistence/stores/generations/rows.ts';
import type { ProviderUpdate } from '../../providers/provider.ts';
import type { AnyReplyOf, NoReply, Protocol } from '../../runtime/actor-protocol.ts';

export type GenerationMessage =
  /** After a restart: resume from the persisted state; `row` (read by the recovery with the others) saves the actor its own read. */
  | { type: 'recover'; row?: GenerationRow }
  /**
   * The workspace granted a concurrency slot. A job started as soon as it was committed carries its row,
   * so its new actor need not read it back.
   */
  | { type: 'reserve'; row?: GenerationRow }
  /** Reserved in its creation's transaction (its workspace had a free slot): handed to its provider at once. */
  | { type: 'start'; row: GenerationRow }
  | { type: 'cancel'; by: 'user' | 'operator' }
  /** The queue deadline timer fired. */
  | { type: 'expire' }
  | { type: 'submitted'; providerJobId: string }
  | { type: 'submit_failed'; errorCode: string; errorMessage: string }
  | { type: 'provider_update'; update: ProviderUpdate }
  /**
   * Its deployment could not take the hand-over now (its breaker is open, or its requests per minute are used):
   * another deployment, or a wait until `retryAt` (null: unknown).
   */
  | { type: 'breaker_open'; deploymentId: string; retryAt: number | null; reason?: 'breaker' | 'rate' }
  /** A wait for a breaker to close ended: hand the job over again. */
  | { type: 'retry_submit' }
  /** Its transitions riding (actor.ts, RIDE_MS) waited long enough: write them now. */
  | { type: 'write_riding' }
  /** An inbound event of its provider, verified by the node that received it (http/routes/providers/events.ts). */
  | { type: 'provider_event'; providerJobId: string; payload: unknown; jobId?: string };

export type CancelReply = { kind: 'cancelled'; generation: GenerationRow } | { kind: 'conflict'; status: string } | { kind: 'not_found' };

/** Each message's reply: only a cancel answers; a recover is asked so that its caller waits for it. */
export type GenerationProtocol = Protocol<
  GenerationMessage,
  {
    recover: NoReply;
    reserve: NoReply;
    start: NoReply;
    cancel: CancelReply;
    expire: NoReply;
    submitted: NoReply;
    submit_failed: NoReply;
    provider_update: NoReply;
    breaker_open: NoReply;
    retry_submit: NoReply;
    write_riding: NoReply;
    provider_event: NoReply;
  }
>;

export type GenerationReply = AnyReplyOf<GenerationProtocol>;
