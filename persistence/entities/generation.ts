import { EntitySchema } from '@mikro-orm/core';

export interface GenerationRow {
  id: string;
  workspaceId: string;
  apiKeyId: string | null;
  userId: string | null;
  mode: string;
  modelId: string;
  status: string;
  params: Record<string, unknown>;
  inputs: Record<string, unknown>;
  paymentMode: string;
  credits: number;
  project: string | null;
  idempotencyKey: string | null;
  provider: string;
  /** The catalog deployment it was created for; null for jobs created before deployments were data. */
  deploymentId: string | null;
  /** A token-priced job's price as it was at its creation (millionths of a credit per 1,000 tokens); null otherwise. */
  tokenTerms: { inputMicroPer1k: number; outputMicroPer1k: number } | null;
  /** The tokens its provider reported using (text), once it ended. */
  usage: { inputTokens: number; outputTokens: number } | null;
  providerJobId: string | null;
  /** Times the job was handed to its provider, counted before each hand-over (a restart hands it over again). */
  attempts: number;
  textOutput: string | null;
  outputAssetIds: string[];
  errorCode: string | null;
  errorMessage: string | null;
  timeline: Array<{ status: string; at: string; detail?: string }>;
  queueDeadline: Date;
  createdAt: Date;
  updatedAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
}

export const GenerationEntity = new EntitySchema<GenerationRow>({
  name: 'Generation',
  tableName: 'generations',
  properties: {
    id: { type: 'string', primary: true },
    workspaceId: { type: 'string', fieldName: 'workspace_id' },
    apiKeyId: { type: 'string', fieldName: 'api_key_id', nullable: true },
    userId: { type: 'string', fieldName: 'user_id', nullable: true },
    mode: { type: 'string' },
    modelId: { type: 'string', fieldName: 'model_id' },
    status: { type: 'string' },
    params: { type: 'json' },
    inputs: { type: 'json' },
    paymentMode: { type: 'string', fieldName: 'payment_mode' },
    credits: { type: 'integer' },
    project: { type: 'string', nullable: true },
    idempotencyKey: { type: 'string', fieldName: 'idempotency_key', nullable: true },
    provider: { type: 'string' },
    deploymentId: { type: 'string', fieldName: 'deployment_id', nullable: true },
    tokenTerms: { type: 'json', fieldName: 'token_terms', nullable: true },
    usage: { type: 'json', nullable: true },
    providerJobId: { type: 'string', fieldName: 'provider_job_id', nullable: true },
    attempts: { type: 'integer', default: 0 },
    textOutput: { type: 'text', fieldName: 'text_output', nullable: true },
    outputAssetIds: { type: 'json', fieldName: 'output_asset_ids' },
    errorCode: { type: 'string', fieldName: 'error_code', nullable: true },
    errorMessage: { type: 'string', fieldName: 'error_message', nullable: true },
    timeline: { type: 'json' },
    queueDeadline: { type: 'Date', fieldName: 'queue_deadline' },
    createdAt: { type: 'Date', fieldName: 'created_at' },
    updatedAt: { type: 'Date', fieldName: 'updated_at' },
    startedAt: { type: 'Date', fieldName: 'started_at', nullable: true },
    completedAt: { type: 'Date', fieldName: 'completed_at', nullable: true },
  },
});

const json = <T>(value: unknown): T => (typeof value === 'string' ? JSON.parse(value) : value) as T;
const date = (value: unknown): Date => (value instanceof Date ? value : new Date(value as string));
const dateOrNull = (value: unknown): Date | null => (value === null || value === undefined ? null : date(value));

/**
 * A generation as its actor holds it, from a row of `select * from generations`: a plain object, without
 * the ORM's entity mapping (most of the CPU of reading one row back).
 */
export function generationRowOf(raw: Record<string, unknown>): GenerationRow {
  return {
    id: raw.id as string,
    workspaceId: raw.workspace_id as string,
    apiKeyId: (raw.api_key_id ?? null) as string | null,
    userId: (raw.user_id ?? null) as string | null,
    mode: raw.mode as string,
    modelId: raw.model_id as string,
    status: raw.status as string,
    params: json(raw.params),
    inputs: json(raw.inputs),
    paymentMode: raw.payment_mode as string,
    credits: Number(raw.credits),
    project: (raw.project ?? null) as string | null,
    idempotencyKey: (raw.idempotency_key ?? null) as string | null,
    provider: raw.provider as string,
    deploymentId: (raw.deployment_id ?? null) as string | null,
    tokenTerms: raw.token_terms == null ? null : json(raw.token_terms),
    usage: raw.usage == null ? null : json(raw.usage),
    providerJobId: (raw.provider_job_id ?? null) as string | null,
    attempts: Number(raw.attempts),
    textOutput: (raw.text_output ?? null) as string | null,
    outputAssetIds: json(raw.output_asset_ids),
    errorCode: (raw.error_code ?? null) as string | null,
    errorMessage: (raw.error_message ?? null) as string | null,
    timeline: json(raw.timeline),
    queueDeadline: date(raw.queue_deadline),
    createdAt: date(raw.created_at),
    updatedAt: date(raw.updated_at),
    startedAt: dateOrNull(raw.started_at),
    completedAt: dateOrNull(raw.completed_at),
  };
}
