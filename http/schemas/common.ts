import { Type } from '@sinclair/typebox';
import { ERROR_CODES } from '../errors.ts';

export const ErrorEnvelope = Type.Object(
  {
    error: Type.Object(
      {
        code: Type.Union(
          ERROR_CODES.map((code) => Type.Literal(code)),
          { description: 'Stable, machine-readable error code; branch on this.' },
        ),
        message: Type.String({ description: 'Human-readable explanation.' }),
        requestId: Type.String({ description: 'Also sent as the X-Request-Id header.' }),
      },
      { additionalProperties: false },
    ),
  },
  { $id: 'ErrorEnvelope', additionalProperties: false },
);
