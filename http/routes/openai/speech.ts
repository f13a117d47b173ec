import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import type { ModelRecord } from '../../../domain/catalog/models.ts';
import type { VOICES } from '../../../domain/catalog/params.ts';
import { failureReply } from './answers.ts';
import { invalid, refuseUnknown, requestModelOf } from './chat-request.ts';
import { keyOf, modelOf } from './door-job.ts';
import { checkDoorParams, offeredOf, outputAssetsOf, outputStream, runDoorJob } from './images.ts';
import { keyWorkspace } from './key-owner.ts';

/**
 * POST /openai/v1/audio/speech (docs/openai-compatible.md): OpenAI's text to speech over the catalog's
 * text_to_audio models, a generation of the key's workspace, answered once it ends with the audio's bytes
 * (Content-Type the audio's own), as OpenAI answers it.
 *
 * What maps to what: `input` → prompt; `voice` → voice (SPEECH_VOICES); `response_format` → format
 * (SPEECH_FORMATS); `speed` → speed; and the length of the speech, durationSeconds (which its price counts),
 * from the input: SPEECH_CHARS_PER_SECOND characters a second at speed 1. An input whose speech would pass the
 * model's longest is refused naming `input`, never cut.
 */

type Voice = (typeof VOICES)[number];

/**
 * OpenAI's voice names onto ours: our four by their names (alloy, sage and nova are OpenAI's too), and
 * OpenAI's `coral` as `ember`, the voice the openai provider asks of OpenAI for `ember`
 * (providers/openai/requests.ts), so that either name is the same voice there. Any other voice (ash, ballad,
 * echo, fable, onyx, shimmer, verse, marin, cedar, a custom voice's id) is refused naming `voice`.
 */
export const SPEECH_VOICES: Readonly<Record<string, Voice>> = { alloy: 'alloy', ember: 'ember', sage: 'sage', nova: 'nova', coral: 'ember' };

/**
 * OpenAI's `response_format` onto our formats: mp3 and wav as they are; `opus` (Opus in an Ogg container at
 * OpenAI) as our `ogg`, the Ogg container, whose codec is the deployment's (Vorbis for the local provider, Opus
 * from OpenAI itself). aac, flac and pcm are refused naming `response_format`.
 */
export const SPEECH_FORMATS: Readonly<Record<string, string>> = { mp3: 'mp3', wav: 'wav', opus: 'ogg' };

/** How fast speech reads its input at speed 1 (about 150 words a minute), for the length it is made and charged. */
export const SPEECH_CHARS_PER_SECOND = 15;

const FIELDS = new Set(['model', 'input', 'voice', 'response_format', 'speed', 'instructions', 'stream_format']);

/** What a refusal of the catalog names, as OpenAI's speech fields. */
const SPEECH_NAMES: Readonly<Record<string, string>> = {
  prompt: 'input',
  voice: 'voice',
  format: 'response_format',
  speed: 'speed',
  durationSeconds: 'input',
};

const isSet = (value: unknown) => value !== undefined && value !== null;

/** The longest speech the model makes, in seconds (its durationSeconds' maximum). */
function longestOf(model: ModelRecord): number | undefined {
  const schema = (model.parameterSchema as { properties?: { durationSeconds?: { maximum?: number } } }).properties?.durationSeconds;
  return schema?.maximum;
}

