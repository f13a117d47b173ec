/**
 * Per-key spending controls as data and pure functions: what an API key may spend per UTC day or month
 * (credits, and wallet cents), how many of its generations may be unfinished at once, and which models it
 * may use. The workspace actor holds a KeySpend per key it has seen and decides every create against it,
 * so the figures are exact however many creates arrive at once.
 */
export type BudgetPeriod = 'day' | 'month';
export const BUDGET_PERIODS: readonly BudgetPeriod[] = ['day', 'month'];

export interface KeyLimits {
  /** Credits (the models' prices) the key's generations may take per period, whatever pays them; null: no budget. */
  creditBudget: number | null;
  /** Wallet cents the key's generations may take per period; null: no cap. */
  walletSpendCapCents: number | null;
  /** The period of both the credit budget and the wallet cap; resets at the start of each UTC day or month. */
  period: BudgetPeriod;
  /** Unfinished (queued or running) generations of the key at a time; null: only the plan's limits. */
  maxConcurrentGenerations: number | null;
  /** Model ids the key may use; null: every model of the plan. */
  allowedModels: string[] | null;
}

export function noKeyLimits(): KeyLimits {
  return { creditBudget: null, walletSpendCapCents: null, period: 'month', maxConcurrentGenerations: null, allowedModels: null };
}

/** What a key's generations took in one period: reservations less releases, so a refunded job does not count. */
export interface PeriodSpend {
  /** The period's first day, `YYYY-MM-DD` (a month's is its first). */
  start: string;
  credits: number;
  walletCents: number;
}

export interface KeySpend {
  limits: KeyLimits;
  day: PeriodSpend;
  month: PeriodSpend;
  /** Generations of the key accepted and not yet finished. */
  unfinished: number;
}

/** What one unfinished generation counts against its key, to give back if it is released. */
export interface KeyJob {
  keyId: string;
  day: string;
  month: string;
  credits: number;
  walletCents: number;
}

/** A change of a key's spend row (table api_key_spend). */
export interface KeySpendDelta {
  keyId: string;
  workspaceId: string;
  period: BudgetPeriod;
  start: string;
  credits: number;
  walletCents: number;
}

export function dayStart(now: number): string {
  return new Date(now).toISOString().slice(0, 10);
}

export function monthStart(now: number): string {
  return `${new Date(now).toISOString().slice(0, 7)}-01`;
}

export function periodStart(period: BudgetPeriod, now: number): string {
  return period === 'day' ? dayStart(now) : monthStart(now);
}

/** When the period holding `now` ends (the next one starts), in ms since the epoch. */
export function periodEnd(period: BudgetPeriod, now: number): number {
  const d = new Date(now);
  return period === 'day' ? Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1) : Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** The key's spend in `period` as of `now`: a new period starts again from zero. */
export function spentIn(key: KeySpend, period: BudgetPeriod, now: number): PeriodSpend {
  const start = periodStart(period, now);
  const spend = key[period];
  return spend.start === start ? spend : { start, credits: 0, walletCents: 0 };
}

const PERIOD_WORD: Record<BudgetPeriod, string> = { day: 'daily', month: 'monthly' };

/**
 * Whether the key lets a generation of `modelId` costing `credits` be created now; the refusal's code and
 * message if not. The wallet cap is checked once the payment is known (walletCapOf).
 */
export function refuseByKey(
  key: KeySpend,
  modelId: string,
  credits: number,
  now: number,
): { code: 'plan_limit_reached' | 'insufficient_credits'; message: string } | undefined {
  const { limits } = key;
  if (limits.allowedModels !== null && !limits.allowedModels.includes(modelId)) {
    return { code: 'plan_limit_reached', message: `This API key may not use model ${modelId}; it is limited to ${limits.allowedModels.join(', ')}.` };
  }
  if (limits.maxConcurrentGenerations !== null && key.unfinished >= limits.maxConcurrentGenerations) {
    return {
      code: 'plan_limit_reached',
      message: `This API key allows ${limits.maxConcurrentGenerations} unfinished generations at a time, and has ${key.unfinished}; try again when one finishes.`,
    };
  }
  if (limits.creditBudget !== null) {
    const spent = spentIn(key, limits.period, now).credits;
    if (spent + credits > limits.creditBudget) {
      const left = Math.max(0, limits.creditBudget - spent);
      const resets = new Date(periodEnd(limits.period, now)).toISOString();
      return {
        code: 'insufficient_credits',
        message:
          left === 0
            ? `This API key's ${PERIOD_WORD[limits.period]} credit budget of ${limits.creditBudget} is spent; it resets at ${resets}.`
            : `This job costs ${credits} credits; this API key's ${PERIOD_WORD[limits.period]} credit budget of ${limits.creditBudget} has ${left} left; it resets at ${resets}.`,
      };
    }
  }
  return undefined;
}

