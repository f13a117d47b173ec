import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp, uniqueEmail, withCookie, withKey } from '../helpers/identity.ts';

// Every string field of every operation of the OpenAPI document, so a new route or field is covered by being
// declared: U+0000 or an unpaired surrogate is a 400 validation_error naming the field, and free text full of
// `;`, quotes, backslashes, `$1`, `--` and non-ASCII characters never makes a 5xx.

type Schema = {
  type?: string | string[];
  format?: string;
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
  items?: Schema;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  minimum?: number;
  minItems?: number;
  minLength?: number;
  pattern?: string;
};
type Parameter = { name: string; in: 'path' | 'query'; required?: boolean; schema: Schema };
interface Operation {
  method: string;
  path: string;
  parameters: Parameter[];
  body: Schema | undefined;
  stream: boolean;
  public: boolean;
  /** Whether an API key may call it (else the session cookie is used). */
  keys: boolean;
}

/** Where a hostile value goes: a path or query parameter, or a place in the JSON body. */
type Target = { in: 'path' | 'query'; name: string; free: boolean } | { in: 'body'; at: Array<string | number>; key?: true; free: boolean };

const NUL = 'a\u0000b';
const SURROGATE = 'a\ud800b';
const HOSTILE = `x'; drop table users; --"\\ $1 ?? \\? %s é 漢字 😀`;

function variants(schema: Schema): Schema[] {
  return [...(schema.anyOf ?? []), ...(schema.oneOf ?? [])];
}

function isString(schema: Schema): boolean {
  if (schema.type === 'string' || (Array.isArray(schema.type) && schema.type.includes('string'))) return true;
  if (typeof schema.const === 'string' || schema.enum?.some((v) => typeof v === 'string')) return true;
  return variants(schema).some(isString);
}

/** Text a user writes freely (no enum, format or id-like shape): where `;` and quotes must be stored as sent. */
function isFreeText(schema: Schema): boolean {
  const string = [schema, ...variants(schema)].find((s) => s.type === 'string' && !s.enum && s.const === undefined);
  return string !== undefined && !string.format && (!string.pattern || string.pattern === '\\S');
}

/** A value the schema accepts, as plain as can be: the baseline every hostile request starts from. */
function sample(schema: Schema, name: string, ctx: Samples): unknown {
  if (name === 'workspaceId') return ctx.workspaceId;
  if (name === 'model') return 'local/text-mini';
  if (name === 'mode') return 'text_to_text';
  const variant = variants(schema).find((v) => v.type !== 'null');
  if (variant) return sample(variant, name, ctx);
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return schema.enum[0];
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'integer':
    case 'number':
      return Math.max(schema.minimum ?? 1, 1);
    case 'boolean':
      return true;
    case 'array':
      return Array.from({ length: Math.max(schema.minItems ?? 1, 1) }, () => sample(schema.items ?? {}, name, ctx));
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const key of schema.required ?? []) out[key] = sample(schema.properties?.[key] ?? {}, key, ctx);
      return out;
    }
    default:
      if (schema.format === 'email') return uniqueEmail('walk');
      if (schema.format === 'date') return '2026-01-01';
      if (schema.format === 'date-time') return '2026-01-01T00:00:00.000Z';
      if (schema.format === 'uri') return 'https://example.com/x';
      if (schema.pattern === '^[0-9]{1,16}$') return '1';
      return 'sample-value'.padEnd(schema.minLength ?? 0, 'x');
  }
}

interface Samples {
  workspaceId: string;
}

