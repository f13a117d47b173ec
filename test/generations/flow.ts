import type { TestServer } from '../helpers/server.ts';
import { withKey } from '../helpers/identity.ts';
import { eventually } from '../helpers/eventually.ts';

/** What the tests read of a generation (GET /v1/generations/:id). */
export interface Gen {
  id: string;
  workspaceId: string;
  status: string;
  mode: string;
  modelId: string;
  credits: number;
  paymentMode: string;
  textOutput: string | null;
  outputAssetIds: string[];
  errorCode: string | null;
  errorMessage: string | null;
  startedAt: string | null;
  completedAt: string | null;
  timeline: Array<{ status: string; at: string; detail?: string }>;
  error?: { code: string; message: string };
}

/** Anything that speaks HTTP to a service: a TestServer, or a child process's base URL. */
export type Client = Pick<TestServer, 'json'>;

export function httpClient(url: string): Client {
  return {
    async json(path, init) {
      const response = await fetch(`${url}${path}`, init);
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
    },
  };
}

export const TERMINAL = ['succeeded', 'failed', 'cancelled', 'expired'];

export function createGeneration(client: Client, key: string, workspaceId: string, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return client.json<Gen>('/v1/generations', { method: 'POST', headers: withKey(key, headers), body: JSON.stringify({ workspaceId, ...body }) });
}

/**
 * GET /v1/generations/:id. A poll that outruns the key's rate limit (60 a minute on the free plan, reached when a slow
 * machine keeps a job waiting) waits as Retry-After says and asks again: the limit is not what a poller tests.
 */
export async function getGeneration(client: Client, key: string, workspaceId: string, id: string): Promise<Gen> {
  for (;;) {
    const { status, body, headers } = await client.json<Gen>(`/v1/generations/${id}?workspaceId=${workspaceId}`, { headers: withKey(key) });
    if (status === 429) {
      const seconds = Number(headers.get('retry-after') ?? '1');
      await new Promise((resolve) => setTimeout(resolve, Math.max(1, seconds) * 1000));
      continue;
    }
    if (status !== 200) throw new Error(`GET ${id}: ${status} ${JSON.stringify(body)}`);
    return body;
  }
}

export function cancelGeneration(client: Client, key: string, workspaceId: string, id: string) {
  return client.json<Gen>(`/v1/generations/${id}/cancel?workspaceId=${workspaceId}`, { method: 'POST', headers: withKey(key) });
}

/** Polls GET until `done` holds (a wall-clock bound only against hanging forever, never a pass condition). */
export async function waitFor(
  client: Client,
  key: string,
  workspaceId: string,
  id: string,
  done: (g: Gen) => boolean,
  what = 'the expected state',
): Promise<Gen> {
  let last: Gen | undefined;
  return eventually(
    async () => {
      last = await getGeneration(client, key, workspaceId, id);
      return done(last) ? last : undefined;
    },
    { timeoutMs: 30_000, everyMs: 25, what: `generation ${id} reaching ${what}` },
  ).catch((error: Error) => {
    throw new Error(`${error.message}; last seen ${JSON.stringify(last)}`);
  });
}

export const isTerminal = (g: Gen) => TERMINAL.includes(g.status);

type Query = <T>(sql: string, params: unknown[]) => Promise<T[]>;

export interface Money {
  available: number;
  reserved: number;
  /** Sums of the ledger's columns: they must equal the balances. */
  ledgerAvailable: number;
  ledgerReserved: number;
  /** Generations whose ledger `reserve` entry has no capture or release yet. */
  reservations: string[];
}

/** A workspace's balances and the sums of its ledger, read from the database. */
export async function moneyOf(query: Query, workspaceId: string): Promise<Money> {
  const [account] = await query<{ available_credits: number; reserved_credits: number }>(
    'select available_credits, reserved_credits from workspace_accounts where workspace_id = ?',
    [workspaceId],
  );
  const [ledger] = await query<{ credits: string; reserved: string }>(
    'select coalesce(sum(credits), 0)::int8 as credits, coalesce(sum(reserved_credits), 0)::int8 as reserved from credit_ledger where workspace_id = ?',
    [workspaceId],
  );
  const open = await query<{ generation_id: string }>(
    `select r.generation_id from credit_ledger r where r.workspace_id = ? and r.kind = 'reserve'
       and not exists (select 1 from credit_ledger s where s.workspace_id = r.workspace_id and s.generation_id = r.generation_id and s.kind in ('capture', 'release'))`,
    [workspaceId],
  );
  return {
    available: Number(account!.available_credits),
    reserved: Number(account!.reserved_credits),
    ledgerAvailable: Number(ledger!.credits),
    ledgerReserved: Number(ledger!.reserved),
    reservations: open.map((r) => r.generation_id).sort(),
  };
}

/** Ledger entries per generation and kind: `{ gen_…: { reserve: 1, capture: 1 } }`. */
export async function ledgerByGeneration(query: Query, workspaceId: string): Promise<Record<string, Record<string, number>>> {
  const rows = await query<{ generation_id: string; kind: string; n: string }>(
    `select generation_id, kind, count(*)::int8 as n from credit_ledger where workspace_id = ? and generation_id is not null group by generation_id, kind`,
    [workspaceId],
  );
  const out: Record<string, Record<string, number>> = {};
  for (const row of rows) (out[row.generation_id] ??= {})[row.kind] = Number(row.n);
  return out;
}

export function serverQuery(server: TestServer): Query {
  return async <T>(sql: string, params: unknown[]) => {
    await server.services.writer.flush();
    return server.services.db.em().execute<T[]>(sql, params);
  };
}
