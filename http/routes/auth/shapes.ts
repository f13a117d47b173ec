import { Type } from '@sinclair/typebox';
import type { User } from '../../../persistence/stores/identity.ts';
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from '../../auth/passwords.ts';

export const Email = Type.String({ format: 'email', minLength: 3, maxLength: 254, description: 'E-mail address; compared without regard to case.' });
export const PersonName = Type.String({ minLength: 1, maxLength: 100, description: 'Display name, 1 to 100 characters.' });
export const NewPassword = Type.String({
  minLength: PASSWORD_MIN_LENGTH,
  maxLength: PASSWORD_MAX_LENGTH,
  description: `${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters.`,
});

export const SignupIn = Type.Object({ email: Email, password: NewPassword, name: PersonName }, { additionalProperties: false });
export const LoginIn = Type.Object(
  {
    email: Type.String({ minLength: 1, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: PASSWORD_MAX_LENGTH }),
  },
  { additionalProperties: false },
);

export const SessionUserOut = Type.Object(
  {
    id: Type.String({ description: 'usr_…' }),
    email: Type.String(),
    name: Type.String(),
    createdAt: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

export const SignupOut = Type.Object(
  {
    user: SessionUserOut,
    workspace: Type.Object(
      {
        id: Type.String({ description: 'ws_…, the personal workspace made at sign-up; the user is its owner.' }),
        name: Type.String(),
        plan: Type.String(),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

export const LoginOut = Type.Object({ user: SessionUserOut }, { additionalProperties: false });

export function toSessionUserOut(user: User) {
  return { id: user.id, email: user.email, name: user.name, createdAt: user.createdAt.toISOString() };
}

/** E-mail as stored and compared: trimmed, lower case. */
export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}
