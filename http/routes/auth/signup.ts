import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { hashPassword } from '../../auth/passwords.ts';
import { assertSameOrigin } from '../../auth/origin.ts';
import { startSession } from '../../auth/sessions.ts';
import { newId } from '../../../persistence/ids.ts';
import { UserEntity, type User } from '../../../persistence/entities/user.ts';
import { LinkedAccountEntity } from '../../../persistence/entities/linked-account.ts';
import { WorkspaceEntity, type Workspace } from '../../../persistence/entities/workspace.ts';
import { WorkspaceMemberEntity, type WorkspaceMember } from '../../../persistence/entities/workspace-member.ts';
import { normaliseEmail, SignupIn, SignupOut, toSessionUserOut } from './shapes.ts';

export const signup = defineRoute({
  method: 'POST',
  path: '/v1/auth/signup',
  operationId: 'signup',
  summary: 'Create an account and its personal workspace (free plan, the user as owner), and start a session (Set-Cookie gs_session)',
  description:
    'Creates a user with an e-mail address and a password, their personal workspace on the free plan with the user as owner, and a session whose cookie the answer sets. An e-mail address that already has an account is 409 conflict; a browser request from a foreign Origin is 403.',
  tags: ['auth'],
  access: 'public',
  errors: ['conflict', 'forbidden'],
  body: SignupIn,
  responses: { 201: SignupOut },
  handler: async ({ body, services, headers, remoteAddress }) => {
    // A foreign page must not be able to sign a visitor in to an account of its choosing.
    assertSameOrigin(services.config, 'POST', headers);
    const name = body.name.trim();
    if (name === '') throw new ApiError('validation_error', 'body.name: must not be blank');
    const email = normaliseEmail(body.email);
    const passwordHash = await hashPassword(body.password);
    const now = services.clock.now();
    const at = new Date(now);
    const user: User = { id: newId('usr', now), email, name, passwordHash, createdAt: at, updatedAt: at };
    const workspace: Workspace = {
      id: newId('ws', now),
      name: `${name}'s workspace`.slice(0, 100),
      plan: services.catalog.defaultPlan().id,
      personal: true,
      createdAt: at,
      updatedAt: at,
    };
    const owner: WorkspaceMember = { workspaceId: workspace.id, userId: user.id, role: 'owner', createdAt: at };
    try {
      await services.db.em().transactional(async (tx) => {
        await tx.insert(UserEntity, user);
        await tx.insert(LinkedAccountEntity, { userId: user.id, provider: 'password', providerAccountId: user.id, createdAt: at });
        await tx.insert(WorkspaceEntity, workspace);
        await tx.insert(WorkspaceMemberEntity, owner);
      });
    } catch (error) {
      if (error instanceof UniqueConstraintViolationException) throw new ApiError('conflict', 'An account with this e-mail address already exists.');
      throw error;
    }
    const { setCookie } = await startSession(services, user.id, { ip: remoteAddress, userAgent: headers['user-agent'] });
    return {
      status: 201,
      headers: { 'Set-Cookie': setCookie, 'Cache-Control': 'no-store' },
      body: { user: toSessionUserOut(user), workspace: { id: workspace.id, name: workspace.name, plan: workspace.plan } },
    };
  },
});
