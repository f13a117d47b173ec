import { Type, type Static } from '@sinclair/typebox';
import type { ExportRequest, LinkedAccount, User } from '../../../persistence/stores/identity.ts';
import { PASSWORD_MAX_LENGTH } from '../../auth/passwords.ts';
import { Email, NewPassword, PersonName } from '../auth/shapes.ts';

/** Request and response shapes of the account (/v1/me), with the one mapper from row to Out each. */

const Time = (description: string) => Type.String({ format: 'date-time', description });

export const UserOut = Type.Object(
  {
    id: Type.String({ description: 'usr_…' }),
    email: Type.String(),
    name: Type.String(),
    hasPassword: Type.Boolean({ description: 'Whether the account can sign in with a password.' }),
    createdAt: Time('When the account was made.'),
    updatedAt: Time('Last change of the profile or password.'),
  },
  { additionalProperties: false },
);
export type UserOut = Static<typeof UserOut>;

export function toUserOut(user: User): UserOut {
  return {
    id: user.id,
    email: user.email,
    name: user.name,
    hasPassword: user.passwordHash !== null,
    createdAt: user.createdAt.toISOString(),
    updatedAt: user.updatedAt.toISOString(),
  };
}

export const MePatch = Type.Object(
  {
    name: Type.Optional(PersonName),
    email: Type.Optional(Email),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const ChangePasswordIn = Type.Object(
  {
    currentPassword: Type.String({ minLength: 1, maxLength: PASSWORD_MAX_LENGTH }),
    newPassword: NewPassword,
  },
  { additionalProperties: false },
);

export const LinkedAccountOut = Type.Object(
  {
    provider: Type.String({ description: '`password`, or a sign-in provider such as `google` or `github`.' }),
    providerAccountId: Type.String({ description: 'The account at the provider; for `password`, the user id.' }),
    createdAt: Time('When it was linked.'),
  },
  { additionalProperties: false },
);

export function toLinkedAccountOut(account: LinkedAccount): Static<typeof LinkedAccountOut> {
  return { provider: account.provider, providerAccountId: account.providerAccountId, createdAt: account.createdAt.toISOString() };
}

export const ProviderParams = Type.Object(
  {
    providerId: Type.String({ minLength: 1, maxLength: 64, description: 'The provider name, as in GET /v1/me/accounts.' }),
  },
  { additionalProperties: false },
);

export const ExportParams = Type.Object({ exportId: Type.String({ minLength: 1, maxLength: 64, description: 'exp_…' }) }, { additionalProperties: false });

export const ExportOut = Type.Object(
  {
    id: Type.String({ description: 'exp_…' }),
    status: Type.Union([Type.Literal('pending'), Type.Literal('completed'), Type.Literal('failed')]),
    bytes: Type.Union([Type.Integer(), Type.Null()], { description: 'Size of the file once completed.' }),
    createdAt: Time('When it was requested.'),
    completedAt: Type.Union([Time('When the file was ready.'), Type.Null()]),
    downloadPath: Type.Union([Type.String(), Type.Null()], { description: 'GET this path (same session) for the JSON file; null until completed.' }),
  },
  { additionalProperties: false },
);

export function toExportOut(request: ExportRequest): Static<typeof ExportOut> {
  return {
    id: request.id,
    status: request.status,
    bytes: request.bytes === null ? null : Number(request.bytes),
    createdAt: request.createdAt.toISOString(),
    completedAt: request.completedAt ? request.completedAt.toISOString() : null,
    downloadPath: request.status === 'completed' ? `/v1/me/exports/${request.id}/download` : null,
  };
}
