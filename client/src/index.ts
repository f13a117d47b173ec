/**
 * The typed client of the Generation Service: openapi-fetch over the types generated from the service's
 * OpenAPI document, plus the habits every caller needs (workspaceId filled in, Idempotency-Key on
 * creates, retries of 429 and 503, ApiError, cursor pages, waiting for a generation).
 */
import createFetchClient, { type Client, type Middleware } from 'openapi-fetch';
import type { components, operations, paths } from './generated/openapi.ts';
import { workspaceIdIn } from './generated/workspace.ts';

export type { components, operations, paths };

// ---- Types of the main resources, named after the document's operations --------------------------------

type JsonOf<Op extends keyof operations, Status extends number> =
  operations[Op]['responses'] extends Record<Status, { content: { 'application/json': infer Body } }> ? Body : never;
type BodyOf<Op extends keyof operations> = operations[Op] extends { requestBody: { content: { 'application/json': infer Body } } } ? Body : never;
type QueryOf<Op extends keyof operations> = NonNullable<operations[Op]['parameters']['query']>;
/** A body or a query without workspaceId: the client fills in its own. */
type Scoped<T> = Omit<T, 'workspaceId'> & { workspaceId?: string };

export type ErrorCode = components['schemas']['ErrorEnvelope']['error']['code'];
export type Generation = JsonOf<'getGeneration', 200>;
export type GenerationStatus = Generation['status'];
export type GenerationListItem = JsonOf<'listGenerations', 200>['data'][number];
export type CreateGenerationBody = Scoped<BodyOf<'createGeneration'>>;
/** An item of POST /v1/generations/batch: a create's body, with its own idempotencyKey. */
export type GenerationBatchItem = Omit<BodyOf<'createGeneration'>, 'workspaceId'> & { idempotencyKey?: string };
export type GenerationBatchResult = JsonOf<'createGenerationBatch', 200>;
export type ListGenerationsQuery = Scoped<QueryOf<'listGenerations'>>;
export type Asset = JsonOf<'getAsset', 200>;
export type AssetListItem = JsonOf<'listAssets', 200>['data'][number];
export type ListAssetsQuery = Scoped<QueryOf<'listAssets'>>;
export type Model = JsonOf<'listModels', 200>['data'][number];
export type Usage = JsonOf<'getUsage', 200>;
export type UsageQuery = Scoped<QueryOf<'getUsage'>>;
export type Credits = JsonOf<'getWorkspaceCredits', 200>;
export type Wallet = JsonOf<'getWallet', 200>;
export type WalletTransaction = JsonOf<'listWalletTransactions', 200>['data'][number];
export type Webhook = JsonOf<'listWebhooks', 200>['data'][number];
export type CreatedWebhook = JsonOf<'createWebhook', 201>;
export type CreateWebhookBody = Scoped<BodyOf<'createWebhook'>>;

/** The document's paths with workspaceId optional in every query and JSON body: the client fills it in. */
export type ClientPaths = {
  [P in keyof paths]: { [M in keyof paths[P]]: M extends 'parameters' ? paths[P][M] : WithOptionalWorkspace<paths[P][M]> };
};
// biome-ignore lint/complexity/noBannedTypes: `{}` is the point here: a key is required when the empty object is not assignable to it.
type RequiredKeys<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? never : K }[keyof T];
type WithOptionalWorkspace<Op> = Op extends { parameters: infer Params }
  ? Omit<Op, 'parameters' | 'requestBody'> & { parameters: OptionalQueryWorkspace<Params> } & OptionalBodyWorkspace<Op>
  : Op;
type OptionalQueryWorkspace<Params> = Params extends { query: infer Query }
  ? Query extends { workspaceId: string }
    ? Omit<Params, 'query'> & (RequiredKeys<Scoped<Query>> extends never ? { query?: Scoped<Query> } : { query: Scoped<Query> })
    : Params
  : Params;
type OptionalBodyWorkspace<Op> = Op extends { requestBody: { content: { 'application/json': infer Body } } }
  ? Body extends { workspaceId: string }
    ? RequiredKeys<Scoped<Body>> extends never
      ? { requestBody?: { content: { 'application/json': Scoped<Body> } } }
      : { requestBody: { content: { 'application/json': Scoped<Body> } } }
    : Pick<Op, 'requestBody'>
  : Pick<Op, 'requestBody' & keyof Op>;

