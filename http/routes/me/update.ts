import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { findUserOrFail, updateUserRow } from '../../../persistence/stores/identity.ts';
import { isUniqueViolation } from '../../../persistence/stores/workspaces.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { normaliseEmail } from '../auth/shapes.ts';
import { requireSession } from '../workspaces/access.ts';
import { MePatch, toUserOut, UserOut } from './shapes.ts';

export const updateMe = defineRoute({
  method: 'PATCH',
  path: '/v1/me',
  operationId: 'updateMe',
  summary: "Change the signed-in user's name or e-mail (409 when the e-mail belongs to another account)",
  description: "Changes the signed-in user's name or e-mail address. An address another account uses is 409.",
  tags: ['account'],
  access: 'auth',
  keys: 'refused',
  errors: ['conflict'],
  keyWorkspace: 'none',
  body: MePatch,
  responses: { 200: UserOut },
  handler: async ({ auth, body, services }) => {
    const { userId } = requireSession(auth, 'change a user profile');
    const changes: { name?: string; email?: string; updatedAt: Date } = { updatedAt: new Date(services.clock.now()) };
    if (body.name !== undefined) {
      changes.name = body.name.trim();
      if (changes.name === '') throw new ApiError('validation_error', 'body.name: must not be blank');
    }
    if (body.email !== undefined) changes.email = normaliseEmail(body.email);
    const unit = openUnit(services.db);
    try {
      await updateUserRow(unit, userId, changes);
    } catch (error) {
      if (isUniqueViolation(error)) throw new ApiError('conflict', 'Another account uses this e-mail address.');
      throw error;
    }
    return { body: toUserOut(await findUserOrFail(unit, userId)) };
  },
});
