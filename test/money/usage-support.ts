/**
 * The usage figures as GET /v1/usage computed them before the rollups (a count over the rows of the
 * range), kept here as the reference the rollups must always equal.
 */
export type Query = <T>(sql: string, params: unknown[]) => Promise<T[]>;

export interface Figures {
  total: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  expired: number;
  unfinished: number;
  credits: number;
  creditsFromBalance: number;
  costCents: number;
  outputBytes: number;
}

/** The three queries of the old route, verbatim but for the output names. */
export async function recount(query: Query, workspaceId: string, apiKeyId: string | null, from: string, to: string): Promise<Figures> {
  const where = ['g.workspace_id = ?', 'g.created_at >= ?::timestamptz', 'g.created_at < ?::timestamptz'];
  const values: unknown[] = [workspaceId, from, to];
  if (apiKeyId !== null) {
    where.push('g.api_key_id = ?');
    values.push(apiKeyId);
  }
  const scope = where.join(' and ');
  const [counts] = await query<Record<string, string | number>>(
    `select count(*) as total,
            count(*) filter (where g.status = 'succeeded') as succeeded, count(*) filter (where g.status = 'failed') as failed,
            count(*) filter (where g.status = 'cancelled') as cancelled, count(*) filter (where g.status = 'expired') as expired,
            count(*) filter (where g.status in ('queued', 'reserved', 'submitted', 'running')) as unfinished
       from generations g where ${scope}`,
    values,
  );
  const [money] = await query<Record<string, string | number>>(
    `select coalesce(sum(g.credits), 0) as credits, coalesce(sum(-l.reserved_credits), 0) as from_balance, coalesce(sum(-l.reserved_wallet_cents), 0) as cost
       from credit_ledger l join generations g on g.id = l.generation_id
      where l.workspace_id = ? and l.kind = 'capture' and ${scope}`,
    [workspaceId, ...values],
  );
  const [bytes] = await query<{ bytes: string | number }>(
    `select coalesce(sum(a.bytes), 0) as bytes from assets a join generations g on g.id = a.source_generation_id
      where a.workspace_id = ? and ${scope}`,
    [workspaceId, ...values],
  );
  const n = (value: unknown) => Number(value ?? 0);
  return {
    total: n(counts?.total),
    succeeded: n(counts?.succeeded),
    failed: n(counts?.failed),
    cancelled: n(counts?.cancelled),
    expired: n(counts?.expired),
    unfinished: n(counts?.unfinished),
    credits: n(money?.credits),
    creditsFromBalance: n(money?.from_balance),
    costCents: n(money?.cost),
    outputBytes: n(bytes?.bytes),
  };
}

/** Every rollup row, and the same rows recounted from the generations, ledger and assets; as sorted JSON lines to compare. */
export async function rollupsAndRecount(query: Query): Promise<{ rollups: string[]; recounted: string[] }> {
  const line = (r: Record<string, unknown>) =>
    JSON.stringify([
      r.workspace_id,
      r.day,
      r.api_key_id,
      ...['total', 'succeeded', 'failed', 'cancelled', 'expired', 'unfinished', 'credits', 'credits_from_balance', 'cost_cents', 'output_bytes'].map((c) =>
        Number(r[c]),
      ),
    ]);
  const rollups = await query<Record<string, unknown>>(
    `select workspace_id, to_char(day, 'YYYY-MM-DD') as day, api_key_id, total, succeeded, failed, cancelled, expired, unfinished,
            credits, credits_from_balance, cost_cents, output_bytes from usage_rollups`,
    [],
  );
  const recounted = await query<Record<string, unknown>>(
    `select g.workspace_id, to_char((g.created_at at time zone 'UTC')::date, 'YYYY-MM-DD') as day, coalesce(g.api_key_id, '') as api_key_id,
            count(*) as total, count(*) filter (where g.status = 'succeeded') as succeeded, count(*) filter (where g.status = 'failed') as failed,
            count(*) filter (where g.status = 'cancelled') as cancelled, count(*) filter (where g.status = 'expired') as expired,
            count(*) filter (where g.status in ('queued', 'reserved', 'submitted', 'running')) as unfinished,
            coalesce(sum(g.credits) filter (where l.id is not null), 0) as credits, coalesce(sum(-l.reserved_credits), 0) as credits_from_balance,
            coalesce(sum(-l.reserved_wallet_cents), 0) as cost_cents,
            coalesce(sum((select sum(a.bytes) from assets a where a.workspace_id = g.workspace_id and a.source_generation_id = g.id)), 0) as output_bytes
       from generations g left join credit_ledger l on l.workspace_id = g.workspace_id and l.kind = 'capture' and l.generation_id = g.id
      group by 1, 2, 3`,
    [],
  );
  // A rollup row whose generations are all gone would be all zeros; none is expected, so compare as they are.
  return { rollups: rollups.map(line).sort(), recounted: recounted.map(line).sort() };
}
