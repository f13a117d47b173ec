import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { hashPassword, verifyPassword } from '../../auth/passwords.ts';
import { beginLoginAttempt } from '../../auth/login-throttle.ts';
import { deleteOtherSessions, findUserOrFail, replacePassword } from '../../../persistence/stores/identity.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { requireSession } from '../workspaces/access.ts';
import { ChangePasswordIn } from './shapes.ts';

export const changePassword = defineRoute({
  method: 'POST',
  path: '/v1/me/change-password',
  operationId: 'changePassword',
  summary: 'Change the password (the current one is required); every other session of the user ends, this one stays',
  description:
    "Changes the signed-in user's password, given the current one (403 when it is wrong; failures are throttled like sign-ins, 429). Every other session of the user ends; this one stays.",
  tags: ['account'],
  access: 'auth',
  keys: 'refused',
  errors: ['conflict', 'rate_limited'],
  keyWorkspace: 'none',
  body: ChangePasswordIn,
  responses: { 204: null },
  handler: async ({ auth, body, services, remoteAddress }) => {
    const { userId, sessionId } = requireSession(auth, 'change passwords');
    const unit = openUnit(services.db);
    const user = await findUserOrFail(unit, userId);
    if (user.passwordHash === null) throw new ApiError('conflict', 'This account has no password; it signs in through a linked provider.');
    // A wrong current password is a guess at it: counted and throttled like a failed login.
    const attempt = await beginLoginAttempt(services, user.email, remoteAddress);
    if (!(await verifyPassword(body.currentPassword, user.passwordHash))) {
      await attempt.failed();
      throw new ApiError('forbidden', 'The current password is not correct.');
    }
    await attempt.succeeded();
    const newHash = await hashPassword(body.newPassword);
    const current = user.passwordHash;
    await inTransaction(unit, async (tx) => {
      // Only if nobody changed it while we were hashing: otherwise the check above was against a stale hash.
      if (!(await replacePassword(tx, userId, current, newHash, new Date(services.clock.now())))) {
        throw new ApiError('conflict', 'The password was changed meanwhile; try again.');
      }
      await deleteOtherSessions(tx, userId, sessionId);
    });
    return { status: 204 };
  },
});
