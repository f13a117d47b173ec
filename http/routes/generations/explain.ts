import { Type } from '@sinclair/typebox';
import type { ModelCatalog } from '../../../domain/catalog/index.ts';
import { exactNano, NANO } from '../../../domain/catalog/pricing.ts';
import { describeLedgerEntry } from '../../../domain/ledger-words.ts';
import type { GenerationRow } from '../../../persistence/stores/generations/reads.ts';
import type { GenerationLedgerRow, StoredCharge } from '../../../persistence/stores/generations/charge.ts';

/**
 * Why a generation cost what it cost and where it ran (docs/money.md, Why a job cost that), for
 * GET /v1/generations/:id: its price terms, what they counted, the exact cost, the credits and cents held,
 * charged and given back (its ledger entries, in words), the token carry before and after, and each
 * attempt's deployment and outcome.
 */

const Nano = (description: string) => Type.String({ pattern: '^-?[0-9]+$', description });

export const PriceOut = Type.Object(
  {
    unit: Type.Union([Type.Literal('job'), Type.Literal('image'), Type.Literal('second'), Type.Literal('tokens')]),
    termsFrom: Type.Union([Type.Literal('generation'), Type.Literal('catalog')], {
      description: "generation: the terms the job was created with (token prices are kept); catalog: the model's price now.",
    }),
    creditsPerUnit: Type.Optional(Type.Number({ description: 'job, image, second: credits per unit.' })),
    inputPer1k: Type.Optional(Type.Number({ description: 'tokens: credits per 1,000 input tokens.' })),
    outputPer1k: Type.Optional(Type.Number({ description: 'tokens: credits per 1,000 output tokens.' })),
    counted: Type.Object(
      {
        units: Type.Optional(Type.Number({ description: 'job: 1; image: the images asked; second: the seconds asked, rounded up.' })),
        inputTokens: Type.Optional(Type.Integer()),
        outputTokens: Type.Optional(Type.Integer()),
      },
      { additionalProperties: false },
    ),
    exactCost: Type.Union([Type.String(), Type.Null()], {
      description: 'The exact cost in credits, as a decimal (tokens: to the billionth); null until a token-priced job has its tokens.',
    }),
    reservedCredits: Type.Integer({ description: 'Credits held from the balance at creation (a token-priced job holds the most it can cost).' }),
    reservedWalletCents: Type.Integer({ description: 'Cents held from the wallet at creation.' }),
    chargedCredits: Type.Integer({ description: 'Charged (captured): the whole credits of the cost, whatever paid them.' }),
    chargedFromBalance: Type.Integer({ description: 'Of the charge, credits taken from the credit balance.' }),
    chargedWalletCents: Type.Integer({ description: 'Of the charge, cents taken from the wallet.' }),
    carryBeforeNano: Type.Union([Nano('The workspace’s token carry before the charge, billionths of a credit.'), Type.Null()]),
    carryAfterNano: Type.Union([Nano('The token carry after it: the fraction not charged yet, taken into the next token-priced job.'), Type.Null()]),
    capped: Type.Boolean({ description: 'The cost passed what was held, and the charge stopped there.' }),
    explanation: Type.String({ description: 'The whole of it, in words.' }),
    ledger: Type.Array(
      Type.Object(
        {
          id: Type.String(),
          kind: Type.String(),
          credits: Type.Integer(),
          reservedCredits: Type.Integer(),
          walletCents: Type.Integer(),
          reservedWalletCents: Type.Integer(),
          createdAt: Type.String({ format: 'date-time' }),
          description: Type.String(),
        },
        { additionalProperties: false },
      ),
      { description: "The generation's ledger entries (hold, charge, give-back), oldest first." },
    ),
  },
  { additionalProperties: false, description: 'Why it cost what it cost.' },
);

export const AttemptOut = Type.Object(
  {
    number: Type.Integer({ minimum: 1 }),
    deploymentId: Type.Union([Type.String(), Type.Null()]),
    provider: Type.Union([Type.String(), Type.Null()]),
    outcome: Type.String({
      description: 'failed (then tried on the next deployment), or the status the generation ended in on its last attempt (running while it runs).',
    }),
    detail: Type.Optional(Type.String()),
    at: Type.String({ format: 'date-time', description: 'When the attempt ended (the reroute), or its last change.' }),
  },
  { additionalProperties: false },
);

export const RouteOut = Type.Object(
  {
    deploymentId: Type.Union([Type.String(), Type.Null()], { description: 'The deployment it ran (or runs) on last (docs/routing.md).' }),
    provider: Type.String({ description: 'That deployment’s provider kind.' }),
    attempts: Type.Array(AttemptOut, { description: 'Each deployment it was tried on, in order; empty while it waits in the queue.' }),
  },
  { additionalProperties: false },
);

/** Billionths as a decimal string of credits, trailing zeros dropped ("0.000417", "3"). */
export function creditsOfNano(nano: bigint): string {
  const sign = nano < 0n ? '-' : '';
  const abs = nano < 0n ? -nano : nano;
  const whole = abs / NANO;
  const fraction = (abs % NANO).toString().padStart(9, '0').replace(/0+$/, '');
  return `${sign}${whole}${fraction ? `.${fraction}` : ''}`;
}

function unitsOf(per: 'job' | 'image' | 'second', params: Record<string, unknown>): number {
  if (per === 'image') return typeof params.numImages === 'number' ? params.numImages : 1;
  if (per === 'second') return Math.ceil(typeof params.durationSeconds === 'number' ? params.durationSeconds : 1);
  return 1;
}

