/**
 * A workspace's money as data and pure functions (docs/money.md, docs/generations.md): integer credits,
 * integer cents, never negative, every change a ledger entry, and every step idempotent per generation. The workspace actor persists the entries in the same transaction
 * as the balances, so a balance always equals the sum of its ledger.
 */
export type PaymentMode = 'credits' | 'wallet' | 'auto';
export const PAYMENT_MODES: readonly PaymentMode[] = ['credits', 'wallet', 'auto'];

export interface Reservation {
  credits: number;
  walletCents: number;
}

export interface Account {
  availableCredits: number;
  reservedCredits: number;
  walletCents: number;
  reservedWalletCents: number;
  /** Set once a first deposit of at least the minimum has cleared; wallet payments need it. */
  walletActivated: boolean;
  /**
   * The fraction of a credit (billionths) the workspace's token-priced jobs used and were not charged yet:
   * taken into the next such job's charge (domain/catalog/pricing.ts), so rounding never drifts.
   */
  tokenCarryNano: bigint;
  /**
   * The open reservations by generation. One object is shared by an account and every account a decision
   * derives from it, and an ok decision updates it in place: the caller then uses only the new account
   * (as it must anyway). A reservation thus costs O(1), not a copy of every job still open; a refused
   * decision changes nothing.
   */
  reservations: Record<string, Reservation>;
}

export type LedgerKind = 'grant' | 'reserve' | 'capture' | 'release' | 'deposit';

export interface LedgerEntry {
  kind: LedgerKind;
  /** Changes to each balance; a balance is the sum of its column over the ledger. */
  credits: number;
  reservedCredits: number;
  walletCents: number;
  reservedWalletCents: number;
  generationId?: string;
  /** The order, deposit or grant this entry applies, for idempotency of external events. */
  reference?: string;
}

export type MoneyRefusal = 'insufficient_credits' | 'wallet_insufficient_balance' | 'wallet_pending_minimum';

export type MoneyDecision = { ok: true; account: Account; entries: LedgerEntry[] } | { ok: false; code: MoneyRefusal; message: string };

export const WALLET_MINIMUM_DEPOSIT_CENTS = 1_000;

export function emptyAccount(): Account {
  return { availableCredits: 0, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0, walletActivated: false, tokenCarryNano: 0n, reservations: {} };
}

function entry(kind: LedgerKind, change: Partial<Omit<LedgerEntry, 'kind'>>): LedgerEntry {
  return { kind, credits: 0, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0, ...change };
}

function apply(account: Account, entries: LedgerEntry[], reservations: Record<string, Reservation>): Account {
  const next = { ...account, reservations };
  for (const e of entries) {
    next.availableCredits += e.credits;
    next.reservedCredits += e.reservedCredits;
    next.walletCents += e.walletCents;
    next.reservedWalletCents += e.reservedWalletCents;
  }
  return next;
}

/** Holds a generation's price: from credits, from the wallet at the plan's cents per credit, or credits first then the wallet. */
export function reserve(account: Account, generationId: string, credits: number, mode: PaymentMode, centsPerCredit: number): MoneyDecision {
  return commitReservation(account, generationId, planReservation(account, generationId, credits, mode, centsPerCredit));
}

type ReservationPlan = { ok: true; reservation: Reservation | undefined; entries: LedgerEntry[] } | { ok: false; code: MoneyRefusal; message: string };

/** What reserving would do, without doing it; `reservation` is undefined when the generation already holds one. */
function planReservation(account: Account, generationId: string, credits: number, mode: PaymentMode, centsPerCredit: number): ReservationPlan {
  if (!Number.isInteger(credits) || credits < 0) throw new Error(`a price must be a whole number of credits, got ${credits}`);
  if (account.reservations[generationId]) return { ok: true, reservation: undefined, entries: [] };

  let fromCredits = 0;
  let walletCents = 0;
  if (mode === 'credits') {
    if (account.availableCredits < credits) {
      return { ok: false, code: 'insufficient_credits', message: `This job costs ${credits} credits; ${account.availableCredits} are available.` };
    }
    fromCredits = credits;
  } else {
    fromCredits = mode === 'auto' ? Math.min(account.availableCredits, credits) : 0;
    walletCents = (credits - fromCredits) * centsPerCredit;
    if (walletCents > 0) {
      if (!account.walletActivated) {
        return mode === 'auto'
          ? {
              ok: false,
              code: 'insufficient_credits',
              message: `This job costs ${credits} credits; ${account.availableCredits} are available and the wallet is not active.`,
            }
          : { ok: false, code: 'wallet_pending_minimum', message: 'Wallet payments start after a first deposit of at least 10 dollars has cleared.' };
      }
      if (account.walletCents < walletCents) {
        return {
          ok: false,
          code: 'wallet_insufficient_balance',
          message: `This job needs ${walletCents} cents from the wallet; ${account.walletCents} are available.`,
        };
      }
    }
  }
  const reservation = { credits: fromCredits, walletCents };
  const entries = [
    entry('reserve', { generationId, credits: -fromCredits, reservedCredits: fromCredits, walletCents: -walletCents, reservedWalletCents: walletCents }),
  ];
  return { ok: true, reservation, entries };
}

