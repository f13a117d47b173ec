import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import path from 'node:path';
import { context, propagation, trace, type Span, type Tracer } from '@opentelemetry/api';
import { NodeSDK } from '@opentelemetry/sdk-node';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as OtlpJsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as OtlpGrpcTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { Instrumentation } from '@opentelemetry/instrumentation';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { RedisInstrumentation } from '@opentelemetry/instrumentation-redis';
import type { Config, TelemetryConfig } from './config.ts';
import { redactedUrl } from './tracing.ts';
import { RequestScopeContextManager } from './request-scope.ts';
import { grpcMetadata } from './otlp-grpc.ts';
import { statementOperation } from '../persistence/traced-pglite.ts';

export interface Telemetry {
  tracer: Tracer;
  enabled: boolean;
  shutdown(): Promise<void>;
}

export interface TelemetryOptions {
  /** Tests pass an in-memory exporter; each span is exported as it ends (after the resource detectors settle, so a moment later). */
  exporter?: SpanExporter;
  /** service.version on the resource (package.json's version). */
  serviceVersion?: string;
}

/** service.instance.id: one per process, as the semantic conventions ask (a random UUID). */
const INSTANCE_ID = randomUUID();

/**
 * Traces through the OpenTelemetry Node SDK, loaded by runtime/telemetry.ts only when spans are recorded
 * (an exporter configured, or a test's). Leaving this module, the OTLP metric exporters and the Redis client
 * unloaded when unused took importing app/service.ts from 6.96 to 6.04 s of CPU (through tsx, quiet machine).
 */