/** The generation states after which nothing changes. */
export const TERMINAL_STATUSES: readonly GenerationStatus[] = ['succeeded', 'failed', 'cancelled', 'expired'];

// ---- Errors ------------------------------------------------------------------------------------------

/** An answer other than 2xx: the service's envelope {error:{code,message,requestId}} with the HTTP status. */
export class ApiError extends Error {
  /** The envelope's code (ErrorCode), or `unexpected_response` for an answer without one. */
  readonly code: ErrorCode | 'unexpected_response';
  readonly status: number;
  /** The request id (body or X-Request-Id), to quote when asking about a request. */
  readonly requestId: string | undefined;
  /** Retry-After of the answer, in milliseconds, when it had one. */
  readonly retryAfterMs: number | undefined;

  constructor(init: {
    code: ErrorCode | 'unexpected_response';
    message: string;
    status: number;
    requestId?: string | undefined;
    retryAfterMs?: number | undefined;
  }) {
    super(init.message);
    this.name = 'ApiError';
    this.code = init.code;
    this.status = init.status;
    this.requestId = init.requestId;
    this.retryAfterMs = init.retryAfterMs;
  }

  /** Builds the error of a response whose body has been parsed (or not: `body` undefined). */
  static from(response: Response, body: unknown): ApiError {
    const envelope = (body as { error?: { code?: unknown; message?: unknown; requestId?: unknown } } | undefined)?.error;
    const requestId = typeof envelope?.requestId === 'string' ? envelope.requestId : (response.headers.get('x-request-id') ?? undefined);
    const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
    if (envelope && typeof envelope.code === 'string' && typeof envelope.message === 'string') {
      return new ApiError({ code: envelope.code as ErrorCode, message: envelope.message, status: response.status, requestId, retryAfterMs });
    }
    return new ApiError({
      code: 'unexpected_response',
      message: `HTTP ${response.status} ${response.statusText}`.trim(),
      status: response.status,
      requestId,
      retryAfterMs,
    });
  }
}

/** waitFor's time ran out before the generation reached a terminal status; `generation` is its last state. */
export class WaitTimeoutError extends Error {
  readonly generation: Generation;
  constructor(generation: Generation, timeoutMs: number) {
    super(`generation ${generation.id} is still ${generation.status} after ${timeoutMs} ms`);
    this.name = 'WaitTimeoutError';
    this.generation = generation;
  }
}

/** The data of an openapi-fetch result, or its ApiError thrown. */
export function unwrap<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.response.ok) return result.data as T;
  throw ApiError.from(result.response, result.error);
}

// ---- Options -----------------------------------------------------------------------------------------

export interface ClientOptions {
  /** The service's address, e.g. https://api.example.com (no /v1). */
  baseUrl: string;
  /** An API key (gs_live_…), sent as Authorization: Bearer. */
  apiKey?: string;
  /** The workspace filled into requests that take a workspaceId and were not given one. */
  workspaceId: string;
  /** Retries of a 429 or 503 answer (default 3); 0 turns retries off. */
  maxRetries?: number;
  /** The longest wait before a retry, whatever Retry-After says (default 30 s). */
  maxRetryDelayMs?: number;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
  /** The fetch to use (default globalThis.fetch). */
  fetch?: (request: Request) => Promise<Response>;
  /** How to wait (default setTimeout); tests and schedulers can replace it. */
  sleep?: (ms: number) => Promise<void>;
  /** Makes an Idempotency-Key for a create that was not given one (default crypto.randomUUID). */
  idempotencyKey?: () => string;
}

export interface CreateOptions {
  /** The create's Idempotency-Key (default: a new random one; retries of this call reuse it). */
  idempotencyKey?: string;
}

export interface WaitOptions {
  /** Give up after this long with WaitTimeoutError (default 10 minutes). */
  timeoutMs?: number;
  /** The first wait between polls (default 250 ms); each next one is 1.5 times longer, up to maxIntervalMs. */
  intervalMs?: number;
  /** The longest wait between polls (default 5 s). */
  maxIntervalMs?: number;
}

