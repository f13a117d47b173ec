import t from 'tap';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import type { ActorContext, Actors, KindBehavior } from '../../actors/kinds.ts';
import type { CancelReply, GenerationMessage, GenerationProtocol } from '../../actors/generation/protocol.ts';
import type { Balances, CreateReply, GenerationOrder, WorkspaceMessage } from '../../actors/workspace/protocol.ts';
import type { WebhookMessage, WebhookProtocol } from '../../actors/webhook/protocol.ts';
import type { Handler, Handlers } from '../../runtime/actor-behavior.ts';
import { generationActor, type GenerationActorState } from '../../actors/generation/actor.ts';
import { workspaceActor } from '../../actors/workspace/actor.ts';
import type { WorkspaceActorState } from '../../actors/workspace/state.ts';
import type { Decision, SlotPort, WorkspaceEffect, WorkspaceFacts } from '../../actors/workspace/decision.ts';
import { decideSchedule } from '../../actors/workspace/decide-schedule.ts';
import { webhookEndpointActor } from '../../actors/webhook/actor.ts';
import type { EndpointActorState } from '../../actors/webhook/endpoint-state.ts';

/*
 * The actors' messages are typed: each `@ts-expect-error` below marks a mistake that must not compile, and tsc
 * fails on one that finds no error. These functions never run: `npx tsc --noEmit` checks this file (test/ is in
 * tsconfig.json), and the test at the end compiles it too, so that a run of the tests alone sees it.
 */

/** What is sent: a message of its kind's union, field by field. */
export function messagesAreChecked(actors: Actors, order: GenerationOrder): void {
  actors.tell('ws', 'ws_1', { type: 'schedule' });
  void actors.ask('ws', 'ws_1', { type: 'create', order, idempotency: { key: 'k', hash: 'h' } });
  // @ts-expect-error a message type the workspace does not have
  void actors.ask('ws', 'ws_1', { type: 'crate', order });
  // @ts-expect-error a generation's message sent to a workspace
  actors.tell('ws', 'ws_1', { type: 'expire' });
  // @ts-expect-error a kind the service does not have
  actors.tell('job', 'job_1', { type: 'wake' });
  // @ts-expect-error a wrong field: a cancel is by a user or an operator
  void actors.ask('gen', 'gen_1', { type: 'cancel', by: 'robot' });
  // @ts-expect-error a field the message does not have
  void actors.ask('ws', 'ws_1', { type: 'balances', workspaceId: 'ws_1' });
  // @ts-expect-error a field it needs, left out
  actors.tell('ws', 'ws_1', { type: 'slot_declined' });
}

/** What comes back: the reply the message's type declares, not one the caller chooses. */
export async function repliesFollowTheMessage(actors: Actors, order: GenerationOrder): Promise<void> {
  const created: CreateReply = await actors.ask('ws', 'ws_1', { type: 'create', order });
  const balances: Balances = await actors.ask('ws', 'ws_1', { type: 'balances' });
  const cancelled: CancelReply = await actors.ask('gen', 'gen_1', { type: 'cancel', by: 'user' });
  // @ts-expect-error a cancel answers a CancelReply, not a CreateReply
  const wrong: CreateReply = await actors.ask('gen', 'gen_1', { type: 'cancel', by: 'user' });
  // @ts-expect-error balances are no CreateReply: they have no `kind`
  void (await actors.ask('ws', 'ws_1', { type: 'balances' })).kind;
  // @ts-expect-error a told message answers nothing to read
  void (await actors.ask('ws', 'ws_1', { type: 'schedule' })).kind;
  // @ts-expect-error the caller cannot name the reply type
  void actors.ask<CreateReply>('ws', 'ws_1', { type: 'balances' });
  void [created, balances, cancelled, wrong];
}

/*
 * What is answered: a behaviour is a table of handlers, one per message type of its kind, and each handler
 * answers its own message's reply (at once or once durable), nothing for a message that answers nothing.
 */
type GenHandler<T extends GenerationMessage['type']> = Handler<object, GenerationProtocol, T, ActorContext>;

export const cancelAnswered: GenHandler<'cancel'> = (state) => ({ state, reply: { kind: 'not_found' } });
export const cancelAnsweredOnceDurable: GenHandler<'cancel'> = async (state) => ({ state, replyWhenDurable: Promise.resolve({ kind: 'not_found' as const }) });
// @ts-expect-error a cancel answers a CancelReply, never a number
export const cancelAnsweredANumber: GenHandler<'cancel'> = (state) => ({ state, reply: 42 });
// @ts-expect-error a cancel answers a CancelReply, not another message's reply
export const cancelAnsweredBalances: GenHandler<'cancel'> = (state, _msg, _ctx) => ({ state, reply: {} as Balances });
// @ts-expect-error a cancel expects an answer: a handler that gives none does not compile
export const cancelNotAnswered: GenHandler<'cancel'> = (state) => ({ state });
// @ts-expect-error a message only ever told answers nothing
export const toldButAnswered: GenHandler<'submitted'> = (state) => ({ state, reply: { kind: 'not_found' } });
export const toldWithItsWrites: GenHandler<'submitted'> = (state) => ({ state, replyWhenDurable: Promise.resolve(undefined) });
// @ts-expect-error a handler sees its own message's fields only: a submitted has no `by`
export const fieldsOfItsMessage: GenHandler<'submitted'> = (state, msg) => ({ state, passivate: msg.by === 'user' });

