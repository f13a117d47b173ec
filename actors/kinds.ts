import type { ActorBehavior, ActorContext as RuntimeActorContext } from '../runtime/actor-behavior.ts';
import type { ActorDirectory } from '../runtime/actor-directory.ts';
import type { ActorMessenger } from '../runtime/actor-protocol.ts';
import type { ActorDeps } from './deps.ts';
import type { GenerationProtocol } from './generation/protocol.ts';
import type { WebhookProtocol } from './webhook/protocol.ts';
import type { WorkspaceProtocol } from './workspace/protocol.ts';

/** The service's actor kinds, each with its protocol (its messages and the reply each answers). */
export type ActorKinds = {
  ws: WorkspaceProtocol;
  gen: GenerationProtocol;
  whk: WebhookProtocol;
};

/** Messages to the service's actors: `ask('ws', id, { type: 'create', … })` answers a CreateReply. */
export type Actors = ActorMessenger<ActorKinds>;

/** The service's actor directory: its kinds, and ActorDeps handed to every actor as ctx.deps. */
export type ServiceActorDirectory = ActorDirectory<ActorKinds, ActorDeps>;

/** What one of the service's actors may use (runtime/actor-behavior.ts), with its deps and the other kinds typed. */
export type ActorContext = RuntimeActorContext<ActorDeps, ActorKinds>;

/** The behaviour of kind `Kind`: it receives that kind's messages and answers their replies. */
export type KindBehavior<Kind extends keyof ActorKinds, S> = ActorBehavior<S, ActorKinds[Kind], ActorContext> & { kind: Kind };
