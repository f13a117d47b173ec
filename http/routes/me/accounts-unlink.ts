import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { clearPassword, deleteLinkedAccount, findUserOrFail, linkedAccountsOf } from '../../../persistence/stores/identity.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { requireSession } from '../workspaces/access.ts';
import { ProviderParams } from './shapes.ts';

export const unlinkAccount = defineRoute({
  method: 'DELETE',
  path: '/v1/me/accounts/:providerId',
  operationId: 'unlinkAccount',
  summary: 'Unlink a sign-in provider; `password` removes the password. 409 for the last way to sign in',
  description: 'Removes a way to sign in; `password` removes the password. The last remaining way cannot be removed (409).',
  tags: ['account'],
  access: 'auth',
  keys: 'refused',
  errors: ['conflict'],
  keyWorkspace: 'none',
  params: ProviderParams,
  responses: { 204: null },
  handler: async ({ auth, params, services }) => {
    const { userId } = requireSession(auth, 'unlink sign-in providers');
    await inTransaction(openUnit(services.db), async (tx) => {
      // The user row's lock serialises two unlinks racing for the last two methods.
      const user = await findUserOrFail(tx, userId, { lock: true });
      const linked = await linkedAccountsOf(tx, userId);
      const methods = new Set(linked.map((a) => a.provider));
      if (user.passwordHash !== null) methods.add('password');
      if (!methods.has(params.providerId)) throw new ApiError('not_found', `No linked sign-in provider ${params.providerId}.`);
      if (methods.size === 1) throw new ApiError('conflict', 'This is the last way to sign in to the account; link another one first.');
      await deleteLinkedAccount(tx, userId, params.providerId);
      if (params.providerId === 'password') {
        await clearPassword(tx, userId, new Date(services.clock.now()));
      }
    });
    return { status: 204 };
  },
});
