import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { hashPassword, verifyPassword } from '../../auth/passwords.ts';
import { beginLoginAttempt } from '../../auth/login-throttle.ts';
import { SessionEntity } from '../../../persistence/entities/session.ts';
import { UserEntity } from '../../../persistence/entities/user.ts';
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
    const em = services.db.em();
    const user = await em.findOneOrFail(UserEntity, { id: userId });
    if (user.passwordHash === null) throw new ApiError('conflict', 'This account has no password; it signs in through a linked provider.');
    // A wrong current password is a guess at it: counted and throttled like a failed login.
    const attempt = await beginLoginAttempt(services, user.email, remoteAddress);
    if (!(await verifyPassword(body.currentPassword, user.passwordHash))) {
      await attempt.failed();
      throw new ApiError('forbidden', 'The current password is not correct.');
    }
    await attempt.succeeded();
    const newHash = await hashPassword(body.newPassword);
    await em.transactional(async (tx) => {
      // Only if nobody changed it while we were hashing: otherwise the check above was against a stale hash.
      const changed = await tx.nativeUpdate(
        UserEntity,
        { id: userId, passwordHash: user.passwordHash },
        { passwordHash: newHash, updatedAt: new Date(services.clock.now()) },
      );
      if (changed === 0) throw new ApiError('conflict', 'The password was changed meanwhile; try again.');
      await tx.nativeDelete(SessionEntity, { userId, id: { $ne: sessionId } });
    });
    return { status: 204 };
  },
});
