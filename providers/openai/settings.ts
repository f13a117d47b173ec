/**
 * The `openai` kind's settings, from the environment. The kind is configured when OPENAI_API_KEY or
 * OPENAI_BASE_URL is set (a server of its own, such as vLLM or Ollama, still needs some key: they accept
 * any). Every malformed value is one line in `problems`, naming the variable, never its value.
 */
export interface OpenAiSettings {
  apiKey: string;
  /** Without a trailing slash; the API paths (/chat/completions, ...) are appended. */
  baseUrl: string;
  /** Sent as OpenAI-Organization when set. */
  organization?: string;
  /** Bound on each call; undefined: the service's requestTimeoutMs. */
  timeoutMs?: number;
  /** Jobs at once for each deployment of the kind; undefined for no limit. */
  maxConcurrentJobs?: number;
}

export const OPENAI_DEFAULT_BASE_URL = 'https://api.openai.com/v1';

export function parseOpenAiSettings(env: Record<string, string | undefined>): { settings: OpenAiSettings | undefined; problems: string[] } {
  const problems: string[] = [];
  const read = (name: string) => {
    const value = env[name]?.trim();
    return value ? value : undefined;
  };
  const apiKey = read('OPENAI_API_KEY');
  const rawBaseUrl = read('OPENAI_BASE_URL');
  const organization = read('OPENAI_ORGANIZATION');

  let baseUrl = OPENAI_DEFAULT_BASE_URL;
  if (rawBaseUrl !== undefined) {
    const reason = baseUrlProblem(rawBaseUrl);
    if (reason) problems.push(`OPENAI_BASE_URL: ${reason}`);
    else baseUrl = rawBaseUrl.replace(/\/+$/, '');
  }
  // The key goes into a header: anything a header cannot carry would fail on every call.
  if (apiKey !== undefined && !/^[\x21-\x7e]+$/.test(apiKey)) problems.push('OPENAI_API_KEY: must be printable ASCII without spaces');
  if (organization !== undefined && !/^[\x21-\x7e]+$/.test(organization)) problems.push('OPENAI_ORGANIZATION: must be printable ASCII without spaces');
  const timeoutMs = integer(env, 'OPENAI_TIMEOUT_MS', 100, 3_600_000, problems);
  const maxConcurrentJobs = integer(env, 'OPENAI_MAX_CONCURRENT_JOBS', 0, 1_000_000, problems);

  if (apiKey === undefined && rawBaseUrl === undefined) {
    if (organization !== undefined) problems.push('OPENAI_ORGANIZATION: set without OPENAI_API_KEY');
    return { settings: undefined, problems };
  }
  if (apiKey === undefined) problems.push('OPENAI_API_KEY: required when OPENAI_BASE_URL is set (servers without keys accept any value)');
  if (problems.length > 0 || apiKey === undefined) return { settings: undefined, problems };
  return {
    settings: {
      apiKey,
      baseUrl,
      ...(organization !== undefined ? { organization } : {}),
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      ...(maxConcurrentJobs ? { maxConcurrentJobs } : {}),
    },
    problems,
  };
}

function baseUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'not a valid URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http or https URL';
  if (url.username !== '' || url.password !== '') return 'must not carry credentials (the key goes in OPENAI_API_KEY)';
  if (url.search !== '' || url.hash !== '') return 'must not have a query or a fragment';
  return undefined;
}

/** An optional integer within bounds; a problem line when it is not one. */
function integer(env: Record<string, string | undefined>, name: string, min: number, max: number, problems: string[]): number | undefined {
  const raw = env[name]?.trim();
  if (!raw) return undefined;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    problems.push(`${name}: must be an integer from ${min} to ${max}`);
    return undefined;
  }
  return Number(raw);
}
