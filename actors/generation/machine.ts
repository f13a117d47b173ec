/**
 * The generation lifecycle as data and one pure function (docs/generations.md, States):
 * queued -> reserved -> submitted -> running -> succeeded | failed, plus cancelled (from any
 * non-terminal state) and expired (queued past its deadline). `decide` never does I/O: it returns the
 * next state and the effects the actor must perform.
 *
 * A job in flight when the service stopped (reserved, submitted or running) resumes after the restart
 * (`resume`): one whose provider accepted it (its provider job id written) and can look it up is followed
 * there, never handed over again; any other is handed to its provider again, its status where it was, its
 * reservation kept, each hand-over one attempt. Past MAX_ATTEMPTS it fails with `attempts_exhausted` instead.
 */
export const GENERATION_STATUSES = ['queued', 'reserved', 'submitted', 'running', 'succeeded', 'failed', 'cancelled', 'expired'] as const;
export type GenerationStatus = (typeof GENERATION_STATUSES)[number];

export const TERMINAL_STATUSES = ['succeeded', 'failed', 'cancelled', 'expired'] as const satisfies readonly GenerationStatus[];
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

export function isTerminal(status: GenerationStatus): status is TerminalStatus {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

export type GenerationEventName = 'generation.completed' | 'generation.failed' | 'generation.cancelled' | 'generation.expired';

export const EVENT_OF: Record<TerminalStatus, GenerationEventName> = {
  succeeded: 'generation.completed',
  failed: 'generation.failed',
  cancelled: 'generation.cancelled',
  expired: 'generation.expired',
};

export interface TimelineEntry {
  status: GenerationStatus;
  at: string;
  detail?: string;
}

/** Hand-overs to the provider a job may have, the first included, before a restart fails it instead. */
export const MAX_ATTEMPTS = 3;

/** Provider notes (queue positions, log lines) a job's timeline keeps per status. */
export const MAX_NOTES = 20;

export interface GenerationOutputs {
  textOutput?: string;
  outputAssetIds: string[];
}

export interface GenerationState {
  status: GenerationStatus;
  /** When a queued job expires, ms since the epoch; fixed at creation and kept across restarts. */
  queueDeadline: number;
  startedAt?: string;
  completedAt?: string;
  providerJobId?: string;
  /** The catalog deployment it runs on, and its provider kind (a fallback moves it to another). */
  deploymentId?: string;
  provider?: string;
  /** Times the job was handed to its provider (counted before each hand-over is made). */
  attempts: number;
  textOutput?: string;
  outputAssetIds: string[];
  errorCode?: string;
  errorMessage?: string;
  timeline: TimelineEntry[];
}

export type GenerationCommand =
  | { type: 'reserve' }
  /**
   * After a restart, for a job that was in flight: follow it at its provider when it can be looked up there
   * (`lookUp`: its provider keeps jobs it accepted), else hand it over again, or fail it past the limit.
   */
  | { type: 'resume'; maxAttempts: number; lookUp: boolean }
  /** Something for the timeline from the provider (a queue position, log lines); no change of state. */
  | { type: 'note'; detail: string }
  /**
   * The attempt on its deployment failed in a way another deployment could fix: hand it to `deploymentId`
   * (the router chose it, within the model's budget). The status stays; the timeline says what happened.
   */
  | { type: 'reroute'; deploymentId: string; provider: string; detail: string }
  | { type: 'submitted'; providerJobId: string }
  | { type: 'started' }
  | { type: 'succeed'; outputs: GenerationOutputs }
  | { type: 'fail'; errorCode: string; errorMessage: string }
  | { type: 'cancel'; by: 'user' | 'operator' }
  | { type: 'expire' };

export type GenerationEffect =
  | { type: 'submit_to_provider' }
  /** Follow the job its provider accepted before the restart, by its provider job id. */
  | { type: 'follow_at_provider'; providerJobId: string }
  | { type: 'poll_provider' }
  | { type: 'cancel_at_provider'; providerJobId: string }
  | { type: 'capture_credits' }
  | { type: 'release_credits' }
  | { type: 'free_slot' }
  | { type: 'cancel_queue_timer' }
  | { type: 'emit'; event: GenerationEventName };

export type Decision = { ok: true; state: GenerationState; effects: GenerationEffect[] } | { ok: false; reason: 'conflict' | 'too_early'; message: string };

const FROM: Record<GenerationCommand['type'], readonly GenerationStatus[]> = {
  reserve: ['queued'],
  resume: ['reserved', 'submitted', 'running'],
  note: ['submitted', 'running'],
  reroute: ['reserved', 'submitted', 'running'],
  // From submitted or running: the provider took a job handed to it again after a restart.
  submitted: ['reserved', 'submitted', 'running'],
  started: ['submitted'],
  succeed: ['running'],
  fail: ['queued', 'reserved', 'submitted', 'running'],
  cancel: ['queued', 'reserved', 'submitted', 'running'],
  expire: ['queued'],
};

export function initialState(now: number, queueTimeoutMs: number): GenerationState {
  return {
    status: 'queued',
    queueDeadline: now + queueTimeoutMs,
    attempts: 0,
    outputAssetIds: [],
    timeline: [{ status: 'queued', at: new Date(now).toISOString() }],
  };
}

/** The one place where a generation changes state. */
export function decide(state: GenerationState, command: GenerationCommand, now: number): Decision {
  if (!FROM[command.type].includes(state.status)) {
    return { ok: false, reason: 'conflict', message: `cannot ${command.type} a generation that is ${state.status}` };
  }
  const at = new Date(now).toISOString();
  const move = (status: GenerationStatus, patch: Partial<GenerationState>, effects: GenerationEffect[], detail?: string): Decision => ({
    ok: true,
    state: { ...state, ...patch, status, timeline: [...state.timeline, detail ? { status, at, detail } : { status, at }] },
    effects,
  });
  // Leaving the queue for good ends its timer; a slot is held from reserved until a terminal state.
  const heldSlot = state.status !== 'queued';
  switch (command.type) {
    case 'reserve':
      return move('reserved', { attempts: state.attempts + 1 }, [{ type: 'cancel_queue_timer' }, { type: 'submit_to_provider' }]);
    case 'resume': {
      if (command.lookUp && state.providerJobId && state.status !== 'reserved') {
        return move(state.status, {}, [{ type: 'follow_at_provider', providerJobId: state.providerJobId }], 'followed at its provider after a restart');
      }
      if (state.attempts >= command.maxAttempts) {
        return decide(
          state,
          {
            type: 'fail',
            errorCode: 'attempts_exhausted',
            errorMessage: `The service restarted while this job was in flight, and it had already been handed to its provider ${state.attempts} time${state.attempts === 1 ? '' : 's'} (the limit is ${command.maxAttempts}). Its credits were released.`,
          },
          now,
        );
      }
      // The status stays: it never goes back. The old provider job id belonged to the stopped process.
      const attempts = state.attempts + 1;
      return move(
        state.status,
        { attempts, providerJobId: undefined },
        [{ type: 'submit_to_provider' }],
        `resubmitted after a restart (attempt ${attempts} of ${command.maxAttempts})`,
      );
    }
    case 'reroute':
      return move(
        state.status,
        { attempts: state.attempts + 1, providerJobId: undefined, deploymentId: command.deploymentId, provider: command.provider },
        [{ type: 'submit_to_provider' }],
        command.detail.slice(0, 500),
      );
    case 'note': {
      // A job's notes are bounded: the last one repeated, or past MAX_NOTES, is left out.
      const notes = state.timeline.filter((e) => e.detail !== undefined && e.status === state.status).length;
      const last = state.timeline[state.timeline.length - 1];
      if (notes >= MAX_NOTES || last?.detail === command.detail) return { ok: false, reason: 'conflict', message: 'note left out' };
      return move(state.status, {}, [], command.detail.slice(0, 500));
    }
    case 'submitted':
      if (state.status !== 'reserved') return { ok: true, state: { ...state, providerJobId: command.providerJobId }, effects: [{ type: 'poll_provider' }] };
      return move('submitted', { providerJobId: command.providerJobId }, [{ type: 'poll_provider' }]);
    case 'started':
      return move('running', { startedAt: at }, [{ type: 'poll_provider' }]);
    case 'succeed':
      return move('succeeded', { completedAt: at, textOutput: command.outputs.textOutput, outputAssetIds: command.outputs.outputAssetIds }, [
        { type: 'capture_credits' },
        { type: 'free_slot' },
        { type: 'emit', event: 'generation.completed' },
      ]);
    case 'fail':
      return move(
        'failed',
        { completedAt: at, errorCode: command.errorCode, errorMessage: command.errorMessage },
        [
          ...(state.status === 'queued' ? [{ type: 'cancel_queue_timer' } as const] : []),
          { type: 'release_credits' },
          ...(heldSlot ? [{ type: 'free_slot' } as const] : []),
          { type: 'emit', event: 'generation.failed' },
        ],
        command.errorCode,
      );
    case 'cancel':
      return move(
        'cancelled',
        { completedAt: at },
        [
          ...(state.status === 'queued' ? [{ type: 'cancel_queue_timer' } as const] : []),
          ...(state.providerJobId && (state.status === 'submitted' || state.status === 'running')
            ? [{ type: 'cancel_at_provider', providerJobId: state.providerJobId } as const]
            : []),
          { type: 'release_credits' },
          ...(heldSlot ? [{ type: 'free_slot' } as const] : []),
          { type: 'emit', event: 'generation.cancelled' },
        ],
        `by ${command.by}`,
      );
    case 'expire':
      if (now < state.queueDeadline) return { ok: false, reason: 'too_early', message: 'the queue deadline has not passed' };
      return move('expired', { completedAt: at }, [{ type: 'release_credits' }, { type: 'emit', event: 'generation.expired' }]);
  }
}
