import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import type { ModelRecord } from '../../../domain/catalog/models.ts';
import { keyOf, modelOf } from './door-job.ts';

/** The modes the door serves (docs/openai-compatible.md): a model of another mode is not listed. */
export const DOOR_MODES = ['text_to_text', 'text_to_image', 'image_to_image', 'text_to_audio'] as const;

/** When the service started: OpenAI's `created` of every model (the catalog keeps no date of its own). */
const STARTED = Math.floor(Date.now() / 1000);

function modelOut(model: ModelRecord) {
  return { id: model.id, object: 'model' as const, created: STARTED, owned_by: model.maker };
}

export const listOpenAiModels = defineRoute({
  method: 'GET',
  path: '/openai/v1/models',
  operationId: 'openaiListModels',
  summary: "The catalog's models the OpenAI-compatible door serves, in OpenAI's list shape",
  description:
    "The models offered now whose mode the door serves (chat, images, edits, speech), as OpenAI's `GET /v1/models` lists them. See docs/openai-compatible.md.",
  tags: ['openai'],
  access: { scopes: ['generations.read', 'generations.write'] },
  keyWorkspace: 'none',
  needsDatabase: false,
  responses: { 200: null },
  handler: ({ auth, services }) => {
    keyOf(auth);
    const data = services.catalog
      .offered()
      .filter((model) => (DOOR_MODES as readonly string[]).includes(model.mode))
      .map(modelOut);
    return { body: { object: 'list', data } };
  },
});

export const getOpenAiModel = defineRoute({
  method: 'GET',
  path: '/openai/v1/models/:model',
  operationId: 'openaiRetrieveModel',
  summary: 'One model of the OpenAI-compatible door, in OpenAI shape',
  description:
    "A model the door serves, as OpenAI's `GET /v1/models/{model}` answers it; another is 404 model_not_found. Model ids with a slash are sent with it encoded (%2F).",
  tags: ['openai'],
  access: { scopes: ['generations.read', 'generations.write'] },
  keyWorkspace: 'none',
  needsDatabase: false,
  params: Type.Object({ model: Type.String({ minLength: 1, maxLength: 200 }) }),
  responses: { 200: null },
  handler: ({ auth, params, services }) => {
    keyOf(auth);
    return { body: modelOut(modelOf(services, params.model, DOOR_MODES)) };
  },
});
