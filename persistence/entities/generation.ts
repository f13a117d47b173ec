import { EntitySchema } from '@mikro-orm/core';
import type { GenerationStatus, TimelineEntry } from '../../domain/generation-status.ts';

export interface GenerationRow {
  id: string;
  workspaceId: string;
  apiKeyId: string | null;
  userId: string | null;
  mode: string;
  modelId: string;
  status: GenerationStatus;
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
  timeline: TimelineEntry[];
  queueDeadline: Date;
  createdAt: Date;
  updatedAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
}

/** How a property is stored: its column's type, and its column's name where it is not the property's. */
interface Column {
  type: 'string' | 'text' | 'integer' | 'json' | 'Date';
  fieldName?: string;
  nullable?: true;
  primary?: true;
  default?: number;
}

/** Each property of a generation and its column: the one declaration that the ORM and generationRowOf both read. */
const COLUMNS = {
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
} satisfies Record<keyof GenerationRow, Column>;

// Copied before the ORM sees COLUMNS (its discovery fills in those objects).
const READS = Object.entries(COLUMNS).map(([property, column]: [string, Column]) => ({
  property,
  name: column.fieldName ?? property,
  type: column.type,
  nullable: column.nullable === true,
}));

export const GenerationEntity = new EntitySchema<GenerationRow>({ name: 'Generation', tableName: 'generations', properties: COLUMNS });

const json = (value: unknown): unknown => (typeof value === 'string' ? JSON.parse(value) : value);
const date = (value: unknown): Date => (value instanceof Date ? value : new Date(value as string));

/** A column's value as its property holds it: JSON parsed when it comes as text, timestamps as Dates, integers as numbers. */
function propertyValue(type: Column['type'], nullable: boolean, value: unknown): unknown {
  if (nullable && value == null) return null;
  switch (type) {
    case 'string':
    case 'text':
      return value;
    case 'integer':
      return Number(value);
    case 'json':
      return json(value);
    case 'Date':
      return date(value);
  }
}

/**
 * A generation as its actor holds it, from a row of `select * from generations`: a plain object, without
 * the ORM's entity mapping (most of the CPU of reading one row back), by the columns declared above.
 */
export function generationRowOf(raw: Record<string, unknown>): GenerationRow {
  const row: Record<string, unknown> = {};
  for (const { property, name, type, nullable } of READS) row[property] = propertyValue(type, nullable, raw[name]);
  return row as unknown as GenerationRow;
}
