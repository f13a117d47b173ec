import t from 'tap';
import { readFileSync } from 'node:fs';
import { ApiError, ERRORS, ERROR_CODES } from '../../http/errors.ts';

t.test('every error code of the registry is in the errors table of docs/api.md with its status', async (t) => {
  const docs = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
  for (const code of ERROR_CODES) {
    t.match(docs, new RegExp(`\\| ${ERRORS[code].status} \\| ${code} \\|`), `${code} (${ERRORS[code].status}) is in the errors table`);
  }
});

t.test('ApiError takes its status from the registry', async (t) => {
  const error = new ApiError('insufficient_credits');
  t.equal(error.status, 402);
  t.equal(error.message, ERRORS.insufficient_credits.message);
  t.equal(new ApiError('conflict', 'already cancelled').message, 'already cancelled');
});
