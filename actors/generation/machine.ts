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
import type { GenerationRow } from '../../persistence/stores/generations/rows.ts';
import { isTerminal, type GenerationStatus } from '../../domain/generation-status.ts';

/** Hand-overs to the provider a job may have, the first included, before a restart fails it instead. */
export const MAX_ATTEMPTS = 3;

/** Provider notes (queue positions, log lines) a job's timeline keeps per status. */
export const MAX_NOTES = 20;

export interface GenerationOutputs {
  textOutput?: string;
  outputAssetIds: string[];
}

/**
 * What the machine reads and moves of a generation: these fields of its stored row, as they are stored (the
 * actor hands it the row itself and gets back the row with them changed).
 */
export type GenerationState = Pick<
  GenerationRow,
  | 'status'
  | 'queueDeadline'
  | 'startedAt'
  | 'completedAt'
  | 'providerJobId'
  | 'deploymentId'
  | 'provider'
  | 'attempts'
  | 'textOutput'
  | 'outputAssetIds'
  | 'errorCode'
  | 'errorMessage'
  | 'timeline'
>;

export type GenerationCommand =
  | { type: 'reserve' }
  /**
   * After a restart, for a job that was in flight: follow it at its provider when it can be looked up there
   * (`lookUp`: its provider keeps jobs it accepted), else hand it over again, or fail it past the limit.
   */
  | {
      type: 'resume';
      maxAttempts: number;
      lookUp: boolean;
      /**
       * Its provider answers within the request and keeps nothing to look up (OpenAI): a job with no provider job
       * id written may still have gone out (its submitted rode unwritten, actor.ts RIDE_MS), so it is not handed
       * over again but failed, its credits released.
       */
      inRequest?: boolean;
    }
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
  /**
   * `charge`: the job streamed part of its answer before it ended, and its row carries the usage counted for
   * it (docs/openai-compatible.md): its credits are captured for that usage rather than released.
   */
  | { type: 'fail'; errorCode: string; errorMessage: string; charge?: boolean }
  | { type: 'cancel'; by: 'user' | 'operator'; charge?: boolean }
  | { type: 'expire' };

/** What the actor does once a transition is durable. Every kind here is performed (actor.ts, perform). */
export type GenerationEffect =
  /** Hand the job to its provider (its deployment's), the attempt already counted. */
  | { type: 'submit_to_provider'; afterRestart?: boolean }
  /** Follow the job its provider accepted before the restart, by its provider job id. */
  | { type: 'follow_at_provider'; providerJobId: string }
  | { type: 'cancel_at_provider'; providerJobId: string }
  | { type: 'cancel_queue_timer' };

/**
 * How a terminal state is written: by its workspace actor, in one transaction with the credits captured
 * (succeeded) or released (any other end), the slot freed, and the event of its status with its webhook
 * deliveries (docs/architecture.md, The settlement).
 */
export interface Settle {
  money: 'capture' | 'release';
  /** The job held one of its workspace's slots (it had left the queue). */
  heldSlot: boolean;
}

/** An accepted command: the next state, its effects, and for a terminal state its settlement (absent otherwise). */
export type Decision<S extends GenerationState = GenerationState> =
  | { ok: true; state: S; effects: GenerationEffect[]; settle?: Settle }
  | { ok: false; reason: 'conflict' | 'too_early'; message: string };

const FROM: Record<GenerationCommand['type'], readonly GenerationStatus[]> = {
  reserve: ['queued'],
  resume: ['reserved', 'submitted', 'running'],
  // Reserved too: a job waiting before its hand-over (an open breaker, a deployment's requests per minute) says why.
  note: ['reserved', 'submitted', 'running'],
  reroute: ['reserved', 'submitted', 'running'],
  // From submitted or running: the provider took a job handed to it again after a restart.
  submitted: ['reserved', 'submitted', 'running'],
  started: ['submitted'],
  succeed: ['running'],
  fail: ['queued', 'reserved', 'submitted', 'running'],
  cancel: ['queued', 'reserved', 'submitted', 'running'],
  expire: ['queued'],
};