export function priceOf(row: GenerationRow, catalog: ModelCatalog, charge: StoredCharge | null, ledger: GenerationLedgerRow[]) {
  const reserve = ledger.find((e) => e.kind === 'reserve');
  const capture = ledger.find((e) => e.kind === 'capture');
  const chargedFromBalance = capture ? -capture.reservedCredits : 0;
  const chargedWalletCents = capture ? -capture.reservedWalletCents : 0;
  const chargedCredits = capture ? row.credits : 0;
  const common = {
    reservedCredits: reserve ? reserve.reservedCredits : 0,
    reservedWalletCents: reserve ? reserve.reservedWalletCents : 0,
    chargedCredits,
    chargedFromBalance,
    chargedWalletCents,
    ledger: ledger.map((e) => ({
      id: e.id,
      kind: e.kind,
      credits: e.credits,
      reservedCredits: e.reservedCredits,
      walletCents: e.walletCents,
      reservedWalletCents: e.reservedWalletCents,
      createdAt: e.createdAt.toISOString(),
      description: describeLedgerEntry({ ...e, generationId: row.id }),
    })),
  };
  if (row.tokenTerms) {
    const terms = row.tokenTerms;
    const usage = row.usage;
    const exact = usage ? exactNano(terms, usage) : undefined;
    const inputPer1k = terms.inputMicroPer1k / 1_000_000;
    const outputPer1k = terms.outputMicroPer1k / 1_000_000;
    const words = !usage
      ? `Priced per token (${inputPer1k} credits per 1,000 input tokens, ${outputPer1k} per 1,000 output tokens); no tokens counted yet.`
      : `${usage.inputTokens} input tokens x ${inputPer1k} / 1,000 + ${usage.outputTokens} output tokens x ${outputPer1k} / 1,000 = ${creditsOfNano(exact!)} credits` +
        (charge
          ? `; with the workspace's carry of ${creditsOfNano(BigInt(charge.carryBeforeNano))} credits that is ${creditsOfNano(exact! + BigInt(charge.carryBeforeNano))}, charged ${chargedCredits} whole credit${chargedCredits === 1 ? '' : 's'}${charge.capped ? ' (capped at what was held)' : ''}, carrying ${creditsOfNano(BigInt(charge.carryAfterNano))} into the next token-priced job.`
          : `; charged ${chargedCredits} credit${chargedCredits === 1 ? '' : 's'}.`);
    return {
      unit: 'tokens' as const,
      termsFrom: 'generation' as const,
      inputPer1k,
      outputPer1k,
      counted: usage ? { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens } : {},
      exactCost: exact === undefined ? null : creditsOfNano(exact),
      carryBeforeNano: charge?.carryBeforeNano ?? null,
      carryAfterNano: charge?.carryAfterNano ?? null,
      capped: charge?.capped ?? false,
      explanation: words,
      ...common,
    };
  }
  const price = catalog.get(row.modelId)?.price;
  const per = price && price.per !== 'tokens' ? price.per : 'job';
  const creditsPerUnit = price && price.per !== 'tokens' ? price.credits : undefined;
  const units = unitsOf(per, row.params ?? {});
  const words =
    `${units} ${per}${units === 1 ? '' : 's'}${creditsPerUnit === undefined ? '' : ` x ${creditsPerUnit} credit${creditsPerUnit === 1 ? '' : 's'}`} = ${row.credits} credits, held at creation; ` +
    (capture
      ? `charged on success (${chargedFromBalance} from credits, ${chargedWalletCents} cents from the wallet).`
      : ledger.some((e) => e.kind === 'release')
        ? 'given back, as the job did not succeed.'
        : 'held until the job ends.');
  return {
    unit: per,
    termsFrom: 'catalog' as const,
    ...(creditsPerUnit === undefined ? {} : { creditsPerUnit }),
    counted: { units },
    exactCost: String(row.credits),
    carryBeforeNano: null,
    carryAfterNano: null,
    capped: false,
    explanation: words,
    ...common,
  };
}

const REROUTE = /^attempt on (\S+) failed: (.*?); trying (\S+)$/s;

/**
 * The attempts, from the timeline: each reroute names the deployment that failed and the next one
 * (actors/generation/actor.ts writes `attempt on <id> failed: <why>; trying <next>`); the last attempt is on
 * the deployment the generation holds now, with its status.
 */
export function routeOf(row: GenerationRow, deploymentProvider: (id: string) => string | undefined) {
  const attempts: Array<{ number: number; deploymentId: string | null; provider: string | null; outcome: string; detail?: string; at: string }> = [];
  for (const entry of row.timeline ?? []) {
    const match = REROUTE.exec(entry.detail ?? '');
    if (!match) continue;
    attempts.push({
      number: attempts.length + 1,
      deploymentId: match[1]!,
      provider: deploymentProvider(match[1]!) ?? null,
      outcome: 'failed',
      detail: match[2]!,
      at: entry.at,
    });
  }
  const started = row.attempts > 0 || attempts.length > 0 || row.startedAt !== null;
  if (started) {
    const last = row.timeline?.[row.timeline.length - 1];
    attempts.push({
      number: attempts.length + 1,
      deploymentId: row.deploymentId,
      provider: row.provider,
      outcome: row.status,
      ...(row.errorCode ? { detail: `${row.errorCode}: ${row.errorMessage ?? ''}`.slice(0, 300) } : {}),
      at: last?.at ?? row.updatedAt.toISOString(),
    });
  }
  return { deploymentId: row.deploymentId, provider: row.provider, attempts };
}
