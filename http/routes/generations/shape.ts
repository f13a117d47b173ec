import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { MODES } from '../../../domain/catalog/models.ts';
import { stringEnum } from '../../../domain/catalog/params.ts';
import { GENERATION_STATUSES } from '../../../domain/generation-status.ts';
import type { GenerationRow } from '../../../persistence/stores/generations/reads.ts';
import { PriceOut, RouteOut } from './explain.ts';

/** The public shape of a generation (docs/generations.md, The generation resource) and the one mapper from a stored row to it. */

export const PAYMENT_MODES = ['credits', 'wallet', 'auto'] as const;
export type PaymentMode = (typeof PAYMENT_MODES)[number];

const Time = (description: string) => Type.String({ format: 'date-time', description });
const Nullable = <T extends TSchema>(schema: T, description?: string) => Type.Union([schema, Type.Null()], description ? { description } : {});

export const GenerationMode = stringEnum(MODES, { description: 'One of the seven generation modes.' });
export const GenerationStatusName = stringEnum(GENERATION_STATUSES, {
  description: 'Generation state: queued, reserved, submitted and running until it ends succeeded, failed, cancelled or expired.',
});
export const PaymentModeName = stringEnum(PAYMENT_MODES, {
  description: '`credits` (plan and purchased credits), `wallet` (pay-as-you-go wallet), `auto` (credits first, then the wallet).',
});

export const GenerationParams = Type.Object(
  { id: Type.String({ minLength: 1, maxLength: 64, description: 'Generation id (gen_…).' }) },
  { additionalProperties: false },
);

const UrlList = (description: string) => Type.Array(Type.String(), { description });

/** Source files as given at creation; data URLs longer than DATA_URL_ECHO_LIMIT come back as a short marker. */
export const GenerationInputsOut = Type.Object(
  {
    imageAssetIds: Type.Optional(Type.Array(Type.String(), { description: 'Uploaded image assets (image modes).' })),
    videoAssetIds: Type.Optional(Type.Array(Type.String(), { description: 'Uploaded video assets (video_to_video).' })),
    imageUrls: Type.Optional(UrlList('http(s) URLs as given; a long data URL is replaced by `data:<mime>;base64,…[N characters omitted]`.')),
    videoUrls: Type.Optional(UrlList('http(s) URLs as given; a long data URL is replaced by `data:<mime>;base64,…[N characters omitted]`.')),
  },
  { additionalProperties: false },
);

export const TimelineEntryOut = Type.Object(
  {
    status: GenerationStatusName,
    at: Time('When the generation entered this state.'),
    detail: Type.Optional(Type.String({ description: 'Why, when there is more to say (e.g. who cancelled, the provider error).' })),
    sincePreviousMs: Type.Optional(
      Type.Integer({ minimum: 0, description: 'Milliseconds since the previous step (the first: since the generation was created): how long that step took.' }),
    ),
  },
  { additionalProperties: false },
);

/** The tokens a text generation used, as its provider reported them (or their upper bounds when it reported none). */
export const TokenUsageOut = Type.Object(
  {
    inputTokens: Type.Integer({ minimum: 0, description: 'Tokens of the prompt and system prompt.' }),
    outputTokens: Type.Integer({ minimum: 0, description: 'Tokens of the answer.' }),
  },
  { additionalProperties: false, description: "A token-priced generation's tokens, once it succeeded; what its `credits` were charged by." },
);

const generationFields = {
  id: Type.String({ description: 'gen_…' }),
  workspaceId: Type.String(),
  apiKeyId: Nullable(Type.String(), 'The API key that created it; null when created from the dashboard.'),
  mode: GenerationMode,
  modelId: Type.String(),
  status: GenerationStatusName,
  credits: Type.Integer({ minimum: 0, description: 'Credits charged (reserved until the generation succeeds; released otherwise).' }),
  textOutput: Nullable(Type.String(), 'The answer of a text generation.'),
  outputAssetIds: Type.Array(Type.String(), { description: 'Output assets, once succeeded.' }),
  errorCode: Nullable(Type.String(), 'Set when status is failed.'),
  errorMessage: Nullable(Type.String(), 'Set when status is failed.'),
  startedAt: Nullable(Time('When the provider started the job.')),
  completedAt: Nullable(Time('When the generation reached a terminal state.')),
  createdAt: Time('When the generation was accepted.'),
  updatedAt: Time('Last change of state.'),
  params: Type.Record(Type.String(), Type.Unknown(), { description: "The params as validated against the model's parameterSchema, defaults filled in." }),
  inputs: GenerationInputsOut,
  paymentMode: PaymentModeName,
  project: Nullable(Type.String(), 'Free label given at creation; a list filter.'),
  usage: Type.Optional(TokenUsageOut),
};

