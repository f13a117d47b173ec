import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { listLinkedAccounts as listLinkedAccountRows } from '../../../persistence/stores/identity.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { requireSession } from '../workspaces/access.ts';
import { LinkedAccountOut, toLinkedAccountOut } from './shapes.ts';

const LinkedAccountList = Type.Object(
  {
    data: Type.Array(LinkedAccountOut),
    nextCursor: Type.Null({ description: 'Always null: a user has a handful of sign-in methods, all on one page.' }),
  },
  { additionalProperties: false },
);

export const listLinkedAccounts = defineRoute({
  method: 'GET',
  path: '/v1/me/accounts',
  operationId: 'listLinkedAccounts',
  summary: 'The ways the signed-in user can sign in: `password` and linked providers',
  description: 'Lists the ways the signed-in user can sign in: `password` and any linked providers.',
  tags: ['account'],
  access: 'auth',
  keys: 'refused',
  keyWorkspace: 'none',
  responses: { 200: LinkedAccountList },
  handler: async ({ auth, services }) => {
    const { userId } = requireSession(auth, 'read linked accounts');
    const accounts = await listLinkedAccountRows(openUnit(services.db), userId);
    return { body: { data: accounts.map(toLinkedAccountOut), nextCursor: null } };
  },
});
