import type { SecretBox } from '../../persistence/secret-box.ts';
import type { WebhookEndpointRow } from '../../persistence/stores/webhooks/rows.ts';

/** An endpoint's secrets opened: undefined where one cannot be (another WEBHOOK_SECRET_KEY), or has no previous one. */
export interface OpenedSecrets {
  secret: string | undefined;
  previousSecret: string | undefined;
  /** Why the current secret could not be opened. */
  error?: unknown;
}

/**
 * Opens the sealed secrets of an endpoint row. Both are bound to the endpoint id, so a rotation moves the
 * current sealed value to `previous` as it is. A previous secret whose overlap has ended is not opened.
 */
export function openEndpointSecrets(
  row: Pick<WebhookEndpointRow, 'id' | 'secretSealed' | 'previousSecretSealed' | 'previousSecretExpiresAt'>,
  box: SecretBox,
  now: number,
): OpenedSecrets {
  let secret: string | undefined;
  let previousSecret: string | undefined;
  let error: unknown;
  try {
    secret = box.open(row.secretSealed, row.id);
  } catch (caught) {
    error = caught;
  }
  if (row.previousSecretSealed && row.previousSecretExpiresAt && row.previousSecretExpiresAt.getTime() > now) {
    try {
      previousSecret = box.open(row.previousSecretSealed, row.id);
    } catch {
      // Signing goes on with the current secret alone.
    }
  }
  return error === undefined ? { secret, previousSecret } : { secret, previousSecret, error };
}
