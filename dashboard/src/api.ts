/**
 * The one way the dashboard talks to the API: same-origin fetch with the session cookie. Every failure
 * becomes an ApiFailure carrying the error envelope's message, which the pages show as it is.
 */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

type Query = Record<string, string | number | boolean | undefined | null>;

export function withQuery(path: string, query: Query = {}): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== null && value !== '') search.set(name, String(value));
  const text = search.toString();
  return text === '' ? path : `${path}?${text}`;
}

export async function api<T = any>(method: string, path: string, options: { query?: Query; body?: unknown } = {}): Promise<T> {
  const init: RequestInit = { method, credentials: 'same-origin', headers: { accept: 'application/json' } };
  if (options.body !== undefined) {
    init.headers = { accept: 'application/json', 'content-type': 'application/json' };
    init.body = JSON.stringify(options.body);
  }
  let response: Response;
  try {
    response = await fetch(withQuery(path, options.query), init);
  } catch {
    throw new ApiFailure(0, 'network_error', 'The service could not be reached; check your connection and try again.');
  }
  const text = await response.text();
  let parsed: any;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!response.ok) {
    const error = parsed?.error;
    // The session ended (expired, logged out elsewhere): the app goes back to the login page.
    if (response.status === 401 && !path.startsWith('/v1/auth/')) window.dispatchEvent(new CustomEvent('gs:signed-out'));
    throw new ApiFailure(response.status, error?.code ?? 'unknown', error?.message ?? `The request failed with status ${response.status}.`);
  }
  return parsed as T;
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
