/**
 * What a production start refuses in its secrets (docs/operations.md, Secrets in production). With
 * NODE_ENV=production, each secret the service keys or signs with must be at least 32 characters, carry at
 * least 96 bits by the estimate below and not be one piece repeated, and be no placeholder: the examples the project ships (deploy/.env.example,
 * the Kubernetes example overlay) say `change-me` or `replace-with`, and a value that says so, or any other
 * placeholder word, is refused. The passwords inside DATABASE_URL and REDIS_URL and S3_SECRET_ACCESS_KEY belong
 * to other systems, whose own rules size them: only placeholders are refused there. Messages name the
 * variable, never its value.
 */

/** The secrets the service itself keys and signs with, and their documented minimum. */
export const OWN_SECRETS = ['CLUSTER_SECRET', 'WEBHOOK_SECRET_KEY', 'BILLING_SIGNING_SECRET', 'BLOB_SIGNING_SECRET'] as const;
export const MIN_SECRET_LENGTH = 32;
/** By estimatedBits: 32 random hex characters (128 bits) score 110 or more, so a genuine 32-character hex secret passes. */
export const MIN_SECRET_BITS = 96;

/** Words of placeholders: the shipped examples' (`replace-with-…`, `…-change-me-…`, `<password>` in the docs' commands) and the usual others. */
const PLACEHOLDER = /replace[-_ ]?with|change[-_ ]?me|changeit|placeholder|your[-_]?secret|example[-_]?secret|<[^<>]+>|^(?:secret|password|xxx+|todo)$/i;

/**
 * The strength of a random string, estimated: its length times the entropy per character of the alphabet its
 * characters come from (lower case, upper case, digits, others: 26, 26, 10, 33 symbols), capped by the
 * Shannon entropy of the characters it actually uses, so that a long run of few characters counts little.
 * `openssl rand -hex 32` gives about 250 bits; 32 random base64 characters about 150 to 190.
 */
export function estimatedBits(value: string): number {
  if (value.length === 0) return 0;
  let alphabet = 0;
  if (/[a-z]/.test(value)) alphabet += 26;
  if (/[A-Z]/.test(value)) alphabet += 26;
  if (/[0-9]/.test(value)) alphabet += 10;
  if (/[^a-zA-Z0-9]/.test(value)) alphabet += 33;
  const counts = new Map<string, number>();
  for (const char of value) counts.set(char, (counts.get(char) ?? 0) + 1);
  let shannon = 0;
  for (const n of counts.values()) {
    const p = n / value.length;
    shannon -= p * Math.log2(p);
  }
  // Hex of a random value uses 16 symbols, not the 36 of its classes: the Shannon figure holds it at about 4 bits.
  return value.length * Math.min(Math.log2(alphabet), shannon + 0.5);
}

function passwordOf(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    return decodeURIComponent(new URL(url).password) || undefined;
  } catch {
    return undefined;
  }
}

/** Every problem of the secrets in `env` for a production start (none when NODE_ENV is not production). */
export function productionSecretProblems(env: Readonly<Record<string, string | undefined>>): string[] {
  if (env.NODE_ENV !== 'production') return [];
  const problems: string[] = [];
  for (const name of OWN_SECRETS) {
    const value = env[name]?.trim();
    if (!value) continue;
    if (PLACEHOLDER.test(value))
      problems.push(`${name}: a placeholder (a shipped example's value), refused in production: generate one with openssl rand -hex 32`);
    else if (value.length < MIN_SECRET_LENGTH) problems.push(`${name}: shorter than ${MIN_SECRET_LENGTH} characters, refused in production`);
    else if (estimatedBits(value) < MIN_SECRET_BITS || /^(.+?)\1+$/.test(value))
      problems.push(
        `${name}: too little randomness (under ${MIN_SECRET_BITS} bits by its characters), refused in production: generate one with openssl rand -hex 32`,
      );
  }
  const others: Array<[string, string | undefined]> = [
    ['DATABASE_URL', passwordOf(env.DATABASE_URL)],
    ['REDIS_URL', passwordOf(env.REDIS_URL)],
    ['S3_SECRET_ACCESS_KEY', env.S3_SECRET_ACCESS_KEY?.trim()],
  ];
  for (const [name, value] of others) {
    if (value && PLACEHOLDER.test(value)) problems.push(`${name}: its password is a placeholder (a shipped example's value), refused in production`);
  }
  return problems;
}
