/**
 * A Cog prediction's state as its webhooks and its 202 answers carry it (crates/coglet/src/prediction.rs,
 * build_state_snapshot): `{ id, status, logs, output?, error?, metrics }`, the status one of five.
 */
export type CogStatus = 'starting' | 'processing' | 'succeeded' | 'failed' | 'canceled';

export interface CogPrediction {
  id?: string;
  status: CogStatus;
  output?: unknown;
  error?: string;
  logs?: string;
}

const STATUSES: readonly string[] = ['starting', 'processing', 'succeeded', 'failed', 'canceled'];

/** The prediction in a parsed body; undefined when the body is not one (no known status). */
export function readPrediction(body: unknown): CogPrediction | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const raw = body as Record<string, unknown>;
  if (typeof raw.status !== 'string' || !STATUSES.includes(raw.status)) return undefined;
  const prediction: CogPrediction = { status: raw.status as CogStatus };
  if (typeof raw.id === 'string') prediction.id = raw.id;
  if ('output' in raw && raw.output !== null) prediction.output = raw.output;
  if (typeof raw.error === 'string') prediction.error = raw.error;
  if (typeof raw.logs === 'string') prediction.logs = raw.logs;
  return prediction;
}

export function isTerminal(status: CogStatus): boolean {
  return status === 'succeeded' || status === 'failed' || status === 'canceled';
}

/**
 * What the API said in an error body: coglet's `{"error": "..."}`, the validation `{"detail": [{loc, msg}]}`
 * of both servers, or the earlier Python server's `{"detail": "..."}`; else the raw text.
 */
export function cogErrorText(json: unknown, text: string): string {
  if (typeof json === 'object' && json !== null) {
    const body = json as { error?: unknown; detail?: unknown };
    if (typeof body.error === 'string' && body.error) return body.error;
    if (typeof body.detail === 'string' && body.detail) return body.detail;
    if (Array.isArray(body.detail)) {
      return body.detail
        .map((entry) => {
          const { loc, msg } = (entry ?? {}) as { loc?: unknown; msg?: unknown };
          const where = Array.isArray(loc) ? loc.join('.') : '';
          return `${where}${where ? ': ' : ''}${typeof msg === 'string' ? msg : JSON.stringify(entry)}`;
        })
        .join('; ');
    }
  }
  return text;
}
