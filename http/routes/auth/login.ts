import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { burnPasswordCheck, hashPassword, needsRehash, verifyPassword } from '../../auth/passwords.ts';
import { assertSameOrigin } from '../../auth/origin.ts';
import { startSession } from '../../auth/sessions.ts';
import { beginLoginAttempt } from '../../auth/login-throttle.ts';
import { findUserByEmail, rehashPassword } from '../../../persistence/stores/identity.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { LoginIn, LoginOut, normaliseEmail, toSessionUserOut } from './shapes.ts';

export const login = defineRoute({
  method: 'POST',
  path: '/v1/auth/login',
  operationId: 'login',
  summary:
    'Sign in with e-mail and password and start a session (Set-Cookie gs_session); failures are throttled per account and address, per address, and per account under attack',
  description:
    'Checks an e-mail address and password and starts a session (Set-Cookie gs_session). A wrong address or password is 401; failed attempts are throttled per account and address, per address, and per account under attack, answering 429 with Retry-After.',
  tags: ['auth'],
  access: 'public',
  errors: ['unauthenticated', 'forbidden', 'rate_limited'],
  body: LoginIn,
  responses: { 200: LoginOut },
  handler: async ({ body, services, headers, remoteAddress }) => {
    assertSameOrigin(services.config, 'POST', headers);
    const email = normaliseEmail(body.email);
    const attempt = await beginLoginAttempt(services, email, remoteAddress);
    const user = await findUserByEmail(openUnit(services.db), email);
    // The same work and the same answer whether the account is unknown or the password wrong.
    let valid = false;
    if (user?.passwordHash) valid = await verifyPassword(body.password, user.passwordHash);
    else await burnPasswordCheck(body.password);
    if (!user || !valid) {
      await attempt.failed();
      throw new ApiError('unauthenticated', 'The e-mail address or the password is not correct.');
    }
    await attempt.succeeded();
    if (needsRehash(user.passwordHash!)) {
      const passwordHash = await hashPassword(body.password);
      await rehashPassword(openUnit(services.db), user.id, passwordHash);
    }
    const { setCookie } = await startSession(services, user.id, { ip: remoteAddress, userAgent: headers['user-agent'] });
    return { headers: { 'Set-Cookie': setCookie, 'Cache-Control': 'no-store' }, body: { user: toSessionUserOut(user) } };
  },
});
