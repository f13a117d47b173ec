import type { OwnerOf } from '../../route.ts';
import { API_KEY_PATTERN, sha256Hex } from '../../auth/tokens.ts';
import { workspaceOfKeyHash } from '../../../persistence/stores/keys.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

const BEARER = /^Bearer +(\S+) *$/i;

/**
 * Cluster mode: the workspace of the API key a door request carries (an OpenAI client names no workspace:
 * its key does), so that the request is served on the node that runs it. A key that cannot be read places
 * nothing: authentication answers it where it arrived.
 */
export const keyWorkspace: OwnerOf = async ({ headers, db }) => {
  const plaintext = BEARER.exec(headers.authorization ?? '')?.[1];
  if (!plaintext || !API_KEY_PATTERN.test(plaintext)) return undefined;
  return workspaceOfKeyHash(openUnit(db), sha256Hex(plaintext));
};
