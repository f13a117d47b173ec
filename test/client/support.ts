import type { Test } from 'tap';
import { createClient, type ClientOptions, type GenerationServiceClient } from '@generation-service/client';
import type { TestServer } from '../helpers/server.ts';
import { createKey, signUp, type SignedUp } from '../helpers/identity.ts';

/** One request the SDK sent, as it left the client (after its middleware), with the status it got. */
export interface Sent {
  method: string;
  url: URL;
  headers: Headers;
  body: string;
  status: number;
  requestId: string | null;
}

export interface SdkTenant extends SignedUp {
  key: string;
  sdk: GenerationServiceClient;
  /** Every request the SDK sent, retries included, in order. */
  sent: Sent[];
}

/**
 * Signs up through POST /v1/auth/signup (a session cookie), creates an API key with it through POST
 * /v1/api-keys, and returns an SDK client holding only that key and the workspace id. The client's fetch is
 * the real one, wrapped only to record what went out.
 */
export async function sdkTenant(server: TestServer, options: Partial<ClientOptions> = {}): Promise<SdkTenant> {
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['all']);
  const sent: Sent[] = [];
  const sdk = createClient({
    baseUrl: server.url,
    apiKey: key,
    workspaceId: user.workspaceId,
    fetch: recordingFetch(sent),
    ...options,
  });
  return { ...user, key, sdk, sent };
}

export function recordingFetch(sent: Sent[]): (request: Request) => Promise<Response> {
  return async (request) => {
    const body = request.body ? await request.clone().text() : '';
    const response = await fetch(request);
    sent.push({
      method: request.method,
      url: new URL(request.url),
      headers: request.headers,
      body,
      status: response.status,
      requestId: response.headers.get('x-request-id'),
    });
    return response;
  };
}

/** What `fn` threw (failing the test when it did not throw). */
export async function thrown(t: Test, fn: () => Promise<unknown>): Promise<any> {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  t.fail('expected an error');
  return undefined;
}
