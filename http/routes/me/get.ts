import { defineRoute } from '../../route.ts';
import { findUserOrFail } from '../../../persistence/stores/identity.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { requireSession } from '../workspaces/access.ts';
import { toUserOut, UserOut } from './shapes.ts';

export const getMe = defineRoute({
  method: 'GET',
  path: '/v1/me',
  operationId: 'getMe',
  summary: "The signed-in user's profile (API keys belong to workspaces, not people: 403)",
  description: "Reads the signed-in user's profile. API keys belong to workspaces, not people, so a key is 403.",
  tags: ['account'],
  access: 'auth',
  keys: 'refused',
  keyWorkspace: 'none',
  responses: { 200: UserOut },
  handler: async ({ auth, services }) => {
    const { userId } = requireSession(auth, 'read a user profile');
    const user = await findUserOrFail(openUnit(services.db), userId);
    return { body: toUserOut(user) };
  },
});
