import type { Method, RouteDef } from './route.ts';
import { compileBody, compileResponse, compileText, type Validator } from './validation.ts';

/** A route with its validators compiled once, at registration. */
export interface CompiledRoute {
  def: RouteDef;
  segments: string[];
  paramNames: string[];
  validateParams?: Validator;
  validateQuery?: Validator;
  validateBody?: Validator;
  validateResponse: Map<number, Validator>;
}

export type Match =
  | { kind: 'found'; route: CompiledRoute; params: Record<string, string> }
  | { kind: 'method_not_allowed'; allowed: Method[] }
  | { kind: 'not_found' };

/** Static paths are found by one map lookup; parameterised ones by walking routes of the same depth. */
const NO_PARAMS: Record<string, string> = Object.freeze({}) as Record<string, string>;

export class Router {
  /** Static routes by `METHOD path`, with their (never mutated) match made once. */
  private readonly staticRoutes = new Map<string, Match & { kind: 'found' }>();
  private readonly dynamicRoutes = new Map<number, CompiledRoute[]>();
  readonly routes: CompiledRoute[] = [];

  add(def: RouteDef): void {
    if (!def.path.startsWith('/')) throw new Error(`route path must start with /: ${def.path}`);
    const segments = def.path.split('/').slice(1);
    const paramNames = segments.filter((s) => s.startsWith(':')).map((s) => s.slice(1));
    if (this.routes.some((r) => r.def.method === def.method && r.def.path === def.path)) {
      throw new Error(`duplicate route ${def.method} ${def.path}`);
    }
    const compiled: CompiledRoute = {
      def,
      segments,
      paramNames,
      validateParams: def.params ? compileText(def.params) : undefined,
      validateQuery: def.query ? compileText(def.query) : undefined,
      validateBody: def.body ? compileBody(def.body) : undefined,
      validateResponse: new Map(
        Object.entries(def.responses).flatMap(([status, schema]) => (schema ? [[Number(status), compileResponse(schema)] as const] : [])),
      ),
    };
    this.routes.push(compiled);
    if (paramNames.length === 0) {
      this.staticRoutes.set(`${def.method} ${def.path}`, { kind: 'found', route: compiled, params: NO_PARAMS });
    } else {
      const list = this.dynamicRoutes.get(segments.length) ?? [];
      list.push(compiled);
      // Routes with more literal segments win over parameterised ones at the same depth.
      list.sort((a, b) => b.segments.filter((s) => !s.startsWith(':')).length - a.segments.filter((s) => !s.startsWith(':')).length);
      this.dynamicRoutes.set(segments.length, list);
    }
  }

  /** `path` is the raw, still percent-encoded path; parameters come back encoded too. */
  match(method: string, path: string): Match {
    const normalised = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
    const direct = this.staticRoutes.get(`${method} ${normalised}`);
    if (direct) return direct;

    const segments = normalised.split('/').slice(1);
    const allowed = new Set<Method>();
    for (const route of this.candidates(normalised, segments)) {
      const params = matchSegments(route, segments);
      if (!params) continue;
      if (route.def.method === method) return { kind: 'found', route, params };
      allowed.add(route.def.method);
    }
    return allowed.size > 0 ? { kind: 'method_not_allowed', allowed: [...allowed] } : { kind: 'not_found' };
  }

  private *candidates(path: string, segments: string[]): Iterable<CompiledRoute> {
    for (const route of this.routes) {
      if (route.paramNames.length === 0 && route.def.path === path) yield route;
    }
    yield* this.dynamicRoutes.get(segments.length) ?? [];
  }
}

function matchSegments(route: CompiledRoute, segments: string[]): Record<string, string> | undefined {
  if (route.paramNames.length === 0) return {};
  const params: Record<string, string> = {};
  for (let i = 0; i < route.segments.length; i++) {
    const pattern = route.segments[i]!;
    const actual = segments[i]!;
    if (pattern.startsWith(':')) {
      if (actual === '') return undefined;
      params[pattern.slice(1)] = actual;
    } else if (pattern !== actual) {
      return undefined;
    }
  }
  return params;
}
