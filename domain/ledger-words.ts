/**
 * A ledger entry said in words (docs/money.md, The ledger in words): what the entry is, from its kind, its
 * amounts and what it applies. The amounts are the entry's changes of each balance.
 */
export interface LedgerAmounts {
  kind: string;
  credits: number;
  reservedCredits: number;
  walletCents: number;
  reservedWalletCents: number;
  generationId: string | null;
  reference: string | null;
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;
const dollars = (cents: number) => `$${(cents / 100).toFixed(2)}`;

/** "4 credits and $0.05" style, for the parts that are not zero; "nothing" when both are. */
function amount(credits: number, cents: number): string {
  const parts = [credits !== 0 ? plural(Math.abs(credits), 'credit') : '', cents !== 0 ? dollars(Math.abs(cents)) : ''].filter(Boolean);
  return parts.length === 0 ? 'nothing' : parts.join(' and ');
}

export function describeLedgerEntry(e: LedgerAmounts): string {
  const job = e.generationId ? `generation ${e.generationId}` : 'a generation';
  switch (e.kind) {
    case 'grant': {
      const what = e.reference?.startsWith('top:')
        ? `a credit top-up (${e.reference.slice(4)})`
        : e.reference?.startsWith('plan:')
          ? "the plan's opening credits"
          : e.reference?.startsWith('sub:')
            ? "the subscription period's credits"
            : 'a grant';
      return `${plural(e.credits, 'credit')} added: ${what}.`;
    }
    case 'deposit':
      return `${dollars(e.walletCents)} deposited into the wallet${e.reference ? ` (${e.reference.replace(/^dep:/, '')})` : ''}.`;
    case 'reserve':
      return `${amount(e.reservedCredits, e.reservedWalletCents)} held for ${job} while it runs (its most it can cost); not spent yet.`;
    case 'capture':
      return e.reservedCredits === 0 && e.reservedWalletCents === 0
        ? `${job} charged nothing: its cost was below one credit and went into the workspace's token carry.`
        : `${amount(e.reservedCredits, e.reservedWalletCents)} charged for ${job}, taken from what was held.`;
    case 'release':
      return `${amount(e.credits, e.walletCents)} given back: the unused part of what was held for ${job}.`;
    default:
      return `${e.kind} entry.`;
  }
}
