import { ApiError, ParamError } from '../../errors.ts';
import type { Principal } from '../../route.ts';
import type { Services } from '../../services.ts';
import { isChatParam } from '../../../domain/catalog/chat.ts';
import type { ModelRecord } from '../../../domain/catalog/models.ts';
import { isLiveOutput, type LiveEvent } from '../../../runtime/live-events.ts';
import { newId } from '../../../persistence/ids.ts';
import { readGenerationAfresh } from '../../../persistence/stores/generations/reads.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { toGenerationDetailOut } from '../generations/shape.ts';
import { IDEMPOTENCY_KEY, orderOf, requestHash } from '../generations/draft.ts';
import type { GenerationInputsIn } from '../generations/inputs.ts';

/**
 * One request of the OpenAI-compatible door as a generation like any other (docs/openai-compatible.md):
 * the key's workspace, plan, limits and credits, the catalog's price and routing, the Idempotency-Key; then
 * followed in process, its pieces of answer and its end as its actor publishes them (runtime/live-events.ts).
 */

/** The end of a job as the door answers it: the generation's API shape. */
export type Ended = ReturnType<typeof toGenerationDetailOut>;

export interface DoorJobEvents {
  /** A piece of the answer, in order. */
  output(delta: string, index: number): void;
  /** The job ended (its terminal transition committed). */
  end(generation: Ended): void;
}

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'expired']);
/** How often a job followed in process is also read, should its end have been published elsewhere (a handover). */
const RECHECK_MS = 2_000;

/** Our catalog parameter names onto the OpenAI fields that set them (for a refusal's `param`). */
const OPENAI_NAMES: Record<string, string> = {
  maxTokens: 'max_tokens',
  temperature: 'temperature',
  seed: 'seed',
  prompt: 'messages',
  systemPrompt: 'messages',
  voice: 'voice',
  speed: 'speed',
  format: 'response_format',
  numImages: 'n',
  aspectRatio: 'size',
};

/** The key the door takes: API keys only (a session has no workspace to act in). */
export function keyOf(auth: Principal | undefined): Extract<Principal, { kind: 'key' }> {
  if (auth?.kind !== 'key') throw new ApiError('forbidden', 'The OpenAI-compatible API takes API keys (Authorization: Bearer <key>).');
  return auth;
}

/** The model of a request, offered and of one of `modes`; OpenAI's 404 otherwise. */
export function modelOf(services: Services, id: string, modes: readonly string[]): ModelRecord {
  const model = services.catalog.get(id);
  if (!model || !services.catalog.isOffered(model) || !modes.includes(model.mode)) {
    throw new ParamError('not_found', `The model \`${id}\` does not exist or you do not have access to it.`, 'model', 'model_not_found');
  }
  return model;
}

export interface StartedJob {
  id: string;
  replayed: boolean;
  /** Stops following (the answer was sent, or the client went away). */
  stop(): void;
}

/**
 * Creates the job of a door request, following it before it exists: its id is made here, so that no piece
 * of its answer can come before the listening. An Idempotency-Key already used answers its first job.
 */
export async function startDoorJob(
  services: Services,
  auth: Principal | undefined,
  request: { model: ModelRecord; params: Record<string, unknown>; body: unknown; idempotencyKey: string | undefined; inputs?: GenerationInputsIn },
  events: DoorJobEvents,
): Promise<StartedJob> {
  const key = keyOf(auth);
  if (services.switches.generationPaused().paused) throw new ApiError('generation_paused');
  const { model } = request;
  const catalogParams: Record<string, unknown> = {};
  const chatParams: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(request.params)) (isChatParam(name) ? chatParams : catalogParams)[name] = value;
  const checked = services.catalog.checkParams(model.id, catalogParams);
  if (!checked.ok) {
    const name = /^params\.(\w+)/.exec(checked.message)?.[1];
    throw new ParamError('validation_error', checked.message, name ? (OPENAI_NAMES[name] ?? name) : null, 'invalid_value');
  }
  const idempotencyKey = request.idempotencyKey;
  if (idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(idempotencyKey)) {
    throw new ParamError('validation_error', 'Idempotency-Key: 1 to 255 visible ASCII characters', null, 'invalid_value');
  }
  const params = { ...checked.params, ...chatParams };
  const workspaceId = key.workspaceId;
  const id = newId('gen', services.clock.now());
  const order = { ...(await orderOf(services, auth, { workspaceId, mode: model.mode, model: model.id, inputs: request.inputs }, { model, params })), id };

  const follower = new Follower(services, events);
  follower.follow(id);
  try {
    const idempotency = idempotencyKey === undefined ? undefined : { key: idempotencyKey, hash: requestHash({ door: true, body: request.body }) };
    const reply = await services.actors.ask('ws', workspaceId, { type: 'create', order, idempotency });
    switch (reply.kind) {
      case 'created':
        follower.recheck(id);
        return { id, replayed: false, stop: () => follower.stop() };
      case 'replay': {
        // The first job of this key: followed from where it is (its row, then what it publishes).
        const id = reply.generation.id;
        follower.follow(id);
        await follower.read(id);
        follower.recheck(id);
        return { id, replayed: true, stop: () => follower.stop() };
      }
      case 'refused':
        follower.stop();
        throw new ApiError(reply.code, reply.message);
    }
  } catch (error) {
    follower.stop();
    throw error;
  }
}

/** Follows one job: its pieces and its end, once each, whatever way they come. */
class Follower {
  private unfollow: (() => void) | undefined;
  private timer: { cancel(): void } | undefined;
  private ended = false;
  private lastIndex = -1;

  constructor(
    private readonly services: Services,
    private readonly events: DoorJobEvents,
  ) {}

  follow(id: string): void {
    this.unfollow?.();
    this.unfollow = this.services.live.follow(id, (event) => this.onEvent(event));
  }

  private onEvent(event: LiveEvent): void {
    if (this.ended) return;
    if (isLiveOutput(event)) {
      if (event.index <= this.lastIndex) return;
      this.lastIndex = event.index;
      this.events.output(event.delta, event.index);
      return;
    }
    if (event.terminal) this.end(event.generation as unknown as Ended);
  }

  private end(generation: Ended): void {
    if (this.ended) return;
    this.ended = true;
    this.stop();
    this.events.end(generation);
  }

  /** Reads the job's row: ended already, it ends here. */
  async read(id: string): Promise<void> {
    const row = await readGenerationAfresh(openUnit(this.services.db), id);
    if (row && TERMINAL.has(row.status)) this.end(toGenerationDetailOut(row));
  }

  /** Reads the row now and then while the job runs, in case its end was published on another node. */
  recheck(id: string): void {
    if (this.ended) return;
    this.timer = this.services.clock.setTimer(() => {
      this.timer = undefined;
      if (this.ended) return;
      this.read(id).then(
        () => this.recheck(id),
        () => this.recheck(id),
      );
    }, RECHECK_MS);
  }

  stop(): void {
    this.unfollow?.();
    this.unfollow = undefined;
    this.timer?.cancel();
    this.timer = undefined;
  }
}
