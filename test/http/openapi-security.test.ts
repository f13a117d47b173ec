import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp, withCookie, withKey } from '../helpers/identity.ts';
import { SCOPES, type RouteDef, type Scope } from '../../http/route.ts';

type Json = Record<string, any>;

/**
 * A request that passes the route's schemas where a generic value can: every required property filled
 * (the caller's workspace id for `workspaceId`), so that checks made in handlers, after validation, are reached.
 */
function sample(schema: Json | undefined, workspaceId: string, name = ''): unknown {
  if (!schema) return undefined;
  if (name === 'workspaceId') return workspaceId;
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  if (Array.isArray(schema.anyOf)) return sample(schema.anyOf[0], workspaceId, name);
  if (Array.isArray(schema.oneOf)) return sample(schema.oneOf[0], workspaceId, name);
  if (schema.default !== undefined) return schema.default;
  switch (schema.type) {
    case 'object': {
      const out: Json = {};
      for (const key of schema.required ?? []) out[key] = sample(schema.properties?.[key], workspaceId, key);
      return out;
    }
    case 'array': return Array.from({ length: schema.minItems ?? 0 }, () => sample(schema.items, workspaceId));
    case 'integer': case 'number': return schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : 1);
    case 'boolean': return false;
    case 'null': return null;
    case 'string': {
      if (schema.format === 'email') return 'probe@example.com';
      if (schema.format === 'uri') return 'https://example.com/probe';
      if (schema.format === 'date-time') return new Date(Date.now() + 86_400_000).toISOString();
      if (schema.format === 'date') return '2026-01-01';
      if (typeof schema.pattern === 'string' && schema.pattern.startsWith('^[0-9]')) return '1'.repeat(Math.max(1, schema.minLength ?? 1));
      return 'x'.repeat(Math.max(1, schema.minLength ?? 1));
    }
    default: return undefined;
  }
}

t.test('observe', async (t) => {
  const server = await startTestServer(t);
  const doc = (await server.json('/v1/openapi.json')).body;
  const rows: string[] = [];
  for (const { def } of server.http.router.routes) {
    const op = doc.paths[def.path.replace(/:(\w+)/g, '{$1}')][def.method.toLowerCase()];
    const me = await signUp(server);
    const request = (headers: Record<string, string>) => {
      const path = def.path.replace(/:(\w+)/g, (_, name: string) => (name === 'workspaceId' ? me.workspaceId : `${name}_0000000000000000000000000`));
      const queryValue = (sample(op.parameters ? paramsSchema(op.parameters, 'query') : undefined, me.workspaceId) ?? {}) as Json;
      if (!def.body && def.rawBody === undefined && def.keyWorkspace !== 'none' && !def.path.includes(':workspaceId')) queryValue.workspaceId ??= me.workspaceId;
      const query = new URLSearchParams(Object.entries(queryValue).map(([k, v]) => [k, String(v)])).toString();
      const body = def.body ? JSON.stringify(sample(op.requestBody.content['application/json'].schema, me.workspaceId)) : undefined;
      return server.json(`${path}${query ? `?${query}` : ''}`, { method: def.method, headers: { 'content-type': 'application/json', ...headers }, ...(body ? { body } : {}) });
    };
    const show = async (label: string, headers: Record<string, string>) => {
      const res = await request(headers);
      return `${label}=${res.status}${res.body?.error ? `:${res.body.error.code}:${String(res.body.error.message).slice(0, 60)}` : ''}`;
    };
    const parts = [`${def.method} ${def.path} [${JSON.stringify(def.access)}]`];
    parts.push(await show('none', {}));
    const declared = typeof def.access === 'object' ? def.access.scopes : [];
    const complement = SCOPES.filter((s) => s !== 'all' && !declared.includes(s) && !(s === 'usage.read' && declared.includes('wallet.read')));
    if (def.access !== 'public') {
      parts.push(await show('others', withKey((await createKey(server, me.cookie, me.workspaceId, complement as Scope[])).key)));
      for (const s of declared) parts.push(await show(s, withKey((await createKey(server, me.cookie, me.workspaceId, [s])).key)));
      parts.push(await show('all', withKey((await createKey(server, me.cookie, me.workspaceId, ['all'])).key)));
      parts.push(await show('session', withCookie(me.cookie)));
    }
    rows.push(parts.join('  '));
  }
  console.log(rows.join('\n'));
  t.pass();
});

function paramsSchema(parameters: Json[], where: string): Json {
  const own = parameters.filter((p) => p.in === where);
  return { type: 'object', properties: Object.fromEntries(own.map((p) => [p.name, p.schema])), required: own.filter((p) => p.required).map((p) => p.name) };
}
void ({} as RouteDef);
