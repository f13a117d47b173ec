import type { TestServer } from '../helpers/server.ts';

export type Credential = Record<string, string>;

/** JSON request with the given auth headers. */
export function call(server: TestServer, auth: Credential, method: string, path: string, body?: unknown) {
  return server.json(path, {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

export interface UploadIntent {
  uploadId: string;
  url: string;
  method: 'PUT';
  headers: Record<string, string>;
  expiresAt: string;
}

/** Step 1: asks for an upload URL; throws unless 201. */
export async function requestUpload(
  server: TestServer,
  auth: Credential,
  workspaceId: string,
  bytes: number,
  options: { filename?: string; contentType?: string } = {},
): Promise<UploadIntent> {
  const res = await call(server, auth, 'POST', '/v1/files/upload-url', {
    workspaceId,
    filename: options.filename ?? 'picture.png',
    contentType: options.contentType ?? 'image/png',
    bytes,
  });
  if (res.status !== 201) throw new Error(`upload-url failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Step 2: PUTs bytes to the signed URL with the headers it asks for (plus any extra). */
export async function putBytes(intent: UploadIntent, bytes: Uint8Array, extra: Record<string, string> = {}) {
  const res = await fetch(intent.url, { method: 'PUT', headers: { ...intent.headers, ...extra }, body: bytes });
  const text = await res.text();
  return { status: res.status, body: (text ? safeJson(text) : undefined) as any, headers: res.headers };
}

/** Step 3. */
export function complete(server: TestServer, auth: Credential, workspaceId: string, uploadId: string) {
  return call(server, auth, 'POST', '/v1/files/upload-complete', { workspaceId, uploadId });
}

/** Steps 1 to 3; returns the asset, or throws. */
export async function uploadAsset(
  server: TestServer,
  auth: Credential,
  workspaceId: string,
  bytes: Uint8Array,
  options: { filename?: string; contentType?: string } = {},
) {
  const intent = await requestUpload(server, auth, workspaceId, bytes.length, options);
  const put = await putBytes(intent, bytes);
  if (put.status !== 200) throw new Error(`PUT failed: ${put.status} ${JSON.stringify(put.body)}`);
  const done = await complete(server, auth, workspaceId, intent.uploadId);
  if (done.status !== 201) throw new Error(`upload-complete failed: ${done.status} ${JSON.stringify(done.body)}`);
  return done.body;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
