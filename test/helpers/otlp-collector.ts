import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import type { Test } from 'tap';

export const TRACE_EXPORT = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';
export const METRICS_EXPORT = '/opentelemetry.proto.collector.metrics.v1.MetricsService/Export';

/** One export request as the collector received it: its method (gRPC) or path (HTTP), body and headers or metadata. */
export interface ReceivedExport {
  path: string;
  body: Buffer;
  headers: Record<string, string>;
}

export interface Collector {
  /** The endpoint to give the service (`http://127.0.0.1:PORT`). */
  url: string;
  received: ReceivedExport[];
}

/**
 * An OTLP collector over gRPC: the trace and metrics Export methods, each keeping the request's bytes as they
 * came (identity serialisation) and answering the empty response message (zero bytes: no partial success).
 */
export async function startGrpcCollector(t: Test): Promise<Collector> {
  const received: ReceivedExport[] = [];
  const server = new grpc.Server();
  const identity = (bytes: Buffer) => bytes;
  for (const path of [TRACE_EXPORT, METRICS_EXPORT]) {
    const method = {
      path,
      requestStream: false,
      responseStream: false,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
    };
    server.addService(
      { Export: method },
      {
        Export: (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
          const headers: Record<string, string> = {};
          for (const [key, value] of Object.entries(call.metadata.getMap())) headers[key] = String(value);
          received.push({ path, body: call.request, headers });
          callback(null, Buffer.alloc(0));
        },
      },
    );
  }
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound)));
  });
  t.teardown(() => server.forceShutdown());
  return { url: `http://127.0.0.1:${port}`, received };
}

/** An OTLP collector over HTTP (either encoding): every POST is kept and answered 200 with an empty JSON body. */
export async function startHttpCollector(t: Test): Promise<Collector> {
  const received: ReceivedExport[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.method === 'POST')
        received.push({ path: request.url ?? '', body: Buffer.concat(chunks), headers: request.headers as Record<string, string> });
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received };
}

/** What one OTLP export request holds: per resource, its string attributes and the names of its spans or metrics. */
export interface ExportedResource {
  attributes: Record<string, string>;
  names: string[];
}

/**
 * Reads an ExportTraceServiceRequest or ExportMetricsServiceRequest (protobuf) as far as the tests look: both
 * have resource = 1 and scope spans/metrics = 2 in each resource entry, items = 2 in each scope entry, and a span's
 * name is field 5, a metric's field 1 (opentelemetry-proto, trace.proto and metrics.proto).
 */
export function decodeExport(body: Buffer, kind: 'traces' | 'metrics'): ExportedResource[] {
  const nameField = kind === 'traces' ? 5 : 1;
  return fieldsOf(body, 1).map((entry) => {
    const attributes: Record<string, string> = {};
    for (const resource of fieldsOf(entry, 1)) {
      for (const pair of fieldsOf(resource, 1)) {
        const value = fieldsOf(pair, 2)[0];
        const text = value && fieldsOf(value, 1)[0];
        if (text) attributes[fieldsOf(pair, 1)[0]?.toString('utf8') ?? ''] = text.toString('utf8');
      }
    }
    const names = fieldsOf(entry, 2)
      .flatMap((scope) => fieldsOf(scope, 2))
      .map((item) => fieldsOf(item, nameField)[0]?.toString('utf8') ?? '');
    return { attributes, names };
  });
}

/** The length-delimited values of field `wanted` in a protobuf message (the other wire types are skipped). */
function fieldsOf(message: Buffer, wanted: number): Buffer[] {
  const found: Buffer[] = [];
  let at = 0;
  const varint = () => {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      const byte = message[at++];
      if (byte === undefined) throw new Error('truncated protobuf message');
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
  };
  while (at < message.length) {
    const key = varint();
    const field = Math.floor(key / 8);
    switch (key & 7) {
      case 0:
        varint();
        break;
      case 1:
        at += 8;
        break;
      case 5:
        at += 4;
        break;
      case 2: {
        const length = varint();
        if (field === wanted) found.push(message.subarray(at, at + length));
        at += length;
        break;
      }
      default:
        throw new Error(`unexpected protobuf wire type ${key & 7}`);
    }
  }
  if (at !== message.length) throw new Error('truncated protobuf message');
  return found;
}
