import type { RateLimitError } from 'openai/error';
import { PROVIDER_ERROR_CODES, ProviderFailure } from '../adapter.ts';
import type { ChatStreamReading } from './outputs.ts';

/**
 * What the job follower holds of one OpenAI job for the protocol module: where its request stands, so that
 * the deadline (the follower's) ends it with what it cut, as the request's own bound would have said.
 */
export interface OpenAiNotes {
  /** When the job's call went out (the last one, after any 429), and whether its answer streams. */
  sent?: { at: number; streamed: boolean };
  /** The last 429, from its wait until a call answers: the deadline then ends the job rate limited, as the wait would have. */
  limited?: RateLimitError;
  /** A streamed answer as read so far: its usage, once that chunk came, goes with a failure. */
  reading?: ChatStreamReading;
}

/** Why a job its deadline overtook failed, by where its request stood; a 429 being waited out is the caller's to map. */
export function overdueFailure(notes: OpenAiNotes, deadline: number): ProviderFailure {
  const { sent } = notes;
  if (sent === undefined) return new ProviderFailure(PROVIDER_ERROR_CODES.timeout, 'The job reached its deadline before OpenAI answered.');
  if (sent.streamed)
    return new ProviderFailure(PROVIDER_ERROR_CODES.timeout, `The provider was still answering after ${deadline - sent.at} ms (the job's deadline).`);
  return new ProviderFailure(PROVIDER_ERROR_CODES.timeout, `The provider did not answer within ${deadline - sent.at} ms.`);
}
