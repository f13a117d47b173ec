/** Statements on the Idempotency-Keys of recover requests (webhook_recoveries). */
import { emOf } from '../orm.ts';
import type { Unit } from '../unit.ts';

/**
 * Inserts the key for the endpoint, or takes over one made before `expiredBefore`; true if this request
 * holds it now. A key used by a request still running waits for it (the unique key).
 */
export async function claimRecoveryRow(
  unit: Unit,
  row: { endpointId: string; key: string; workspaceId: string; hash: string },
  at: Date,
  expiredBefore: Date,
): Promise<boolean> {
  const claimed = await emOf(unit).execute<Array<{ endpoint_id: string }>>(
    `insert into webhook_recoveries (endpoint_id, idempotency_key, workspace_id, request_hash, answer, created_at)
     values (?, ?, ?, ?, '{}'::jsonb, ?)
     on conflict (endpoint_id, idempotency_key) do update set request_hash = excluded.request_hash, answer = excluded.answer, created_at = excluded.created_at
       where webhook_recoveries.created_at < ?
     returning endpoint_id`,
    [row.endpointId, row.key, row.workspaceId, row.hash, at, expiredBefore],
  );
  return claimed.length > 0;
}

/** The hash and answer kept with a key, if any. */
export async function readRecoveryRow<Answer>(unit: Unit, endpointId: string, key: string): Promise<{ hash: string; answer: Answer } | undefined> {
  const [earlier] = await emOf(unit).execute<Array<{ request_hash: string; answer: Answer | string }>>(
    'select request_hash, answer from webhook_recoveries where endpoint_id = ? and idempotency_key = ?',
    [endpointId, key],
  );
  if (!earlier) return undefined;
  return { hash: earlier.request_hash, answer: typeof earlier.answer === 'string' ? (JSON.parse(earlier.answer) as Answer) : earlier.answer };
}

export async function writeRecoveryAnswer(unit: Unit, endpointId: string, key: string, answer: unknown): Promise<void> {
  await emOf(unit).execute('update webhook_recoveries set answer = ?::jsonb where endpoint_id = ? and idempotency_key = ?', [
    JSON.stringify(answer),
    endpointId,
    key,
  ]);
}
