import { AsyncLocalStorage } from 'node:async_hooks';
import { ROOT_CONTEXT, type Context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';

/**
 * What the work running now belongs to: the request being served (log lines carry its id) and, while tracing
 * is on, the OpenTelemetry context. One AsyncLocalStorage holds both: on Node 20 a second one, running beside
 * it on every request, cost about 1.5 µs a request (two stores to enter, and keyed accesses to an async
 * resource that no longer stay monomorphic), a quarter of tracing's cost on GET /v1.
 */
interface Scope {
  requestId: string | undefined;
  trace: Context | undefined;
  /** The tracing start the trace context belongs to: a context left over from a stopped SDK is not active. */
  epoch: number;
}

const storage = new AsyncLocalStorage<Scope>();
let epoch = 0;

/** The id of the request the work running now was done for; undefined outside any request. */
export function currentRequestId(): string | undefined {
  return storage.getStore()?.requestId;
}

/**
 * Runs `fn(arg)` for request `requestId` (undefined: for none), in the trace context given, or in the current
 * one when `traceContext` is undefined. Tracing on, this is the one store entered per request.
 */
export function runInRequest<A, R>(requestId: string | undefined, fn: (arg: A) => R, arg: A, traceContext?: Context): R {
  const current = storage.getStore();
  if (traceContext === undefined && current?.requestId === requestId) return fn(arg);
  const scope: Scope =
    traceContext === undefined ? { requestId, trace: current?.trace, epoch: current?.epoch ?? epoch } : { requestId, trace: traceContext, epoch };
  return storage.run(scope, fn, arg);
}

/**
 * The OpenTelemetry context manager of the service: the SDK's AsyncLocalStorage one, kept in the request
 * scope's store. Entering a trace context keeps the current request id, and entering a request keeps the
 * current trace context, as with two separate stores.
 */
export class RequestScopeContextManager extends AsyncLocalStorageContextManager {
  override active(): Context {
    const scope = storage.getStore();
    return scope?.trace !== undefined && scope.epoch === epoch ? scope.trace : ROOT_CONTEXT;
  }

  override with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    context: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    const callback = thisArg == null ? fn : fn.bind(thisArg);
    return storage.run({ requestId: storage.getStore()?.requestId, trace: context, epoch }, callback, ...args);
  }

  override attach(context: Context): { dispose(): void } {
    const previous = storage.getStore();
    storage.enterWith({ requestId: previous?.requestId, trace: context, epoch });
    let disposed = false;
    return {
      dispose() {
        if (disposed) return;
        disposed = true;
        storage.enterWith(previous as Scope);
      },
    };
  }

  /** The store outlives the SDK (request ids are kept with tracing off): the trace contexts in it are retired instead. */
  override disable(): this {
    epoch++;
    return this;
  }
}
