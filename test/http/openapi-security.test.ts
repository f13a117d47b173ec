import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp, withCookie, withKey, type SignedUp } from '../helpers/identity.ts';
import { SCOPES, type Scope } from '../../http/route.ts';

type Json = Record<string, any>;

/**
 * A value that passes a JSON schema where a generic one can: required properties (and optional ones up to
 * minProperties) filled, and the caller's own workspace, e-mail address and password where a field asks for
 * them. It lets a request through validation, so the checks handlers make after it are reached.
 */
function sample(schema: Json | undefined, me: SignedUp, name = ''): unknown {
  if (!schema) return undefined;
  if (name === 'workspaceId') return me.workspaceId;
  if (name === 'email') return me.email;
  if (name === 'password' || name === 'currentPassword') return me.password;
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  if (Array.isArray(schema.anyOf)) return sample(schema.anyOf[0], me, name);
  if (schema.default !== undefined) return schema.default;
  switch (schema.type) {
    case 'object': {
      const out: Json = {};
      const properties: Record<string, Json> = schema.properties ?? {};
      for (const key of schema.required ?? []) out[key] = sample(properties[key], me, key);
      // The caller's workspace wherever the request may carry it: an API key must name its own.
      if ('workspaceId' in properties) out.workspaceId = me.workspaceId;
      for (const key of Object.keys(properties)) {
        if (Object.keys(out).length >= (schema.minProperties ?? 0)) break;
        out[key] ??= sample(properties[key], me, key);
      }
      return out;
    }
    case 'array':
      return Array.from({ length: schema.minItems ?? 0 }, () => sample(schema.items, me));
    case 'integer':
    case 'number':
      return schema.minimum ?? 1;
    case 'boolean':
      return false;
    case 'null':
      return null;
    case 'string':
      if (schema.format === 'email') return 'someone-else@example.com';
      if (schema.format === 'uri') return 'https://example.com/probe';
      if (schema.format === 'date-time') return new Date(Date.now() + 86_400_000).toISOString();
      if (schema.format === 'date') return new Date().toISOString().slice(0, 10);
      if (typeof schema.pattern === 'string' && schema.pattern.startsWith('^[0-9]')) return '1'.repeat(Math.max(1, schema.minLength ?? 1));
      return 'x'.repeat(Math.max(1, schema.minLength ?? 1));
    default:
      return undefined;
  }
}

/** Who an operation's `security` admits: anonymous callers, sessions, and API keys holding which scope. */
interface Admits {
  anonymous: boolean;
  session: boolean;
  keys: 'any' | Set<Scope>;
}

function declared(security: Array<Record<string, string[]>>): Admits {
  const keys = new Set<Scope>();
  let any = false;
  for (const requirement of security) {
    const scopes = requirement.apiKey;
    if (!scopes) continue;
    if (scopes.length === 0) any = true;
    t.ok(scopes.length <= 1, 'each key requirement names one scope: the requirements are alternatives');
    for (const scope of scopes) keys.add(scope as Scope);
  }
  return { anonymous: security.length === 0, session: security.some((r) => 'session' in r), keys: any ? 'any' : keys };
}

/** Refused by the access rules: 401, or 403 forbidden (a key refused, a missing scope, another workspace). */
function refused(res: { status: number; body: any }): boolean {
  return res.status === 401 || (res.status === 403 && res.body?.error?.code === 'forbidden');
}

