import { EntitySchema } from '@mikro-orm/core';

/** A way to sign in: `password` (providerAccountId is the user id) or a social provider. */
export interface LinkedAccount {
  userId: string;
  provider: string;
  providerAccountId: string;
  createdAt: Date;
}

export const LinkedAccountEntity = new EntitySchema<LinkedAccount>({
  name: 'LinkedAccount',
  tableName: 'linked_accounts',
  properties: {
    userId: { type: 'string', fieldName: 'user_id', primary: true },
    provider: { type: 'string', primary: true },
    providerAccountId: { type: 'string', fieldName: 'provider_account_id' },
    createdAt: { type: 'Date', fieldName: 'created_at' },
  },
});