export function startTracing(config: Config['telemetry'], options: TelemetryOptions = {}): Telemetry {
  const processors: SpanProcessor[] = [];
  if (options.exporter) processors.push(new SimpleSpanProcessor(options.exporter));
  else if (config.tracesExporter === 'otlp') processors.push(new BatchSpanProcessor(otlpExporter(config)));
  else if (config.tracesExporter === 'console') processors.push(new SimpleSpanProcessor(new ConsoleSpanExporter()));
  const instrumentations = clientInstrumentations();
  // Traces only: left unset, metricReaders and logRecordProcessors default to OTLP exporters aimed at
  // localhost:4318, which nothing here configured.
  const sdk = new NodeSDK({
    serviceName: config.serviceName,
    resource: resourceFromAttributes({
      'service.name': config.serviceName,
      ...(options.serviceVersion ? { 'service.version': options.serviceVersion } : {}),
      'service.instance.id': INSTANCE_ID,
    }),
    sampler: samplerOf(config.sampler),
    // The trace context is kept in the request scope's store (runtime/request-scope.ts).
    contextManager: new RequestScopeContextManager(),
    spanProcessors: processors,
    instrumentations,
    metricReaders: [],
    logRecordProcessors: [],
  });
  sdk.start();
  // The SDK enables an instrumentation only if its config says it is off; these were made on (enabled at
  // construction), so one disabled by an earlier start's shutdown would stay off: enabled here (a no-op
  // when on), which patches the clients it hooked before again.
  for (const instrumentation of instrumentations) instrumentation.enable();
  patchLoadedModules(instrumentations);
  return {
    tracer: trace.getTracer(config.serviceName),
    enabled: true,
    async shutdown() {
      await sdk.shutdown();
      // The instrumentations are this process's (one set for every service it starts): unpatched here,
      // patched again by the next start.
      for (const instrumentation of instrumentations) instrumentation.disable();
      // NodeSDK leaves its providers registered as the globals: unregister them, or the next start in
      // this process (tests start several services) keeps handing out tracers of the shut-down one.
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

function samplerOf(sampler: TelemetryConfig['sampler']): Sampler {
  const ratio = () => new TraceIdRatioBasedSampler(sampler.ratio);
  switch (sampler.name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio();
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio() });
  }
}

function otlpExporter(config: TelemetryConfig): SpanExporter {
  if (config.otlpProtocol === 'grpc') {
    // The endpoint as it is (no /v1/traces over gRPC); none given, the exporter's http://localhost:4317.
    return new OtlpGrpcTraceExporter({ ...(config.otlpEndpoint ? { url: config.otlpEndpoint } : {}), metadata: grpcMetadata(config.otlpHeaders) });
  }
  const options = { ...(config.otlpEndpoint ? { url: config.otlpEndpoint } : {}), headers: config.otlpHeaders };
  return config.otlpProtocol === 'http/json' ? new OtlpJsonTraceExporter(options) : new OtlpProtobufTraceExporter(options);
}

/**
 * The client libraries traced through OpenTelemetry's instrumentations: pg (PostgreSQL statements, inside a
 * span only: a statement outside any request or message makes none), undici (provider calls, fetched inputs;
 * the webhook attempt is a client span of its own, which sends its traceparent itself) and node-redis.
 * Made once per process, enabled by each start and disabled by its shutdown.
 */
let instrumentationSet: Instrumentation[] | undefined;
function clientInstrumentations(): Instrumentation[] {
  instrumentationSet ??= [
    new PgInstrumentation({
      requireParentSpan: true,
      enhancedDatabaseReporting: false,
      // The instrumentation names the operation of some statements only (not BEGIN, COMMIT…): every one here.
      requestHook: (span, info) => span.setAttribute('db.operation.name', statementOperation(info.query.text)),
      // pg.connect and pg-pool.connect (a wait for a pooled connection shows there): named too.
      connectionHook: (span) => span.setAttribute('db.operation.name', 'connect'),
    }),
    new UndiciInstrumentation({
      requireParentforSpans: true,
      ignoreRequestHook: (request) => hasHeader(request.headers, 'traceparent'),
      requestHook: (span, request) => redactUrlAttributes(span, `${request.origin}${request.path}`),
    }),
    new RedisInstrumentation({ requireParentSpan: true }),
  ];
  return instrumentationSet;
}

function hasHeader(headers: string | Array<string | string[]>, name: string): boolean {
  if (Array.isArray(headers)) {
    for (let i = 0; i < headers.length; i += 2) if (String(headers[i]).toLowerCase() === name) return true;
    return false;
  }
  return headers.toLowerCase().includes(`${name}:`);
}

/** url.full without credentials or query (a signed URL's signature, a token), and no url.query at all. */
function redactUrlAttributes(span: Span, url: string): void {
  span.setAttribute('url.full', redactedUrl(url));
  span.setAttribute('url.query', '');
}

/**
 * The instrumentations patch a module as it is required. The service's modules are imported before the
 * SDK starts, so the libraries the instrumentations patch (pg, @redis/client and its internal files)
 * may already be loaded: requiring them again, now that the hooks are in place, patches them (a module
 * patched before is patched again by `enable` itself).
 */
function patchLoadedModules(instrumentations: Instrumentation[]): void {
  const require = createRequire(import.meta.url);
  for (const instrumentation of instrumentations) {
    const definitions =
      (instrumentation as unknown as { getModuleDefinitions?: () => Array<{ name: string; files: Array<{ name: string }> }> }).getModuleDefinitions?.() ?? [];
    for (const definition of definitions) {
      let entry: string;
      try {
        entry = require.resolve(definition.name);
      } catch {
        continue; // not installed (an older client the instrumentation also knows)
      }
      try {
        require(entry);
        const root = packageRoot(entry, definition.name);
        for (const file of definition.files) {
          try {
            require(path.join(root, file.name.startsWith(`${definition.name}/`) ? file.name.slice(definition.name.length + 1) : file.name));
          } catch {
            /* a file of another major version */
          }
        }
      } catch {
        /* left unpatched: its spans are missing, nothing else */
      }
    }
  }
}

function packageRoot(entry: string, name: string): string {
  const marker = `${path.sep}node_modules${path.sep}${name.split('/').join(path.sep)}${path.sep}`;
  const at = entry.lastIndexOf(marker);
  return at === -1 ? path.dirname(entry) : entry.slice(0, at + marker.length - 1);
}