/** The job's params of a speech request for `model`, every field checked. */
export function speechJobOf(body: Record<string, unknown>, model: ModelRecord): Record<string, unknown> {
  refuseUnknown(body, FIELDS);
  const offered = offeredOf(model);
  const params: Record<string, unknown> = {};

  const input = body.input;
  if (input === undefined || input === null) throw invalid('input', "Missing required parameter: 'input'.", 'missing_required_parameter');
  if (typeof input !== 'string') throw invalid('input', "Invalid type for 'input': expected a string.", 'invalid_type');
  if (input.trim() === '') throw invalid('input', "Invalid 'input': empty string.", 'empty_string');
  params.prompt = input;

  const voice = body.voice;
  if (voice === undefined || voice === null) throw invalid('voice', "Missing required parameter: 'voice'.", 'missing_required_parameter');
  const ours = typeof voice === 'string' ? SPEECH_VOICES[voice] : undefined;
  if (!ours) {
    throw invalid(
      'voice',
      `Unsupported value for 'voice': ${JSON.stringify(voice).slice(0, 60)}. This service speaks with ${Object.keys(SPEECH_VOICES).join(', ')} (coral is ember).`,
      'unsupported_value',
    );
  }
  if (!offered.has('voice')) throw invalid('voice', `The model ${model.id} has one voice of its own: it takes no 'voice'.`, 'unsupported_parameter');
  params.voice = ours;

  const format = body.response_format;
  if (isSet(format)) {
    const our = typeof format === 'string' ? SPEECH_FORMATS[format] : undefined;
    if (!our) {
      throw invalid(
        'response_format',
        `Unsupported value for 'response_format': ${JSON.stringify(format).slice(0, 60)}. This service makes ${Object.keys(SPEECH_FORMATS).join(', ')}.`,
        'unsupported_value',
      );
    }
    if (offered.has('format')) params.format = our;
    else if (our !== 'mp3')
      throw invalid('response_format', `The model ${model.id} makes one format of its own: it takes no 'response_format'.`, 'unsupported_parameter');
  } else if (offered.has('format')) {
    params.format = 'mp3'; // OpenAI's default, whatever the model's own
  }

  const speed = body.speed;
  if (isSet(speed)) {
    if (typeof speed !== 'number' || !Number.isFinite(speed)) throw invalid('speed', "Invalid type for 'speed': expected a number.", 'invalid_type');
    if (speed < 0.25 || speed > 4) throw invalid('speed', `Invalid 'speed': ${speed} is not within 0.25 and 4.`);
    if (offered.has('speed')) params.speed = speed;
    else if (speed !== 1) throw invalid('speed', `The model ${model.id} speaks at one speed: it takes no 'speed'.`, 'unsupported_parameter');
  }

  if (isSet(body.instructions) && body.instructions !== '') {
    throw invalid('instructions', "Unsupported parameter: 'instructions'. The voices of this service take no instructions.", 'unsupported_parameter');
  }
  if (isSet(body.stream_format) && body.stream_format !== 'audio') {
    throw invalid('stream_format', "Unsupported value for 'stream_format': this service answers the audio whole ('audio').", 'unsupported_value');
  }

  // The length of the speech: the input read at its speed, in whole seconds; never cut short.
  if (offered.has('durationSeconds')) {
    const pace = SPEECH_CHARS_PER_SECOND * ((params.speed as number | undefined) ?? 1);
    const seconds = Math.max(1, Math.ceil(input.trim().length / pace));
    const longest = longestOf(model);
    if (longest !== undefined && seconds > longest) {
      throw invalid(
        'input',
        `Invalid 'input': read at speed ${(params.speed as number | undefined) ?? 1} it takes about ${seconds} seconds, and the model ${model.id} speaks ${longest} seconds at most (about ${Math.floor(longest * pace)} characters).`,
        'string_above_max_length',
      );
    }
    params.durationSeconds = seconds;
  }
  return params;
}

export const createSpeech = defineRoute({
  method: 'POST',
  path: '/openai/v1/audio/speech',
  operationId: 'openaiCreateSpeech',
  summary: "OpenAI's text to speech over the catalog's text_to_audio models, answered with the audio's bytes",
  description:
    "The OpenAI-compatible door: takes OpenAI's speech request (its `model` a text_to_audio model id of GET /openai/v1/models; voices alloy, ember, sage, nova, and coral as ember; formats mp3, wav, opus as Ogg) and answers the audio's bytes once it is made. Each request is a generation of the key's workspace; errors come in OpenAI's shape. See docs/openai-compatible.md.",
  tags: ['openai'],
  access: { scopes: ['generations.write'] },
  keyWorkspace: 'none',
  errors: ['not_found', 'conflict', 'insufficient_credits', 'wallet_insufficient_balance', 'wallet_pending_minimum', 'plan_limit_reached', 'generation_paused'],
  owner: keyWorkspace,
  body: Type.Object({}, { additionalProperties: true, description: "OpenAI's speech request." }),
  responses: { 200: null, 400: null, 409: null, 429: null, 502: null, 503: null, 504: null, 507: null },
  handler: async ({ body, auth, headers, services }) => {
    keyOf(auth);
    const request = requestModelOf(body);
    const model = modelOf(services, request.model, ['text_to_audio']);
    const params = speechJobOf(request.body, model);
    checkDoorParams(services, model, params, SPEECH_NAMES);
    const ran = await runDoorJob(services, auth, { model, params, body, idempotencyKey: headers['idempotency-key'] });
    const { generation } = ran;
    if (generation.status !== 'succeeded') return { ...failureReply(generation), headers: ran.headers };
    const [audio] = await outputAssetsOf(services, generation);
    if (!audio)
      return {
        ...failureReply({ ...generation, status: 'failed', errorCode: 'generation_failed', errorMessage: 'The generation made no audio.' }),
        headers: ran.headers,
      };
    return {
      status: 200,
      stream: { body: await outputStream(services, audio), length: audio.bytes },
      headers: { ...ran.headers, 'Content-Type': audio.contentType },
    };
  },
});
