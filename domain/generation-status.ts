/**
 * A generation's statuses (docs/generations.md, States): queued -> reserved -> submitted -> running ->
 * succeeded | failed, plus cancelled and expired. The stored row, the state machine and the API all use
 * this union; how a job moves between them is actors/generation/machine.ts.
 */
export const GENERATION_STATUSES = ['queued', 'reserved', 'submitted', 'running', 'succeeded', 'failed', 'cancelled', 'expired'] as const;
export type GenerationStatus = (typeof GENERATION_STATUSES)[number];

export const TERMINAL_STATUSES = ['succeeded', 'failed', 'cancelled', 'expired'] as const satisfies readonly GenerationStatus[];
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

export function isTerminal(status: GenerationStatus): status is TerminalStatus {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

export type GenerationEventName = 'generation.completed' | 'generation.failed' | 'generation.cancelled' | 'generation.expired';

/** The webhook event each terminal status emits (docs/webhooks.md). */
export const EVENT_OF: Record<TerminalStatus, GenerationEventName> = {
  succeeded: 'generation.completed',
  failed: 'generation.failed',
  cancelled: 'generation.cancelled',
  expired: 'generation.expired',
};

/** One step of a job's timeline: the status it moved to (or a note within it), when, and why. */
export interface TimelineEntry {
  status: GenerationStatus;
  at: string;
  detail?: string;
}
