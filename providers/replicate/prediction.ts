import { PROVIDER_ERROR_CODES, upstreamMessage, type ProviderErrorCode } from '../adapter.ts';

/**
 * The prediction object (GET /v1/predictions/{id}, the create answer and every webhook's body), read
 * defensively, and what each of its states means for our job, as pure functions.
 */
export const PREDICTION_STATUSES = ['starting', 'processing', 'succeeded', 'failed', 'canceled', 'aborted'] as const;
export type PredictionStatus = (typeof PREDICTION_STATUSES)[number];

export interface Prediction {
  id: string;
  status: PredictionStatus;
  output: unknown;
  error: string | undefined;
  logs: string;
  metrics: Record<string, unknown>;
  /** `urls.stream`: the server-sent events of a model that streams its output (language models). */
  streamUrl?: string;
}

/** The prediction in a JSON answer, or undefined when it lacks an id or a known status. */
export function readPrediction(json: unknown): Prediction | undefined {
  if (typeof json !== 'object' || json === null) return undefined;
  const p = json as Record<string, unknown>;
  if (typeof p.id !== 'string' || p.id === '' || !PREDICTION_STATUSES.includes(p.status as PredictionStatus)) return undefined;
  return {
    id: p.id,
    status: p.status as PredictionStatus,
    output: p.output ?? null,
    error: typeof p.error === 'string' ? p.error : p.error == null ? undefined : JSON.stringify(p.error),
    logs: typeof p.logs === 'string' ? p.logs : '',
    metrics: typeof p.metrics === 'object' && p.metrics !== null ? (p.metrics as Record<string, unknown>) : {},
    ...streamUrlOf(p.urls),
  };
}

function streamUrlOf(urls: unknown): { streamUrl?: string } {
  if (typeof urls !== 'object' || urls === null) return {};
  const stream = (urls as { stream?: unknown }).stream;
  return typeof stream === 'string' && stream !== '' ? { streamUrl: stream } : {};
}

export const isTerminal = (status: PredictionStatus): boolean => status === 'succeeded' || status === 'failed' || status === 'canceled' || status === 'aborted';

// The wordings safety checkers put in a failed prediction's error (the NSFW checker of the Stable
// Diffusion family, the content moderation of hosted video and image models).
const CONTENT_POLICY = /nsfw|content polic|safety (checker|filter|system)|flagged|sensitive content|moderation|not safe for work|inappropriate/i;

/**
 * A prediction that ended without success as our failure. `failed` keeps the model's error; `canceled`
 * and `aborted` are the deadline we sent as Cancel-After when the deadline has passed (aborted: before
 * it started, canceled: while it ran), otherwise someone cancelled it at Replicate.
 */
export function endFailure(prediction: Prediction, pastDeadline: boolean, secrets: readonly string[]): { code: ProviderErrorCode; message: string } {
  if (prediction.status === 'failed') {
    const said = upstreamMessage(prediction.error ?? '', secrets);
    const code = CONTENT_POLICY.test(said) ? PROVIDER_ERROR_CODES.contentPolicy : PROVIDER_ERROR_CODES.error;
    return { code, message: said ? `The prediction failed: ${said}` : 'The prediction failed without an error message.' };
  }
  if (pastDeadline) {
    return {
      code: PROVIDER_ERROR_CODES.timeout,
      message:
        prediction.status === 'aborted'
          ? 'The prediction passed its deadline before it started (aborted).'
          : 'The prediction passed its deadline while running (canceled).',
    };
  }
  return { code: PROVIDER_ERROR_CODES.cancelled, message: `The prediction was ${prediction.status} at Replicate.` };
}

/** The last few non-empty log lines, each trimmed, for the job's timeline; '' when there are none. */
export function logTail(logs: string, secrets: readonly string[], lines = 3): string {
  const tail = logs
    .split(/\r?\n|\r/)
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .slice(-lines);
  return tail.map((line) => upstreamMessage(line, secrets).slice(0, 200)).join('\n');
}

/** Token counts of a language model's prediction, when its metrics hold both. */
export function tokenUsage(metrics: Record<string, unknown>): { inputTokens: number; outputTokens: number } | undefined {
  const input = metrics.input_token_count;
  const output = metrics.output_token_count;
  if (typeof input !== 'number' || typeof output !== 'number' || !Number.isFinite(input) || !Number.isFinite(output)) return undefined;
  return { inputTokens: Math.max(0, Math.round(input)), outputTokens: Math.max(0, Math.round(output)) };
}

/** The message of an error answer: problem JSON's `title` and `detail`, else the text. */
export function problemDetail(json: unknown, text: string): string {
  if (typeof json === 'object' && json !== null) {
    const { title, detail } = json as { title?: unknown; detail?: unknown };
    const parts = [title, detail].filter((part): part is string => typeof part === 'string' && part !== '');
    if (parts.length > 0) return parts.join(': ');
  }
  return text;
}
