import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import S3rver from 's3rver';

/**
 * An S3-compatible server (s3rver) on loopback with one bucket, stopped when the test ends; `env` points
 * the service at it. s3rver does not check V4 signatures, so what it proves is the service's own checks.
 */
export async function startS3(t: Test): Promise<{ endpoint: string; bucket: string; env: Record<string, string> }> {
  const directory = await mkdtemp(path.join(os.tmpdir(), 's3rver-'));
  const bucket = 'assets-test';
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  t.teardown(async () => {
    await server.close();
    await rm(directory, { recursive: true, force: true });
  });
  return {
    endpoint,
    bucket,
    env: {
      S3_BUCKET: bucket,
      S3_ENDPOINT: endpoint,
      S3_REGION: 'us-east-1',
      S3_ACCESS_KEY_ID: 'S3RVER',
      S3_SECRET_ACCESS_KEY: 'S3RVER',
      S3_FORCE_PATH_STYLE: 'true',
    },
  };
}
