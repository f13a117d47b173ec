/**
 * The ComfyUI kind's settings, from the environment:
 * - COMFYUI_BASE_URL: the server (http or https), e.g. http://gpu-1:8188; unset leaves the kind unconfigured.
 * - COMFYUI_API_KEY: optional; sent as `Authorization: Bearer <key>` for a server behind an authenticating
 *   proxy (ComfyUI itself checks no credentials).
 * - COMFYUI_MAX_CONCURRENT_JOBS: optional positive integer; ComfyUI runs one prompt at a time and queues
 *   the rest, so a small number keeps the waiting in our queue, where it is fair between workspaces.
 */
export interface ComfyuiSettings {
  /** Without a trailing slash. */
  baseUrl: string;
  apiKey?: string;
  maxConcurrentJobs?: number;
}

export function parseComfyuiSettings(env: Record<string, string | undefined>): { settings: ComfyuiSettings | undefined; problems: string[] } {
  const problems: string[] = [];
  const baseUrl = env.COMFYUI_BASE_URL?.trim() ?? '';
  const apiKey = env.COMFYUI_API_KEY?.trim() ?? '';
  const maxText = env.COMFYUI_MAX_CONCURRENT_JOBS?.trim() ?? '';

  if (baseUrl === '') {
    if (apiKey !== '') problems.push("COMFYUI_API_KEY is set but COMFYUI_BASE_URL is not: set the server's URL too, or unset the key.");
    if (maxText !== '') problems.push('COMFYUI_MAX_CONCURRENT_JOBS is set but COMFYUI_BASE_URL is not.');
    return { settings: undefined, problems };
  }

  let url: URL | undefined;
  try {
    url = new URL(baseUrl);
  } catch {
    problems.push('COMFYUI_BASE_URL is not a valid URL.');
  }
  if (url && url.protocol !== 'http:' && url.protocol !== 'https:') problems.push('COMFYUI_BASE_URL must be an http or https URL.');
  if (url && (url.username !== '' || url.password !== '')) problems.push('COMFYUI_BASE_URL must not hold credentials: put the key in COMFYUI_API_KEY.');
  if (url && (url.search !== '' || url.hash !== '')) problems.push('COMFYUI_BASE_URL must not have a query or a fragment.');

  let maxConcurrentJobs: number | undefined;
  if (maxText !== '') {
    if (/^\d+$/.test(maxText) && Number(maxText) >= 1 && Number(maxText) <= 1_000_000) maxConcurrentJobs = Number(maxText);
    else problems.push('COMFYUI_MAX_CONCURRENT_JOBS must be an integer from 1 to 1000000.');
  }
  if (/\s/.test(apiKey)) problems.push('COMFYUI_API_KEY must not contain white space.');

  if (problems.length > 0) return { settings: undefined, problems };
  const settings: ComfyuiSettings = { baseUrl: baseUrl.replace(/\/+$/, '') };
  if (apiKey !== '') settings.apiKey = apiKey;
  if (maxConcurrentJobs !== undefined) settings.maxConcurrentJobs = maxConcurrentJobs;
  return { settings, problems };
}