/** Every string place of a body schema, nested objects and arrays included; free-form objects get a made-up property and a hostile property name. */
function bodyTargets(schema: Schema, at: Array<string | number> = []): Target[] {
  const targets: Target[] = [];
  const object = [schema, ...variants(schema)].find((s) => s.type === 'object');
  if (object) {
    for (const [key, property] of Object.entries(object.properties ?? {})) targets.push(...bodyTargets(property, [...at, key]));
    if (object.additionalProperties !== false && Object.keys(object.properties ?? {}).length === 0) {
      targets.push({ in: 'body', at: [...at, 'prompt'], free: true });
      targets.push({ in: 'body', at: [...at, 'prompt'], key: true, free: true });
    }
    return targets;
  }
  const array = [schema, ...variants(schema)].find((s) => s.type === 'array');
  if (array?.items) return bodyTargets(array.items, [...at, 0]);
  if (at.length > 0 && isString(schema)) targets.push({ in: 'body', at, free: isFreeText(schema) });
  return targets;
}

function operations(doc: { paths: Record<string, Record<string, any>> }): Operation[] {
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const content = op.requestBody?.content ?? {};
      ops.push({
        method: method.toUpperCase(),
        path,
        parameters: op.parameters ?? [],
        body: content['application/json']?.schema,
        stream: 'application/octet-stream' in content,
        public: (op.security ?? []).length === 0,
        keys: (op.security ?? []).some((s: Record<string, unknown>) => 'apiKey' in s),
      });
    }
  }
  return ops;
}

function targetsOf(op: Operation): Target[] {
  return [...op.parameters.map((p): Target => ({ in: p.in, name: p.name, free: isFreeText(p.schema) })), ...(op.body ? bodyTargets(op.body) : [])];
}

function describe(target: Target): string {
  if (target.in !== 'body') return `${target.in}.${target.name}`;
  return `body.${target.at.join('.')}${target.key ? ' (a property name)' : ''}`;
}

/** The field a validation_error names for the target: the value's own path, or the object holding a bad property name. */
function fieldOf(target: Target): string {
  if (target.in !== 'body') return `${target.in}.${target.name}`;
  if (target.key)
    return `body${target.at
      .slice(0, -1)
      .map((p) => `.${p}`)
      .join('')} (a property name)`;
  return `body.${target.at.join('.')}`;
}

function setAt(root: Record<string, unknown>, at: Array<string | number>, value: unknown, asKey: boolean): void {
  let node: any = root;
  for (let i = 0; i < at.length - 1; i++) {
    const step = at[i]!;
    const next = at[i + 1]!;
    if (node[step] === undefined || node[step] === null || typeof node[step] !== 'object') node[step] = typeof next === 'number' ? [] : {};
    node = node[step];
  }
  const last = at[at.length - 1]!;
  if (asKey) node[value as string] = 'x';
  else node[last] = value;
}

/**
 * One request of the walk: baseline values everywhere, the hostile value at the target. `encoded` is how the
 * value goes into a URL (an unpaired surrogate has no UTF-8 form: its would-be bytes are sent instead).
 */
function build(op: Operation, target: Target, value: string, encoded: string, ctx: Samples): { url: string; body: string | undefined } {
  const path = op.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    if (target.in === 'path' && target.name === name) return encoded;
    return name === 'workspaceId' ? ctx.workspaceId : `${name}_0000000000000000000000000`;
  });
  const query = new URLSearchParams();
  for (const p of op.parameters) {
    if (p.in !== 'query' || (target.in === 'query' && target.name === p.name)) continue;
    if (p.required || p.name === 'workspaceId') query.set(p.name, String(sample(p.schema, p.name, ctx)));
  }
  let search = query.toString();
  if (target.in === 'query') search += `${search ? '&' : ''}${target.name}=${encoded}`;
  let body: string | undefined;
  if (op.body) {
    const payload = sample(op.body, '', ctx) as Record<string, unknown>;
    if (target.in === 'body') setAt(payload, target.at, value, target.key === true);
    body = JSON.stringify(payload);
  }
  return { url: `${path}${search ? `?${search}` : ''}`, body };
}