function commitReservation(account: Account, generationId: string, plan: ReservationPlan): MoneyDecision {
  if (!plan.ok) return plan;
  if (!plan.reservation) return { ok: true, account, entries: [] };
  account.reservations[generationId] = plan.reservation;
  return { ok: true, account: apply(account, plan.entries, account.reservations), entries: plan.entries };
}

/** Spends what a generation held; a second capture, or a capture after release, changes nothing. */
export function capture(account: Account, generationId: string): MoneyDecision {
  return settle(account, generationId, 'capture');
}

/** Gives back what a generation held; idempotent like capture. */
export function release(account: Account, generationId: string): MoneyDecision {
  return settle(account, generationId, 'release');
}

function settle(account: Account, generationId: string, kind: 'capture' | 'release'): MoneyDecision {
  const held = account.reservations[generationId];
  if (!held) return { ok: true, account, entries: [] };
  delete account.reservations[generationId];
  const back = kind === 'release';
  const entries = [
    entry(kind, {
      generationId,
      reservedCredits: -held.credits,
      reservedWalletCents: -held.walletCents,
      credits: back ? held.credits : 0,
      walletCents: back ? held.walletCents : 0,
    }),
  ];
  return { ok: true, account: apply(account, entries, account.reservations), entries };
}

/**
 * Spends `credits` of the `reserved` credits a generation held and gives the rest back (a token-priced job
 * that used less than it reserved): the spent part from its reserved credits first, then from its reserved
 * wallet cents at the rate it was reserved at. Two entries: the capture, and the release of the rest.
 */
export function capturePart(account: Account, generationId: string, credits: number, reserved: number): MoneyDecision {
  const held = account.reservations[generationId];
  if (!held) return { ok: true, account, entries: [] };
  if (!Number.isInteger(credits) || credits < 0 || credits > reserved)
    throw new Error(`a capture must be a whole number of credits up to the ${reserved} reserved, got ${credits}`);
  delete account.reservations[generationId];
  const fromCredits = Math.min(credits, held.credits);
  const walletCredits = reserved - held.credits;
  const walletCents = walletCredits > 0 ? ((credits - fromCredits) * held.walletCents) / walletCredits : 0;
  const entries = [entry('capture', { generationId, reservedCredits: -fromCredits, reservedWalletCents: -walletCents })];
  const backCredits = held.credits - fromCredits;
  const backCents = held.walletCents - walletCents;
  if (backCredits > 0 || backCents > 0) {
    entries.push(
      entry('release', { generationId, reservedCredits: -backCredits, credits: backCredits, reservedWalletCents: -backCents, walletCents: backCents }),
    );
  }
  return { ok: true, account: apply(account, entries, account.reservations), entries };
}

/** Adds credits (plan grant, paid top-up); `reference` makes it happen once. */
export function grant(account: Account, credits: number, reference: string): MoneyDecision {
  if (!Number.isInteger(credits) || credits <= 0) throw new Error(`a grant must be a positive whole number of credits, got ${credits}`);
  const entries = [entry('grant', { credits, reference })];
  return { ok: true, account: apply(account, entries, account.reservations), entries };
}

/** Adds cleared money to the wallet; a deposit of at least the minimum activates it. */
export function deposit(account: Account, cents: number, reference: string): MoneyDecision {
  if (!Number.isInteger(cents) || cents <= 0) throw new Error(`a deposit must be a positive whole number of cents, got ${cents}`);
  const entries = [entry('deposit', { walletCents: cents, reference })];
  const next = apply(account, entries, account.reservations);
  next.walletActivated = account.walletActivated || cents >= WALLET_MINIMUM_DEPOSIT_CENTS;
  return { ok: true, account: next, entries };
}

/** The balances a ledger adds up to; the invariant tests and audits check against it. */
export function sumLedger(entries: LedgerEntry[]): Pick<Account, 'availableCredits' | 'reservedCredits' | 'walletCents' | 'reservedWalletCents'> {
  const total = { availableCredits: 0, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0 };
  for (const e of entries) {
    total.availableCredits += e.credits;
    total.reservedCredits += e.reservedCredits;
    total.walletCents += e.walletCents;
    total.reservedWalletCents += e.reservedWalletCents;
  }
  return total;
}

