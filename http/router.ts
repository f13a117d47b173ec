import type { Method, RouteDef } from './route.ts';
import { compileBody, compileResponse, compileText, type Validator } from './validation.ts';

/** A route with its validators, each compiled once, when first used. */
export interface CompiledRoute {
  def: RouteDef;
  segments: string[];
  paramNames: string[];
  validateParams?: Validator;
  validateQuery?: Validator;
  validateBody?: Validator;
  validateResponse: ResponseValidators;
}

/**
 * A route's response validators by status, each compiled when first used: compiling every route's
 * schemas at start-up took a few hundred milliseconds of every start, for answers most processes never give.
 */
export class ResponseValidators {
  private readonly compiled = new Map<number, Validator>();

  constructor(private readonly schemas: RouteDef['responses']) {}

  get(status: number): Validator | undefined {
    let validator = this.compiled.get(status);
    if (validator) return validator;
    const schema = this.schemas[status];
    if (!schema) return undefined;
    validator = compileResponse(schema);
    this.compiled.set(status, validator);
    return validator;
  }
}

/** `key` of `target` is `compile()`'s result, made on first read (undefined when there is nothing to compile). */
function compiledOnFirstUse<K extends 'validateParams' | 'validateQuery' | 'validateBody'>(
  target: CompiledRoute,
  key: K,
  compile: (() => Validator) | undefined,
): void {
  if (!compile) return;
  Object.defineProperty(target, key, {
    configurable: true,
    enumerable: true,
    get() {
      const value = compile();
      Object.defineProperty(target, key, { value, enumerable: true });
      return value;
    },
  });
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
    const compiled: CompiledRoute = { def, segments, paramNames, validateResponse: new ResponseValidators(def.responses) };
    const { params, query, body } = def;
    compiledOnFirstUse(compiled, 'validateParams', params && (() => compileText(params)));
    compiledOnFirstUse(compiled, 'validateQuery', query && (() => compileText(query)));
    compiledOnFirstUse(compiled, 'validateBody', body && (() => compileBody(body)));
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
