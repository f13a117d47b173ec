/**
 * The statements of creating generations (the workspace actor's creates, gathered by group commit): the rows,
 * their reservations and ledger entries, usage rollups and series, key spend and Idempotency-Keys, all in the
 * money's one statement.
 */
import type { KeySpendDelta } from '../../../domain/key-limits.ts';
import { boundQuery } from '../../bound-query.ts';
import { statusFigure, usageDay, usageUpsert } from '../../usage-rollups.ts';
import { seriesUpsert } from '../../usage-series.ts';
import type { GenerationRow } from '../generations/rows.ts';
import type { Transaction } from '../transaction.ts';
import { keySpendWrite } from './keys.ts';
import { writeMoneyChanges, type MoneyChange } from './money.ts';

/** What creating one generation writes: the row, its reservation, and its Idempotency-Key if it has one. */
export interface NewCreation {
  /** The row written: queued, or already reserved when its workspace had a free slot. */
  generation: GenerationRow;
  /** The create's answer, kept with its Idempotency-Key: the job as created (queued). Default: `generation`. */
  answer?: GenerationRow;
  money: MoneyChange;
  /** What the generation counts against its API key's spend (domain/key-limits.ts). */
  keySpend?: KeySpendDelta[];
  idempotency?: { key: string; hash: string; expiresAt: Date };
  /** The creating request's trace context and id (runtime/tracing.ts, JobContext), kept with the job; null with tracing off. */
  traceContext?: object | null;
}

const GENERATION_COLUMNS = [
  'id',
  'workspace_id',
  'api_key_id',
  'user_id',
  'mode',
  'model_id',
  'status',
  'params',
  'inputs',
  'payment_mode',
  'credits',
  'project',
  'idempotency_key',
  'provider',
  'provider_job_id',
  'attempts',
  'text_output',
  'output_asset_ids',
  'error_code',
  'error_message',
  'timeline',
  'queue_deadline',
  'created_at',
  'updated_at',
  'started_at',
  'completed_at',
  'trace_context',
  'deployment_id',
  'token_terms',
].join(', ');

function generationColumns(g: GenerationRow, traceContext: NewCreation['traceContext']): Record<string, unknown> {
  return {
    trace_context: traceContext ?? null,
    deployment_id: g.deploymentId,
    token_terms: g.tokenTerms,
    id: g.id,
    workspace_id: g.workspaceId,
    api_key_id: g.apiKeyId,
    user_id: g.userId,
    mode: g.mode,
    model_id: g.modelId,
    status: g.status,
    params: g.params,
    inputs: g.inputs,
    payment_mode: g.paymentMode,
    credits: g.credits,
    project: g.project,
    idempotency_key: g.idempotencyKey,
    provider: g.provider,
    provider_job_id: g.providerJobId,
    attempts: g.attempts,
    text_output: g.textOutput,
    output_asset_ids: g.outputAssetIds,
    error_code: g.errorCode,
    error_message: g.errorMessage,
    timeline: g.timeline,
    queue_deadline: g.queueDeadline,
    created_at: g.createdAt,
    updated_at: g.updatedAt,
    started_at: g.startedAt,
    completed_at: g.completedAt,
  };
}

/**
 * The creates of one group commit in one statement whatever their number: the generation rows, their usage
 * rollups, their key spend, their Idempotency-Keys if any and the money of all their workspaces
 * (writeMoneyChanges). It decides nothing from the answer (the server checks the accounts), so its batches
 * may send COMMIT along (generationWritten tells afterwards whether they committed).
 */
export function writeCreations(em: Transaction, creations: NewCreation[]): Promise<void> {
  const usage = usageUpsert(
    creations.map(({ generation: g }) => ({
      workspaceId: g.workspaceId,
      apiKeyId: g.apiKeyId,
      day: usageDay(g.createdAt),
      total: 1,
      [statusFigure(g.status)]: 1,
    })),
  );
  const series = seriesUpsert(
    creations.map(({ generation: g }) => ({
      workspaceId: g.workspaceId,
      apiKeyId: g.apiKeyId,
      modelId: g.modelId,
      mode: g.mode,
      project: g.project,
      createdAt: g.createdAt,
      total: 1,
      [statusFigure(g.status)]: 1,
    })),
  );
  const keySpend = keySpendWrite(creations.flatMap((c) => c.keySpend ?? []));
  const keys = creations.flatMap((c) =>
    c.idempotency
      ? [
          {
            workspace_id: c.generation.workspaceId,
            key: c.idempotency.key,
            request_hash: c.idempotency.hash,
            response_status: 201,
            response_body: c.answer ?? c.generation,
            created_at: c.generation.createdAt,
            expires_at: c.idempotency.expiresAt,
          },
        ]
      : [],
  );
  // A key used again after it expired takes the place of its old row. One workspace never has two
  // creates with the same key in flight (its actor refuses the second), so no two rows here collide.
  const idempotency =
    keys.length === 0
      ? []
      : [
          {
            sql: `insert into idempotency_keys (workspace_id, key, request_hash, response_status, response_body, created_at, expires_at)
     select k.workspace_id, k.key, k.request_hash, k.response_status, k.response_body, k.created_at, k.expires_at
     from jsonb_to_recordset(?::jsonb) as k(workspace_id text, key text, request_hash text, response_status integer, response_body jsonb,
       created_at timestamptz, expires_at timestamptz)
     on conflict (workspace_id, key) do update set request_hash = excluded.request_hash, response_status = excluded.response_status,
       response_body = excluded.response_body, created_at = excluded.created_at, expires_at = excluded.expires_at
     where idempotency_keys.expires_at <= excluded.created_at`,
            params: [JSON.stringify(keys)],
          },
        ];
  // The rows, their rollups and keys ride in the money's statement: one round trip for all.
  return writeMoneyChanges(
    em,
    creations.map((c) => c.money),
    [
      {
        sql: `insert into generations (${GENERATION_COLUMNS}) select ${GENERATION_COLUMNS} from jsonb_populate_recordset(null::generations, ?::jsonb)`,
        params: [JSON.stringify(creations.map((c) => generationColumns(c.generation, c.traceContext)))],
      },
      ...(usage ? [usage] : []),
      ...(series ? [series] : []),
      ...(keySpend ? [keySpend] : []),
      ...idempotency,
    ],
  );
}

/**
 * Whether a generation's row is written: for creations whose transaction lost its connection, whose rows are
 * written together or not at all, the first one's row tells whether they committed.
 */
export async function generationWritten(em: Transaction, generationId: string): Promise<boolean> {
  return (await boundQuery(em, 'select 1 from generations where id = ?', [generationId])).length > 0;
}