/** Operations that accept an Idempotency-Key header, keyed `METHOD /path` as in the document. */
const IDEMPOTENT_CREATES = new Set(['POST /v1/generations']);
const RETRIED_STATUSES = new Set([429, 503]);
const BACKOFF_BASE_MS = 500;

// ---- The client --------------------------------------------------------------------------------------

export function createClient(options: ClientOptions) {
  const maxRetries = Math.max(0, Math.floor(options.maxRetries ?? 3));
  const maxRetryDelayMs = Math.max(0, options.maxRetryDelayMs ?? 30_000);
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const newKey = options.idempotencyKey ?? (() => globalThis.crypto.randomUUID());
  const baseFetch = options.fetch ?? ((request: Request) => globalThis.fetch(request));

  /** fetch with retries: a 429 or 503 is sent again (the same request, Idempotency-Key included) after Retry-After. */
  async function fetchWithRetries(request: Request): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      const response = await baseFetch(request.clone());
      if (!RETRIED_STATUSES.has(response.status) || attempt >= maxRetries) return response;
      await response.body?.cancel();
      await sleep(retryDelayMs(response.headers.get('retry-after'), attempt, maxRetryDelayMs));
    }
  }

  /** Adds the client's workspaceId where the operation takes one and the call gave none, and an Idempotency-Key to creates. */
  const fill: Middleware = {
    async onRequest({ request, schemaPath }) {
      const operation = `${request.method} ${schemaPath}`;
      const where = workspaceIdIn[operation];
      const addKey = IDEMPOTENT_CREATES.has(operation) && !request.headers.has('idempotency-key');
      let url = request.url;
      let body: string | undefined;
      if (where === 'query') {
        const parsed = new URL(request.url);
        if (!parsed.searchParams.has('workspaceId')) {
          parsed.searchParams.set('workspaceId', options.workspaceId);
          url = parsed.toString();
        }
      } else if (where === 'body') {
        const value = parseJson(await request.clone().text());
        if (isRecord(value) && value.workspaceId === undefined) body = JSON.stringify({ ...value, workspaceId: options.workspaceId });
      }
      if (url === request.url && body === undefined && !addKey) return undefined;
      const headers = new Headers(request.headers);
      if (addKey) headers.set('idempotency-key', newKey());
      if (body !== undefined) headers.set('content-type', 'application/json');
      const sameBody = request.body ? await request.clone().arrayBuffer() : null;
      return new Request(url, { method: request.method, headers, body: body ?? sameBody, signal: request.signal });
    },
  };

  const raw: Client<ClientPaths> = createFetchClient<ClientPaths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    fetch: fetchWithRetries,
    headers: { ...options.headers, ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}) },
  });
  raw.use(fill);

  const workspaceId = options.workspaceId;
  const idempotency = (create?: CreateOptions) => (create?.idempotencyKey ? { 'idempotency-key': create.idempotencyKey } : {});

  const generations = {
    /** POST /v1/generations, with an Idempotency-Key (given, or a new one). */
    create: async (body: CreateGenerationBody, create?: CreateOptions): Promise<Generation> =>
      unwrap(await raw.POST('/v1/generations', { body, headers: idempotency(create) })),
    /** POST /v1/generations/batch; each item without an idempotencyKey gets a new one. */
    createBatch: async (items: GenerationBatchItem[]): Promise<GenerationBatchResult> =>
      unwrap(await raw.POST('/v1/generations/batch', { body: { items: items.map((item) => ({ idempotencyKey: newKey(), ...item })) } })),
    get: async (id: string): Promise<Generation> => unwrap(await raw.GET('/v1/generations/{id}', { params: { path: { id } } })),
    /** Every generation matching the query, newest first, fetched page by page (`limit` per page). */
    list: (query: ListGenerationsQuery = {}): Pages<GenerationListItem> =>
      pages((cursor) => raw.GET('/v1/generations', { params: { query: { ...query, ...(cursor ? { cursor } : {}) } } })),
    cancel: async (id: string): Promise<Generation> => unwrap(await raw.POST('/v1/generations/{id}/cancel', { params: { path: { id } } })) as Generation,
    /** Polls GET /v1/generations/:id until the generation is succeeded, failed, cancelled or expired. */
    waitFor: async (id: string, wait: WaitOptions = {}): Promise<Generation> => {
      const timeoutMs = wait.timeoutMs ?? 600_000;
      const maxIntervalMs = wait.maxIntervalMs ?? 5_000;
      const deadline = Date.now() + timeoutMs;
      let interval = wait.intervalMs ?? 250;
      for (;;) {
        const generation = await generations.get(id);
        if (TERMINAL_STATUSES.includes(generation.status)) return generation;
        const left = deadline - Date.now();
        if (left <= 0) throw new WaitTimeoutError(generation, timeoutMs);
        await sleep(Math.min(interval, left));
        interval = Math.min(maxIntervalMs, interval * 1.5);
      }
    },
  };

  return {
    /** The typed openapi-fetch client (workspaceId, Idempotency-Key and retries included): every endpoint of the document. */
    raw,
    workspaceId,
    generations,
    waitFor: generations.waitFor,
    assets: {
      list: (query: ListAssetsQuery = {}): Pages<AssetListItem> =>
        pages((cursor) => raw.GET('/v1/assets', { params: { query: { ...query, ...(cursor ? { cursor } : {}) } } })),
      get: async (id: string): Promise<Asset> => unwrap(await raw.GET('/v1/assets/{id}', { params: { path: { id } } })),
    },
    models: {
      list: async (): Promise<Model[]> => unwrap(await raw.GET('/v1/models', {})).data,
    },
    usage: {
      /** GET /v1/usage: credits, jobs and requests of the workspace (per key with apiKeyId). */
      get: async (query: UsageQuery = {}): Promise<Usage> => unwrap(await raw.GET('/v1/usage', { params: { query } })),
    },
    credits: {
      get: async (): Promise<Credits> => unwrap(await raw.GET('/v1/workspaces/{workspaceId}/credits', { params: { path: { workspaceId } } })),
    },
    wallet: {
      get: async (): Promise<Wallet> => unwrap(await raw.GET('/v1/wallet', {})),
      transactions: (query: { limit?: number } = {}): Pages<WalletTransaction> =>
        pages((cursor) => raw.GET('/v1/wallet/transactions', { params: { query: { ...query, ...(cursor ? { cursor } : {}) } } })),
    },
    webhooks: {
      /** POST /v1/webhooks; the answer holds the signing secret, once. */
      create: async (body: CreateWebhookBody): Promise<CreatedWebhook> => unwrap(await raw.POST('/v1/webhooks', { body })),
      list: (query: { limit?: number } = {}): Pages<Webhook> =>
        pages((cursor) => raw.GET('/v1/webhooks', { params: { query: { ...query, ...(cursor ? { cursor } : {}) } } })),
    },
  };
}