/** A generation as lists show it. */
export const GenerationOut = Type.Object(generationFields, { additionalProperties: false });
export type GenerationOut = Static<typeof GenerationOut>;

/** One generation with its event timeline, oldest first. */
export const GenerationDetailOut = Type.Object(
  {
    ...generationFields,
    timeline: Type.Array(TimelineEntryOut, { description: 'Every state the generation went through, oldest first.' }),
    price: Type.Optional(PriceOut),
    route: Type.Optional(RouteOut),
  },
  { additionalProperties: false },
);
export type GenerationDetailOut = Static<typeof GenerationDetailOut>;

/** Data URLs up to this length are echoed as given; longer ones are replaced by a marker. */
export const DATA_URL_ECHO_LIMIT = 128;

/** A data URL too long to echo becomes `data:image/png;base64,…[123456 characters omitted]`. */
export function redactDataUrl(url: string): string {
  if (!url.startsWith('data:') || url.length <= DATA_URL_ECHO_LIMIT) return url;
  const comma = url.indexOf(',');
  const header = comma >= 0 && comma < 200 ? url.slice(0, comma + 1) : 'data:';
  return `${header}…[${url.length - header.length} characters omitted]`;
}

function stringArray(value: unknown): string[] | undefined {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : undefined;
}

/** Only the known input keys, so nothing else the write side stores alongside them leaks. */
export function toInputsOut(inputs: Record<string, unknown> | null | undefined): Static<typeof GenerationInputsOut> {
  const out: Static<typeof GenerationInputsOut> = {};
  if (!inputs) return out;
  const imageAssetIds = stringArray(inputs.imageAssetIds);
  const videoAssetIds = stringArray(inputs.videoAssetIds);
  const imageUrls = stringArray(inputs.imageUrls);
  const videoUrls = stringArray(inputs.videoUrls);
  if (imageAssetIds) out.imageAssetIds = imageAssetIds;
  if (videoAssetIds) out.videoAssetIds = videoAssetIds;
  if (imageUrls) out.imageUrls = imageUrls.map(redactDataUrl);
  if (videoUrls) out.videoUrls = videoUrls.map(redactDataUrl);
  return out;
}

function iso(date: Date | null | undefined): string | null {
  return date ? date.toISOString() : null;
}

/** The one mapper from a stored generation to its public shape (list item). */
export function toGenerationOut(row: GenerationRow): GenerationOut {
  return {
    id: row.id,
    workspaceId: row.workspaceId,
    apiKeyId: row.apiKeyId ?? null,
    mode: row.mode as GenerationOut['mode'],
    modelId: row.modelId,
    status: row.status as GenerationOut['status'],
    credits: row.credits,
    textOutput: row.textOutput ?? null,
    outputAssetIds: [...(row.outputAssetIds ?? [])],
    errorCode: row.errorCode ?? null,
    errorMessage: row.errorMessage ?? null,
    startedAt: iso(row.startedAt),
    completedAt: iso(row.completedAt),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    params: { ...(row.params ?? {}) },
    inputs: toInputsOut(row.inputs),
    paymentMode: row.paymentMode as GenerationOut['paymentMode'],
    project: row.project ?? null,
    ...(row.usage ? { usage: { inputTokens: row.usage.inputTokens, outputTokens: row.usage.outputTokens } } : {}),
  };
}

/** A stored generation with its timeline, for the detail (and the answers of create and cancel). */
export function toGenerationDetailOut(row: GenerationRow): GenerationDetailOut {
  let previous = row.createdAt.getTime();
  return {
    ...toGenerationOut(row),
    timeline: (row.timeline ?? []).map((entry) => {
      const at = Date.parse(entry.at);
      const sincePreviousMs = Number.isNaN(at) || Number.isNaN(previous) ? 0 : Math.max(0, at - previous);
      if (!Number.isNaN(at)) previous = at;
      return {
        status: entry.status as GenerationDetailOut['status'],
        at: entry.at,
        ...(entry.detail !== undefined ? { detail: entry.detail } : {}),
        sincePreviousMs,
      };
    }),
  };
}
