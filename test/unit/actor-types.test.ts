import t from 'tap';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import type { ActorContext, Actors, KindBehavior } from '../../actors/kinds.ts';
import type { CancelReply } from '../../actors/generation/protocol.ts';
import type { Balances, CreateReply, GenerationDraft } from '../../actors/workspace/protocol.ts';

/*
 * The actors' messages are typed: each `@ts-expect-error` below marks a mistake that must not compile, and tsc
 * fails on one that finds no error. These functions never run: `npx tsc --noEmit` checks this file (test/ is in
 * tsconfig.json), and the test at the end compiles it too, so that a run of the tests alone sees it.
 */

/** What is sent: a message of its kind's union, field by field. */
export function messagesAreChecked(actors: Actors, draft: GenerationDraft): void {
  actors.tell('ws', 'ws_1', { type: 'schedule' });
  void actors.ask('ws', 'ws_1', { type: 'create', draft, idempotency: { key: 'k', hash: 'h' } });
  // @ts-expect-error a message type the workspace does not have
  void actors.ask('ws', 'ws_1', { type: 'crate', draft });
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
export async function repliesFollowTheMessage(actors: Actors, draft: GenerationDraft): Promise<void> {
  const created: CreateReply = await actors.ask('ws', 'ws_1', { type: 'create', draft });
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

/** A behaviour receives its kind's messages and answers their replies; its deps are the service's ActorDeps. */
export const answersItsKindsReplies: KindBehavior<'gen', object> = {
  kind: 'gen',
  load: async () => ({}),
  // @ts-expect-error a generation actor answers a CancelReply or nothing, never a number
  receive: async (state, msg) => ({ state, reply: msg.type === 'cancel' ? { kind: 'not_found' } : 42 }),
};

export const answersACancel: KindBehavior<'gen', object> = {
  kind: 'gen',
  load: async () => ({}),
  receive: async (state, msg) => ({ state, reply: msg.type === 'cancel' ? { kind: 'not_found' } : undefined }),
};

export const underItsOwnKind: KindBehavior<'gen', object> = {
  // @ts-expect-error a generation behaviour registered as the workspace kind
  kind: 'ws',
  load: async () => ({}),
  receive: async (state) => ({ state }),
};

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