/** A job just created: queued, no attempt yet, to run on `route` (its deployment, and its provider kind). */
export function initialState(now: number, queueTimeoutMs: number, route: Pick<GenerationState, 'deploymentId' | 'provider'>): GenerationState {
  return {
    status: 'queued',
    queueDeadline: new Date(now + queueTimeoutMs),
    startedAt: null,
    completedAt: null,
    providerJobId: null,
    deploymentId: route.deploymentId,
    provider: route.provider,
    attempts: 0,
    textOutput: null,
    outputAssetIds: [],
    errorCode: null,
    errorMessage: null,
    timeline: [{ status: 'queued', at: new Date(now).toISOString() }],
  };
}

/**
 * The one place where a generation changes state. It returns `state` with its machine's fields changed, the
 * rest as given: handed its row, the actor gets back its next row.
 */
export function decide<S extends GenerationState>(state: S, command: GenerationCommand, now: number): Decision<S> {
  if (!FROM[command.type].includes(state.status)) {
    return { ok: false, reason: 'conflict', message: `cannot ${command.type} a generation that is ${state.status}` };
  }
  const at = new Date(now);
  // A slot is held from reserved until a terminal state; a terminal state is written by its settlement.
  const heldSlot = state.status !== 'queued';
  const charged = (command.type === 'fail' || command.type === 'cancel') && command.charge === true;
  const move = (status: GenerationStatus, patch: Partial<GenerationState>, effects: GenerationEffect[], detail?: string): Decision<S> => {
    const entry = detail ? { status, at: at.toISOString(), detail } : { status, at: at.toISOString() };
    const next: S = { ...state, ...patch, status, timeline: [...state.timeline, entry] };
    if (!isTerminal(status)) return { ok: true, state: next, effects };
    return { ok: true, state: next, effects, settle: { money: status === 'succeeded' || charged ? 'capture' : 'release', heldSlot } };
  };
  switch (command.type) {
    case 'reserve':
      // Leaving the queue for good ends its timer.
      return move('reserved', { attempts: state.attempts + 1 }, [{ type: 'cancel_queue_timer' }, { type: 'submit_to_provider' }]);
    case 'resume': {
      if (command.lookUp && state.providerJobId && state.status !== 'reserved') {
        return move(state.status, {}, [{ type: 'follow_at_provider', providerJobId: state.providerJobId }], 'followed at its provider after a restart');
      }
      if (command.lookUp && command.inRequest && state.attempts > 0) {
        return decide(
          state,
          {
            type: 'fail',
            errorCode: 'provider_error',
            errorMessage:
              'The service stopped while this job was being handed to its provider, which answers within that request and keeps nothing to look up: whether it ran is not known, so it is not run again. Its credits were released.',
          },
          now,
        );
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
        { attempts, providerJobId: null },
        [{ type: 'submit_to_provider', afterRestart: true }],
        `resubmitted after a restart (attempt ${attempts} of ${command.maxAttempts})`,
      );
    }
    case 'reroute':
      return move(
        state.status,
        { attempts: state.attempts + 1, providerJobId: null, deploymentId: command.deploymentId, provider: command.provider },
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
    // Submitted and running need nothing done: the adapter that took the job follows it and reports.
    case 'submitted':
      if (state.status !== 'reserved') return { ok: true, state: { ...state, providerJobId: command.providerJobId }, effects: [] };
      return move('submitted', { providerJobId: command.providerJobId }, []);
    case 'started':
      return move('running', { startedAt: at }, []);
    case 'succeed':
      return move(
        'succeeded',
        { completedAt: at, textOutput: command.outputs.textOutput ?? state.textOutput, outputAssetIds: command.outputs.outputAssetIds },
        [],
      );
    case 'fail':
      return move(
        'failed',
        { completedAt: at, errorCode: command.errorCode, errorMessage: command.errorMessage },
        state.status === 'queued' ? [{ type: 'cancel_queue_timer' }] : [],
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
        ],
        `by ${command.by}`,
      );
    case 'expire':
      if (now < state.queueDeadline.getTime()) return { ok: false, reason: 'too_early', message: 'the queue deadline has not passed' };
      return move('expired', { completedAt: at }, []);
  }
}
