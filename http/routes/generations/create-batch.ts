import { Type, type Static } from '@sinclair/typebox';
import { ApiError, ERRORS, isApiError, type ErrorCode } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { namedWorkspace } from '../../owner.ts';
import { compileBody, describeErrors } from '../../validation.ts';
import { ErrorEnvelope } from '../../schemas/common.ts';
import { enterWorkspace } from '../workspaces/access.ts';
import type { CreateItem } from '../../../actors/workspace/protocol.ts';
import { CreateGenerationIn } from './create.ts';
import { checkModel, orderOf, requestHash, type GenerationRequest } from './draft.ts';
import { GenerationDetailOut, toGenerationDetailOut } from './shape.ts';

/** The most generations one batch may create. */
export const MAX_BATCH_ITEMS = 100;

const { workspaceId: _workspaceId, ...itemFields } = CreateGenerationIn.properties;

/** One item: the body of POST /v1/generations without its workspaceId (the batch's), with its own idempotency key. */
export const BatchGenerationItemIn = Type.Object(
  {
    ...itemFields,
    idempotencyKey: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        pattern: '^[!-~]+$',
        description: "The item's Idempotency-Key: the same rules and store as the header of POST /v1/generations (24 hours, per workspace).",
      }),
    ),
  },
  { additionalProperties: false },
);
type BatchGenerationItem = Static<typeof BatchGenerationItemIn>;

export const CreateGenerationBatchIn = Type.Object(
  {
    workspaceId: Type.String({ minLength: 1, maxLength: 64 }),
    items: Type.Array(
      // Any value is taken into the batch: one that is not an item is refused alone (validation_error in its result).
      Type.Union([BatchGenerationItemIn, Type.Unknown({ description: 'Anything else: refused on its own with validation_error in its result.' })]),
      { minItems: 1, maxItems: MAX_BATCH_ITEMS, description: `1 to ${MAX_BATCH_ITEMS} generations to create, each accepted or refused on its own.` },
    ),
  },
  { additionalProperties: false },
);

const ItemError = Type.Object({ error: ErrorEnvelope.properties.error }, { additionalProperties: false });

export const BatchItemResultOut = Type.Union([
  Type.Object(
    {
      status: Type.Literal(201),
      replayed: Type.Boolean({ description: 'True when the item repeats an earlier request with the same idempotencyKey: `body` is its generation.' }),
      body: GenerationDetailOut,
    },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      status: Type.Integer({ minimum: 400, maximum: 599, description: 'What POST /v1/generations would have answered for this item.' }),
      body: ItemError,
    },
    { additionalProperties: false },
  ),
]);

export const CreateGenerationBatchOut = Type.Object(
  {
    results: Type.Array(BatchItemResultOut, { description: 'One result per item, in the order of `items`.' }),
    created: Type.Integer({ description: 'Items that made a new generation.' }),
    replayed: Type.Integer({ description: 'Items answered with the generation of an earlier request (idempotencyKey).' }),
    refused: Type.Integer({ description: 'Items refused (status 4xx).' }),
  },
  { additionalProperties: false },
);
type ItemResult = Static<typeof BatchItemResultOut>;

const validateItem = compileBody(BatchGenerationItemIn);

export const createGenerationBatch = defineRoute({
  method: 'POST',
  path: '/v1/generations/batch',
  operationId: 'createGenerationBatch',
  summary: `Create up to ${MAX_BATCH_ITEMS} generations of one workspace; each item is accepted or refused on its own`,
  description:
    'Creates up to 100 generations of one workspace in one request. Each item is accepted or refused on its own, with its own status and error envelope in the 200 answer; the request as a whole is refused only for its shape, its caller or a platform-wide pause.',
  tags: ['generations'],
  access: { scopes: ['generations.write'] },
  errors: ['not_found', 'generation_paused'],
  owner: namedWorkspace,
  body: CreateGenerationBatchIn,
  responses: { 200: CreateGenerationBatchOut },
  handler: async ({ body, auth, services, requestId }) => {
    if (services.switches.generationPaused().paused) throw new ApiError('generation_paused');
    const workspaceId = body.workspaceId;
    await enterWorkspace(() => openUnit(services.db), auth, workspaceId);

    const refusal = (code: ErrorCode, message: string): ItemResult => ({ status: ERRORS[code].status, body: { error: { code, message, requestId } } });
    // Each item checked as POST /v1/generations checks its body; a refusal names the item.
    const prepared = await Promise.all(
      body.items.map(async (raw, i): Promise<CreateItem | ItemResult> => {
        if (!validateItem(raw)) return refusal('validation_error', describeErrors(`items.${i}`, validateItem.errors));
        const { idempotencyKey, ...fields } = raw as BatchGenerationItem;
        const request: GenerationRequest = { workspaceId, ...fields };
        try {
          const order = await orderOf(services, auth, request, checkModel(services, request));
          // The hash of the body a single create would send: a key is the same request through either endpoint.
          return { order, idempotency: idempotencyKey === undefined ? undefined : { key: idempotencyKey, hash: requestHash(request) } };
        } catch (error) {
          if (!isApiError(error)) throw error;
          return refusal(error.code, error.code === 'validation_error' ? `items.${i}.${error.message}` : error.message);
        }
      }),
    );

    const items = prepared.filter((p): p is CreateItem => 'order' in p);
    const replies = items.length === 0 ? [] : await services.actors.ask('ws', workspaceId, { type: 'create_batch', items });
    let next = 0;
    const results = prepared.map((p): ItemResult => {
      if (!('order' in p)) return p;
      const reply = replies[next++]!;
      if (reply.kind === 'refused') return refusal(reply.code, reply.message);
      return { status: 201, replayed: reply.kind === 'replay', body: toGenerationDetailOut(reply.generation) };
    });
    const created = results.filter((r) => 'replayed' in r && !r.replayed).length;
    const replayed = results.filter((r) => 'replayed' in r && r.replayed).length;
    return { status: 200, body: { results, created, replayed, refused: results.length - created - replayed } };
  },
});
