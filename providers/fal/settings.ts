import { readFileSync, statSync } from 'node:fs';
import type { KeyObject } from 'node:crypto';
import { ed25519KeysOf } from './signature.ts';

/**
 * The fal kind's settings, from the environment:
 * - FAL_KEY: the API key (`key_id:key_secret`); unset, the kind is not configured.
 * - FAL_QUEUE_URL: the queue API's base, default https://queue.fal.run.
 * - FAL_WEBHOOK_JWKS: fal's webhook public keys, a JWKS JSON value or the path of a JWKS file. Unset, jobs
 *   are followed by polling alone (no webhook is asked for, since none could be verified).
 * - FAL_MAX_CONCURRENT_JOBS: jobs in flight at once across all fal deployments; unset, no limit.
 * - FAL_RESUBMIT_GRACE_MS: how long a job handed over again after a restart (its submission's answer may have
 *   been lost) waits for the end of a request fal took for it before it is submitted again; default 120000.
 */
export interface FalSettings {
  key: string;
  /** Without a trailing slash. */
  queueUrl: string;
  /** Ed25519 keys webhooks are checked against; empty: no webhooks. */
  webhookKeys: KeyObject[];
  maxConcurrentJobs?: number;
  /** FAL_RESUBMIT_GRACE_MS when set; else FAL_RESUBMIT_GRACE_MS (the constant). */
  resubmitGraceMs?: number;
}

/** A job handed over again after a restart waits this long for an end of its earlier request (with webhooks). */
export const FAL_RESUBMIT_GRACE_MS = 120_000;

export const FAL_DEFAULT_QUEUE_URL = 'https://queue.fal.run';

const JWKS_FILE_MAX_BYTES = 1 << 20;

type Env = Record<string, string | undefined>;

export function parseFalSettings(env: Env): { settings: FalSettings | undefined; problems: string[] } {
  const problems: string[] = [];
  const value = (name: string) => {
    const raw = env[name];
    return raw === undefined || raw.trim() === '' ? undefined : raw.trim();
  };
  const key = value('FAL_KEY');
  if (key === undefined) {
    const others = ['FAL_QUEUE_URL', 'FAL_WEBHOOK_JWKS', 'FAL_MAX_CONCURRENT_JOBS', 'FAL_RESUBMIT_GRACE_MS'].filter((name) => value(name) !== undefined);
    if (others.length > 0) problems.push(`FAL_KEY: not set, while ${others.join(', ')} ${others.length === 1 ? 'is' : 'are'}`);
    return { settings: undefined, problems };
  }
  if (/\s/.test(key)) problems.push('FAL_KEY: holds white space (expected key_id:key_secret)');

  const queueUrl = readQueueUrl(value('FAL_QUEUE_URL'), problems);
  const webhookKeys = readJwks(value('FAL_WEBHOOK_JWKS'), problems);
  let maxConcurrentJobs: number | undefined;
  const max = value('FAL_MAX_CONCURRENT_JOBS');
  if (max !== undefined) {
    if (/^\d+$/.test(max) && Number(max) >= 1 && Number(max) <= 100_000) maxConcurrentJobs = Number(max);
    else problems.push(`FAL_MAX_CONCURRENT_JOBS=${JSON.stringify(max)}: expected a whole number from 1 to 100000`);
  }
  let resubmitGraceMs: number | undefined;
  const grace = value('FAL_RESUBMIT_GRACE_MS');
  if (grace !== undefined) {
    if (/^\d+$/.test(grace) && Number(grace) <= 3_600_000) resubmitGraceMs = Number(grace);
    else problems.push(`FAL_RESUBMIT_GRACE_MS=${JSON.stringify(grace)}: expected a whole number of milliseconds up to 3600000`);
  }
  if (problems.length > 0) return { settings: undefined, problems };
  return {
    settings: {
      key,
      queueUrl,
      webhookKeys,
      ...(maxConcurrentJobs !== undefined ? { maxConcurrentJobs } : {}),
      ...(resubmitGraceMs !== undefined ? { resubmitGraceMs } : {}),
    },
    problems,
  };
}

function readQueueUrl(raw: string | undefined, problems: string[]): string {
  if (raw === undefined) return FAL_DEFAULT_QUEUE_URL;
  try {
    const url = new URL(raw);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error('protocol');
    if (url.username || url.password || url.search || url.hash) throw new Error('extras');
    return url.href.replace(/\/+$/, '');
  } catch {
    problems.push(`FAL_QUEUE_URL=${JSON.stringify(raw)}: expected an http(s) URL without credentials, query or fragment`);
    return FAL_DEFAULT_QUEUE_URL;
  }
}

function readJwks(raw: string | undefined, problems: string[]): KeyObject[] {
  if (raw === undefined) return [];
  let text = raw;
  if (!raw.startsWith('{')) {
    try {
      if (statSync(raw).size > JWKS_FILE_MAX_BYTES) {
        problems.push(`FAL_WEBHOOK_JWKS: the file ${raw} is larger than ${JWKS_FILE_MAX_BYTES} bytes`);
        return [];
      }
      text = readFileSync(raw, 'utf8');
    } catch (error) {
      problems.push(`FAL_WEBHOOK_JWKS: neither a JWKS JSON value nor a readable file (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})`);
      return [];
    }
  }
  try {
    const keys = ed25519KeysOf(JSON.parse(text));
    if (keys.length === 0) problems.push('FAL_WEBHOOK_JWKS: holds no Ed25519 key (kty OKP, crv Ed25519)');
    return keys;
  } catch (error) {
    problems.push(`FAL_WEBHOOK_JWKS: ${error instanceof SyntaxError ? 'not valid JSON' : (error as Error).message}`);
    return [];
  }
}