const told = (state: object) => ({ state });
const endpoint = (state: object) => ({ state, reply: undefined });
export const everyWebhookMessage: Handlers<object, WebhookProtocol, ActorContext> = {
  wake: told,
  due: told,
  attempt_done: told,
  update: endpoint,
  delete: endpoint,
  rotate_secret: endpoint,
};
// @ts-expect-error a table without a handler for one of its kind's messages (rotate_secret)
export const aHandlerMissing: Handlers<object, WebhookProtocol, ActorContext> = {
  wake: told,
  due: told,
  attempt_done: told,
  update: endpoint,
  delete: endpoint,
};
export const aHandlerTooMany: Handlers<object, WebhookProtocol, ActorContext> = {
  ...everyWebhookMessage,
  // @ts-expect-error a handler for a message its kind does not have
  cancel: told,
};

/** The service's behaviours are tables of their kinds, with the service's ActorDeps. */
export const serviceBehaviours: Array<
  KindBehavior<'gen', GenerationActorState> | KindBehavior<'ws', WorkspaceActorState> | KindBehavior<'whk', EndpointActorState>
> = [generationActor, workspaceActor, webhookEndpointActor];

export const underItsOwnKind: KindBehavior<'whk', object> = {
  // @ts-expect-error a webhook behaviour registered as the workspace kind
  kind: 'ws',
  load: async () => ({}),
  handlers: everyWebhookMessage,
};

/**
 * Messages are plain data (what structuredClone copies: records, arrays, maps, dates, bytes): no closures,
 * promises or handles to storage travel in them, so that any of them could be logged, replayed or sent to
 * another node. A function anywhere in a kind's messages makes its
 * `true` below fail to compile.
 */
type Plain<T> = unknown extends T
  ? T // a JSON value as a client sent it
  : T extends (...args: never[]) => unknown
    ? never
    : T extends Date | Uint8Array | string | number | bigint | boolean | null | undefined
      ? T
      : T extends Map<infer K, infer V>
        ? Map<Plain<K>, Plain<V>>
        : T extends readonly (infer E)[]
          ? readonly Plain<E>[]
          : { [K in keyof T]: Plain<T[K]> };
type IsPlain<T> = [T] extends [Plain<T>] ? true : false;
/** `true` for each message type of a kind whose message is plain data. */
type EachPlain<M extends { type: string }> = { [T in M['type']]: IsPlain<Extract<M, { type: T }>> };
type AllTrue<M extends { type: string }> = { [T in M['type']]: true };
export const plainMessages: [AllTrue<WorkspaceMessage>, AllTrue<GenerationMessage>, AllTrue<WebhookMessage>] = [
  null! as EachPlain<WorkspaceMessage>,
  null! as EachPlain<GenerationMessage>,
  null! as EachPlain<WebhookMessage>,
];
// @ts-expect-error a message with a closure in it is not plain data
export const aClosureIsNot: IsPlain<{ type: 'settle'; write: (em: unknown) => Promise<void> }> = true;
// @ts-expect-error nor one with a promise in it
export const aPromiseIsNot: IsPlain<{ type: 'hold'; wait: Promise<void> }> = true;

/**
 * The workspace's deciders answer effects that are plain data too (writes carry their rows, never a function over
 * the entity manager), and take the state, facts and the slot port, never the actor's context.
 */
export const plainEffects: [IsPlain<WorkspaceEffect>, IsPlain<WorkspaceFacts>] = [true, true];
// @ts-expect-error an effect that is a closure over the writer is not plain data
export const aWriteClosureIsNot: IsPlain<WorkspaceEffect | { type: 'write'; write: (em: unknown) => Promise<void> }> = true;
export function decidersTakeNoContext(
  state: WorkspaceActorState,
  facts: WorkspaceFacts,
  slots: SlotPort,
  ctx: ActorContext,
): Decision<WorkspaceActorState, undefined> {
  // @ts-expect-error a decider is handed facts, not the actor's context
  decideSchedule(state, ctx, slots);
  return decideSchedule(state, facts, slots);
}

export function depsAreTyped(ctx: ActorContext): number {
  // @ts-expect-error ActorDeps has no such member
  void ctx.deps.noSuchDependency;
  return ctx.deps.queueTimeoutMs;
}

t.test('the mistakes above do not compile, and nothing else in this file fails to', async (t) => {
  const file = fileURLToPath(import.meta.url);
  const root = path.resolve(path.dirname(file), '../..');
  const { config } = ts.readConfigFile(path.join(root, 'tsconfig.json'), ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, root);
  const program = ts.createProgram([file], options);
  const diagnostics = ts.getPreEmitDiagnostics(program, program.getSourceFile(file));
  const where = (d: ts.Diagnostic) => (d.file && d.start !== undefined ? `line ${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: ` : '');
  t.same(
    diagnostics.map((d) => where(d) + ts.flattenDiagnosticMessageText(d.messageText, ' ')),
    [],
    'every @ts-expect-error found its error',
  );
});