/** The probe of an operation: its path, query and body, filled by `sample`, and a function that sends it. */
function probeFor(server: TestServer, op: Json, method: string, route: string, me: SignedUp) {
  const params: Record<string, string> = {};
  const maxLength = (name: string): number => (op.parameters ?? []).find((p: Json) => p.in === 'path' && p.name === name)?.schema?.maxLength ?? 64;
  const madeUp = (name: string) => `${name}_0000000000000000000000000`.slice(0, maxLength(name));
  const path = route.replace(/\{(\w+)\}/g, (_, name: string) => (params[name] = name === 'workspaceId' ? me.workspaceId : madeUp(name)));
  const queryParameters: Json[] = (op.parameters ?? []).filter((p: Json) => p.in === 'query');
  const querySchema = {
    type: 'object',
    properties: Object.fromEntries(queryParameters.map((p) => [p.name, p.schema])),
    required: queryParameters.filter((p) => p.required).map((p) => p.name),
  };
  const query = new URLSearchParams(Object.entries(sample(querySchema, me) as Json).map(([k, v]) => [k, String(v)] as [string, string])).toString();
  const bodySchema = op.requestBody?.content?.['application/json']?.schema;
  const body = bodySchema ? JSON.stringify(sample(bodySchema, me)) : undefined;
  const send = (headers: Record<string, string>) =>
    server.json(`${path}${query ? `?${query}` : ''}`, {
      method: method.toUpperCase(),
      headers: { 'content-type': 'application/json', ...headers },
      ...(body ? { body } : {}),
    });
  return { params, query, body, send };
}

// Every operation of the served document, so a new route is covered by being declared. Each is called with no
// credentials, then with a key holding each scope alone and a key holding `all`, then with a session (last, as
// some calls delete what they are given); what the server refuses must be exactly what `security` leaves out.
t.test('the declared security of every operation is what a live server accepts', async (t) => {
  const server = await startTestServer(t);
  const doc = (await server.json('/v1/openapi.json')).body;
  const scopes = SCOPES.filter((s) => s !== 'all');
  for (const [route, item] of Object.entries<Json>(doc.paths)) {
    for (const [method, op] of Object.entries<Json>(item)) {
      await t.test(`${method.toUpperCase()} ${route}`, async (t) => {
        const admits = declared(op.security);
        const me = await signUp(server);
        const probe = probeFor(server, op, method, route, me);
        // Every error the probes meet is one the operation documents, under its status, with its code named.
        const request = async (headers: Record<string, string>) => {
          const res = await probe.send(headers);
          const code = res.body?.error?.code;
          if (res.status >= 400 && ![405, 414, 431, 500].includes(res.status)) {
            t.match(op.responses[String(res.status)]?.description ?? '', `\`${code}\``, `${res.status} ${code} is documented`);
          }
          return res;
        };
        // The probe passes the route's schemas, so what refuses a key in a handler (after validation) is reached.
        const compiled = server.http.router.routes.find((r) => r.def.method === method.toUpperCase() && r.def.path.replace(/:(\w+)/g, '{$1}') === route)!;
        t.ok(compiled.validateParams?.({ ...probe.params }) ?? true, 'the probe passes the path schema');
        t.ok(compiled.validateQuery?.(Object.fromEntries(new URLSearchParams(probe.query))) ?? true, 'the probe passes the query schema');
        t.ok(compiled.validateBody?.(probe.body === undefined ? undefined : JSON.parse(probe.body)) ?? true, 'the probe passes the body schema');
        const anonymous = await request({});
        if (admits.anonymous) {
          t.not(anonymous.status, 401, 'no credentials: not refused (security: none)');
          t.notMatch(anonymous.body?.error?.message ?? '', /^Authentication is required/, 'no credentials: not asked for any');
          return;
        }
        t.equal(anonymous.status, 401, 'no credentials: 401');
        for (const scope of [...scopes, 'all' as const]) {
          const key = await createKey(server, me.cookie, me.workspaceId, [scope]);
          const res = await request(withKey(key.key));
          const expected = admits.keys === 'any' || admits.keys.has(scope);
          t.equal(
            !refused(res),
            expected,
            `a key with ${scope}: ${expected ? 'accepted' : 'refused'}, as declared (answered ${res.status} ${res.body?.error?.message ?? ''})`,
          );
        }
        const session = await request(withCookie(me.cookie));
        t.equal(
          !refused(session),
          admits.session,
          `a session: ${admits.session ? 'accepted' : 'refused'}, as declared (answered ${session.status} ${session.body?.error?.message ?? ''})`,
        );
      });
    }
  }
});