/** The key's wallet cap for the reservation to respect, if it has one. */
export function walletCapOf(key: KeySpend, now: number): { capCents: number; spentCents: number; message(fromWallet: number): string } | undefined {
  const { limits } = key;
  if (limits.walletSpendCapCents === null) return undefined;
  const cap = limits.walletSpendCapCents;
  const spentCents = spentIn(key, limits.period, now).walletCents;
  const resets = new Date(periodEnd(limits.period, now)).toISOString();
  return {
    capCents: cap,
    spentCents,
    message: (fromWallet) =>
      `This job needs ${fromWallet} cents from the wallet; this API key's ${PERIOD_WORD[limits.period]} wallet spend cap of ${cap} cents leaves ${Math.max(0, cap - spentCents)}; it resets at ${resets}.`,
  };
}

/**
 * Counts an accepted generation against its key (in place): its price and wallet part in the current day
 * and month, one more unfinished. Returns what it counted (to give back on release) and the rows' deltas.
 */
export function chargeKey(
  key: KeySpend,
  keyId: string,
  workspaceId: string,
  credits: number,
  walletCents: number,
  now: number,
): { job: KeyJob; deltas: KeySpendDelta[] } {
  const day = spentIn(key, 'day', now);
  const month = spentIn(key, 'month', now);
  key.day = { start: day.start, credits: day.credits + credits, walletCents: day.walletCents + walletCents };
  key.month = { start: month.start, credits: month.credits + credits, walletCents: month.walletCents + walletCents };
  key.unfinished++;
  const job = { keyId, day: day.start, month: month.start, credits, walletCents };
  return { job, deltas: spendDeltas(job, workspaceId, 1) };
}

/**
 * A key's generation finished (in place): one less unfinished and, if its money was released, its price and
 * wallet part back to the periods it was counted in (in memory only while they are still current).
 */
/**
 * A job of the key ended: it no longer counts as unfinished, and what its settlement gave back (all of it on a
 * release, the unused part of a token-priced job's reservation on its capture) leaves the key's spend.
 */
export function settleKey(
  key: KeySpend | undefined,
  job: KeyJob,
  workspaceId: string,
  back: { credits: number; walletCents: number } | undefined,
): KeySpendDelta[] {
  if (key) key.unfinished = Math.max(0, key.unfinished - 1);
  if (!back || (back.credits === 0 && back.walletCents === 0)) return [];
  const given = { ...job, credits: back.credits, walletCents: back.walletCents };
  if (key) {
    if (key.day.start === job.day) key.day = { ...key.day, credits: key.day.credits - given.credits, walletCents: key.day.walletCents - given.walletCents };
    if (key.month.start === job.month)
      key.month = { ...key.month, credits: key.month.credits - given.credits, walletCents: key.month.walletCents - given.walletCents };
  }
  return spendDeltas(given, workspaceId, -1);
}

function spendDeltas(job: KeyJob, workspaceId: string, sign: 1 | -1): KeySpendDelta[] {
  if (job.credits === 0 && job.walletCents === 0) return [];
  return (['day', 'month'] as const).map((period) => ({
    keyId: job.keyId,
    workspaceId,
    period,
    start: job[period],
    credits: sign * job.credits,
    walletCents: sign * job.walletCents,
  }));
}

/** A key's figures for GET /v1/api-keys/:id/usage. */
export interface KeyLimitFigure {
  limit: number | null;
  spent: number;
  remaining: number | null;
  resetsAt: string | null;
}

export interface KeyLimitsUsage {
  period: BudgetPeriod;
  creditBudget: KeyLimitFigure;
  walletSpendCapCents: KeyLimitFigure;
  concurrentGenerations: KeyLimitFigure;
  allowedModels: string[] | null;
}

export function keyLimitsUsage(key: KeySpend, now: number): KeyLimitsUsage {
  const { limits } = key;
  const spend = spentIn(key, limits.period, now);
  const resetsAt = new Date(periodEnd(limits.period, now)).toISOString();
  const figure = (limit: number | null, spent: number, resets: string | null): KeyLimitFigure => ({
    limit,
    spent,
    remaining: limit === null ? null : Math.max(0, limit - spent),
    resetsAt: resets,
  });
  return {
    period: limits.period,
    creditBudget: figure(limits.creditBudget, spend.credits, resetsAt),
    walletSpendCapCents: figure(limits.walletSpendCapCents, spend.walletCents, resetsAt),
    concurrentGenerations: figure(limits.maxConcurrentGenerations, key.unfinished, null),
    allowedModels: limits.allowedModels,
  };
}

/** A change of a key's limits; fields left out keep their value, null clears a limit. */
export type KeyLimitsPatch = Partial<KeyLimits>;

export function patchKeyLimits(limits: KeyLimits, patch: KeyLimitsPatch): KeyLimits {
  const next = { ...limits };
  for (const name of Object.keys(patch) as Array<keyof KeyLimits>) {
    if (patch[name] !== undefined) (next as Record<string, unknown>)[name] = patch[name];
  }
  return next;
}
