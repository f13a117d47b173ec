import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { hashPassword } from '../../auth/passwords.ts';
import { assertSameOrigin } from '../../auth/origin.ts';
import { startSession } from '../../auth/sessions.ts';
import { newId } from '../../../persistence/ids.ts';
import { insertSignup, type User } from '../../../persistence/stores/identity.ts';
import { isUniqueViolation, type Workspace, type WorkspaceMember } from '../../../persistence/stores/workspaces.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
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
      await insertSignup(openUnit(services.db), user, workspace, owner);
    } catch (error) {
      if (isUniqueViolation(error)) throw new ApiError('conflict', 'An account with this e-mail address already exists.');
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
