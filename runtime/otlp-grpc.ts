import { createRequire } from 'node:module';
import type { Metadata } from '@grpc/grpc-js';

/**
 * The OTLP headers as the gRPC metadata of every export (config.ts checked their names and values).
 * @grpc/grpc-js is loaded here, once gRPC is chosen, rather than by every start of the service.
 */
export function grpcMetadata(headers: Record<string, string>): Metadata {
  const grpc = createRequire(import.meta.url)('@grpc/grpc-js') as typeof import('@grpc/grpc-js');
  const metadata = new grpc.Metadata();
  for (const [name, value] of Object.entries(headers)) metadata.set(name, value);
  return metadata;
}
