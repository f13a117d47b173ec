import { messagesBytes } from './chat.ts';
/**
 * What a job costs, in whole credits, by the unit its model is priced in (docs/money.md, "Prices"):
 * - per job, per image (numImages), per started second of output (durationSeconds rounded up): known at
 *   creation, reserved then and captured whole on success;
 * - per 1,000 input and output tokens (text): the most the job can cost is reserved at creation (its prompt's
 *   bound and its maxTokens); when it ends, what the provider reported using is captured and the rest released.
 *
 * Token prices may be fractions of a credit. The exact cost is kept in billionths of a credit; a job is
 * charged the whole credits of (its exact cost + the workspace's carry), rounded down, and the fraction left
 * over is the new carry, taken into the next job's charge. So the sum charged over any run of jobs is the sum
 * of their exact costs rounded down (never more, less by under one credit), and one job is never charged more
 * than one credit above its exact cost. A job is never charged more than it reserved: a provider reporting
 * more tokens than the reservation allowed is charged the reservation (the excess, and the carry, forgiven).
 */
export type Price = { per: 'job' | 'image' | 'second'; credits: number } | { per: 'tokens'; inputPer1k: number; outputPer1k: number };

/** The price terms a token-priced job keeps from its creation (the catalog may change while it runs). */
export interface TokenTerms {
  /** Credits per 1,000 tokens, in millionths (so exact integers). */
  inputMicroPer1k: number;
  outputMicroPer1k: number;
}

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

/** Billionths of a credit in one credit. */
export const NANO = 1_000_000_000n;

/** Tokens a chat request adds around its messages (roles, separators), counted as input. */
const MESSAGE_OVERHEAD_TOKENS = 8;
/** Tokens each message of a conversation adds (its role and separators; OpenAI's chat format spends 3 to 4). */
const PER_MESSAGE_TOKENS = 8;

export function isTokenPrice(price: Price): price is Extract<Price, { per: 'tokens' }> {
  return price.per === 'tokens';
}

/** A per-1k price as an integer count of millionths; undefined when it has more than six decimals. */
export function microOf(per1k: number): number | undefined {
  const micro = Math.round(per1k * 1_000_000);
  return Math.abs(micro / 1_000_000 - per1k) < 1e-12 && Number.isSafeInteger(micro) ? micro : undefined;
}

export function tokenTermsOf(price: Extract<Price, { per: 'tokens' }>): TokenTerms {
  return { inputMicroPer1k: microOf(price.inputPer1k) ?? 0, outputMicroPer1k: microOf(price.outputPer1k) ?? 0 };
}

/**
 * The most input tokens a prompt can be: every token of the tokenisers in use (byte-pair encodings) covers at
 * least one byte of UTF-8, so the bytes of the prompt and the system prompt, plus the messages' overhead.
 */
export function inputTokenBound(params: Record<string, unknown>): number {
  const bytes = (value: unknown) => (typeof value === 'string' ? Buffer.byteLength(value, 'utf8') : 0);
  // A conversation (the OpenAI-compatible door) is sent as its messages, with its tools' definitions.
  if (Array.isArray(params.messages)) {
    const conversation = messagesBytes(params.messages);
    const tools = params.tools === undefined ? 0 : Buffer.byteLength(JSON.stringify(params.tools), 'utf8');
    return conversation.bytes + tools + conversation.count * PER_MESSAGE_TOKENS + MESSAGE_OVERHEAD_TOKENS;
  }
  return bytes(params.prompt) + bytes(params.systemPrompt) + MESSAGE_OVERHEAD_TOKENS;
}

/** The exact cost of some tokens, in billionths of a credit. */
export function exactNano(terms: TokenTerms, usage: TokenUsage): bigint {
  // (micro-credits per 1,000 tokens) × tokens = billionths of a credit.
  return BigInt(terms.inputMicroPer1k) * BigInt(usage.inputTokens) + BigInt(terms.outputMicroPer1k) * BigInt(usage.outputTokens);
}

/** Whole credits, rounded up, of a cost in billionths. */
function ceilCredits(nano: bigint): number {
  return Number((nano + NANO - 1n) / NANO);
}

/** What a job reserves at creation: its whole price, or for tokens the most it can cost, rounded up. */
export function reservationOf(price: Price, params: Record<string, unknown>): number {
  switch (price.per) {
    case 'job':
      return price.credits;
    case 'image':
      return price.credits * (typeof params.numImages === 'number' ? params.numImages : 1);
    case 'second':
      return price.credits * Math.ceil(typeof params.durationSeconds === 'number' ? params.durationSeconds : 1);
    case 'tokens': {
      const maxTokens = typeof params.maxTokens === 'number' ? params.maxTokens : 0;
      return ceilCredits(exactNano(tokenTermsOf(price), { inputTokens: inputTokenBound(params), outputTokens: maxTokens }));
    }
  }
}

export interface TokenCharge {
  /** Whole credits captured; the rest of the reservation is released. */
  credits: number;
  /** The workspace's carry after this job, billionths of a credit, 0 ≤ carry < one credit. */
  carryNano: bigint;
  /** Whether the usage cost more than the reservation (charged the reservation). */
  capped: boolean;
}

/** The charge of a token-priced job that reported `usage`, given its reservation and the workspace's carry. */
export function tokenCharge(terms: TokenTerms, usage: TokenUsage, reserved: number, carryNano: bigint): TokenCharge {
  const safe = (n: number) => (Number.isSafeInteger(n) && n > 0 ? n : 0);
  const owed = exactNano(terms, { inputTokens: safe(usage.inputTokens), outputTokens: safe(usage.outputTokens) }) + carryNano;
  const whole = owed / NANO;
  if (whole > BigInt(reserved)) return { credits: reserved, carryNano: 0n, capped: true };
  return { credits: Number(whole), carryNano: owed - whole * NANO, capped: false };
}