export type GenerationServiceClient = ReturnType<typeof createClient>;

// ---- Pages -------------------------------------------------------------------------------------------

/** The items of a cursor-paged list, for `for await`; `pages()` walks it a page at a time. */
export interface Pages<T> extends AsyncIterable<T> {
  pages(): AsyncIterable<{ data: T[]; nextCursor: string | null }>;
}

type PageResult<T> = { data?: { data: T[]; nextCursor: string | null }; error?: unknown; response: Response };

/** Walks a list answering `{ data, nextCursor }`: `fetchPage(cursor)` fetches one page (no cursor: the first). */
export function pages<T>(fetchPage: (cursor: string | undefined) => Promise<PageResult<T>>): Pages<T> {
  async function* walkPages() {
    let cursor: string | undefined;
    do {
      const page = unwrap(await fetchPage(cursor));
      yield page;
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }
  return {
    pages: walkPages,
    async *[Symbol.asyncIterator]() {
      for await (const page of walkPages()) yield* page.data;
    },
  };
}

// ---- Helpers -----------------------------------------------------------------------------------------

/** Retry-After (seconds or an HTTP date) in milliseconds; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Retry-After when the answer has one, else exponential backoff with a little jitter; never past the cap. */
export function retryDelayMs(retryAfter: string | null, attempt: number, capMs: number): number {
  const told = parseRetryAfter(retryAfter);
  const backoff = BACKOFF_BASE_MS * 2 ** attempt * (1 + Math.random() * 0.1);
  return Math.min(capMs, told ?? backoff);
}

/** A JSON body's value; an empty body is an empty object, one that is not JSON is left alone (undefined). */
function parseJson(text: string): unknown {
  if (text === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