/** Keys where a route takes them (found in the key cache, they cost no database read), else the session. */
async function send(server: TestServer, op: Operation, caller: { cookie: string; key: string }, request: { url: string; body: string | undefined }) {
  const headers = op.public ? { 'content-type': 'application/json' } : op.keys ? withKey(caller.key) : withCookie(caller.cookie);
  const response = await server.fetch(request.url, {
    method: op.method,
    headers: op.stream ? { ...headers, 'content-type': 'application/octet-stream' } : headers,
    ...(request.body !== undefined && !op.stream ? { body: request.body } : {}),
    signal: AbortSignal.timeout(15_000),
  });
  // A live stream that took the value (an SSE route answering 200) does not end: its head is the answer.
  if (response.headers.get('content-type')?.startsWith('text/event-stream')) {
    await response.body?.cancel();
    return { status: response.status, body: '' };
  }
  const text = await response.text();
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: response.status, body };
}

t.test('every string field of every operation refuses U+0000 and unpaired surrogates, and takes hostile text without a 5xx', async (t) => {
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '0', RATE_LIMIT_FREE: '100000' } });
  const user = await signUp(server);
  const caller = { cookie: user.cookie, key: (await createKey(server, user.cookie, user.workspaceId, ['all'])).key };
  const ctx: Samples = { workspaceId: user.workspaceId };
  const doc = (await server.json('/v1/openapi.json')).body;
  const ops = operations(doc);
  let walked = 0;
  let free = 0;
  const failures: string[] = [];

  for (const op of ops) {
    for (const target of targetsOf(op)) {
      walked++;
      const label = `${op.method} ${op.path} ${describe(target)}`;
      const nul = await send(server, op, caller, build(op, target, NUL, encodeURIComponent(NUL), ctx));
      if (nul.status !== 400 || nul.body?.error?.code !== 'validation_error' || !String(nul.body.error.message).startsWith(fieldOf(target))) {
        failures.push(`${label} with U+0000: ${nul.status} ${JSON.stringify(nul.body)}`);
      }
      // `%ED%A0%80` is how UTF-8 would spell U+D800: in a path it is invalid percent-encoding, in a query it reads as U+FFFD.
      const lone = await send(server, op, caller, build(op, target, SURROGATE, 'a%ED%A0%80b', ctx));
      const loneOk =
        target.in === 'query'
          ? lone.status < 500
          : lone.status === 400 &&
            lone.body?.error?.code === 'validation_error' &&
            (target.in === 'path' || String(lone.body.error.message).startsWith(fieldOf(target)));
      if (!loneOk) failures.push(`${label} with an unpaired surrogate: ${lone.status} ${JSON.stringify(lone.body)}`);
      if (target.free && !(target.in === 'body' && target.key)) {
        free++;
        const hostile = await send(server, op, caller, build(op, target, HOSTILE, encodeURIComponent(HOSTILE), ctx));
        if (hostile.status >= 500) failures.push(`${label} with hostile text: ${hostile.status} ${JSON.stringify(hostile.body)}`);
      }
    }
  }
  t.same(failures, [], 'no field let a bad string through or answered 5xx');
  t.ok(ops.length >= 60, `${ops.length} operations`);
  t.ok(walked >= 150, `${walked} string fields walked`);
  t.ok(free >= 20, `${free} free-text fields given hostile text`);
  t.equal((await server.json('/v1/me', { headers: withCookie(user.cookie) })).status, 200, 'the account still works after the walk');

  // A free-form object nested far deeper than any schema: refused as it is read, not overflowing a copy later.
  const deep = `${'{"k":['.repeat(50_000)}1${']}'.repeat(50_000)}`;
  const nested = await server.json('/v1/generations', {
    method: 'POST',
    headers: withKey(caller.key),
    body: `{"workspaceId":"${user.workspaceId}","mode":"text_to_text","model":"local/text-mini","params":{"prompt":"x","extra":${deep}}}`,
  });
  t.equal(nested.status, 400, 'deep nesting is a 400');
  t.match(nested.body?.error, { code: 'validation_error', message: /^body\.params\.extra(\.(k|0))+: nested more than \d+ levels deep$/ });
});