/** The wallet's settings (PATCH /v1/wallet); amounts in cents. */
export interface WalletSettings {
  autoRecharge: { enabled: boolean; thresholdCents: number; amountCents: number };
  /** Wallet spending allowed per UTC calendar month; null for no cap. */
  monthlySpendCapCents: number | null;
}

export function defaultWalletSettings(): WalletSettings {
  return { autoRecharge: { enabled: false, thresholdCents: 0, amountCents: 0 }, monthlySpendCapCents: null };
}

/** What the wallet has paid this UTC month: reservations less releases, so a refunded job does not count. */
export interface MonthlySpend {
  /** `YYYY-MM`. */
  month: string;
  spentCents: number;
}

export function monthOf(now: number): string {
  return new Date(now).toISOString().slice(0, 7);
}

/** The spend as of `now`: a new month starts again from zero. */
export function spendAt(spend: MonthlySpend, now: number): MonthlySpend {
  const month = monthOf(now);
  return spend.month === month ? spend : { month, spentCents: 0 };
}

/** An API key's wallet spend cap (domain/key-limits.ts): what it allows, what the key spent, and the refusal's words. */
export interface KeyWalletCap {
  capCents: number;
  spentCents: number;
  message(fromWallet: number): string;
}

/**
 * reserve, then the API key's wallet cap if it has one, then the monthly spend cap: a wallet part that would take the month's spend past the cap is
 * refused as wallet_insufficient_balance (the cap makes that money unavailable this month).
 */
export function reserveWithinCap(
  account: Account,
  generationId: string,
  credits: number,
  mode: PaymentMode,
  centsPerCredit: number,
  capCents: number | null,
  spend: MonthlySpend,
  keyCap?: KeyWalletCap,
): MoneyDecision {
  const plan = planReservation(account, generationId, credits, mode, centsPerCredit);
  if (!plan.ok || (capCents === null && !keyCap)) return commitReservation(account, generationId, plan);
  const fromWallet = plan.entries.reduce((sum, e) => sum + e.reservedWalletCents, 0);
  if (keyCap && fromWallet > 0 && keyCap.spentCents + fromWallet > keyCap.capCents) {
    return { ok: false, code: 'wallet_insufficient_balance', message: keyCap.message(fromWallet) };
  }
  if (capCents !== null && fromWallet > 0 && spend.spentCents + fromWallet > capCents) {
    return {
      ok: false,
      code: 'wallet_insufficient_balance',
      message: `This job needs ${fromWallet} cents from the wallet; the monthly spend cap of ${capCents} cents leaves ${Math.max(0, capCents - spend.spentCents)} this month.`,
    };
  }
  return commitReservation(account, generationId, plan);
}

/** How a ledger change moves the month's wallet spend: money leaving the wallet for a reservation counts, money released back uncounts. */
export function spendChange(entries: LedgerEntry[]): number {
  let change = 0;
  for (const e of entries) if (e.kind === 'reserve' || e.kind === 'release') change -= e.walletCents;
  return change;
}

/** Whether to start an automatic deposit: enabled, wallet active, balance under the threshold, none already under way. */
export function needsAutoRecharge(account: Account, settings: WalletSettings, rechargeUnderWay: boolean): boolean {
  const auto = settings.autoRecharge;
  return (
    auto.enabled &&
    !rechargeUnderWay &&
    account.walletActivated &&
    auto.amountCents >= WALLET_MINIMUM_DEPOSIT_CENTS &&
    account.walletCents < auto.thresholdCents
  );
}

/** Settings a client may store: whole cents, a recharge at least the minimum deposit when enabled. */
export function checkWalletSettings(settings: WalletSettings): string | undefined {
  const { enabled, thresholdCents, amountCents } = settings.autoRecharge;
  for (const [name, value] of [
    ['autoRecharge.thresholdCents', thresholdCents],
    ['autoRecharge.amountCents', amountCents],
    ['monthlySpendCapCents', settings.monthlySpendCapCents ?? 0],
  ] as const) {
    if (!Number.isInteger(value) || value < 0 || value > 100_000_000) return `${name}: must be a whole number of cents from 0 to 100000000`;
  }
  if (enabled && amountCents < WALLET_MINIMUM_DEPOSIT_CENTS)
    return `autoRecharge.amountCents: must be at least ${WALLET_MINIMUM_DEPOSIT_CENTS} cents when auto-recharge is enabled`;
  if (enabled && thresholdCents <= 0) return 'autoRecharge.thresholdCents: must be above 0 when auto-recharge is enabled';
  return undefined;
}
