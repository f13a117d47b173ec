import { EntitySchema } from '@mikro-orm/core';

/** A person who signs in to the dashboard. E-mail is stored trimmed and in lower case. */
export interface User {
  id: string;
  email: string;
  name: string;
  /** `scrypt$N$r$p$salt$hash`; null for accounts that sign in only through a linked provider. */
  passwordHash: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export const UserEntity = new EntitySchema<User>({
  name: 'User',
  tableName: 'users',
  properties: {
    id: { type: 'string', primary: true },
    email: { type: 'string' },
    name: { type: 'string' },
    passwordHash: { type: 'string', fieldName: 'password_hash', nullable: true },
    createdAt: { type: 'Date', fieldName: 'created_at' },
    updatedAt: { type: 'Date', fieldName: 'updated_at' },
  },
});
