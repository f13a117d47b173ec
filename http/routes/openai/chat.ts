import { Type } from '@sinclair/typebox';
import { defineRoute, type Reply } from '../../route.ts';
import type { FrameSink } from '../../streams/hub.ts';
import { chatJobOf, requestModelOf } from './chat-request.ts';
import { keyOf, modelOf, startDoorJob, type Ended } from './door-job.ts';
import { clientGone, failureOf, failureReply } from './answers.ts';
import { keyWorkspace } from './key-owner.ts';

/**
 * POST /openai/v1/chat/completions (docs/openai-compatible.md): OpenAI's chat completions over a
 * text_to_text model of the catalog, answered whole or streamed as `chat.completion.chunk`s.
 *
 * A streamed answer starts with the job's first piece of text: until then nothing is sent, so that a job
 * moved to another deployment, or refused, is still answered with an ordinary status and error.
 */

interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

function usageOf(generation: Ended): ChatUsage | undefined {
  const usage = (generation as { usage?: { inputTokens: number; outputTokens: number } }).usage;
  if (!usage) return undefined;
  return { prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens, total_tokens: usage.inputTokens + usage.outputTokens };
}

/** `length` when the answer used every token it was allowed, `stop` otherwise. */
function finishReasonOf(generation: Ended, maxTokens: unknown): 'stop' | 'length' {
  const used = usageOf(generation)?.completion_tokens;
  return typeof maxTokens === 'number' && used !== undefined && used >= maxTokens ? 'length' : 'stop';
}

const completionId = (generationId: string) => `chatcmpl-${generationId}`;
const createdOf = (generation: Ended) => Math.floor(Date.parse(generation.createdAt) / 1000);

export const createChatCompletion = defineRoute({
  method: 'POST',
  path: '/openai/v1/chat/completions',
  operationId: 'openaiCreateChatCompletion',
  summary: "OpenAI's chat completions over the catalog's text models, streamed or whole",
  description:
    "The OpenAI-compatible door: takes OpenAI's chat completion request (its `model` a text_to_text model id of GET /openai/v1/models) and answers in OpenAI's shapes, each request a generation of the key's workspace. Errors come in OpenAI's shape. See docs/openai-compatible.md.",
  tags: ['openai'],
  access: { scopes: ['generations.write'] },
  keyWorkspace: 'none',
  errors: ['not_found', 'conflict', 'insufficient_credits', 'wallet_insufficient_balance', 'wallet_pending_minimum', 'plan_limit_reached', 'generation_paused'],
  owner: keyWorkspace,
  body: Type.Object({}, { additionalProperties: true, description: "OpenAI's chat completion request." }),
  responses: { 200: null, 400: null, 409: null, 429: null, 502: null, 503: null, 504: null, 507: null },
  eventStream: true,
  handler: async ({ body, auth, headers, services }) => {
    const key = keyOf(auth);
    const request = requestModelOf(body);
    const model = modelOf(services, request.model, ['text_to_text']);
    const job = chatJobOf(request.body, model);
    const maxTokens = job.params.maxTokens;

    // Pieces and the end as they come; the answer is made once the first of them is known.
    const pieces: string[] = [];
    let ended: Ended | undefined;
    let onChange: (() => void) | undefined;
    // Set once the client went away; read by `end`, which a replay of an ended job calls before startDoorJob returns.
    let gone: { ended(): void } | undefined;
    const started = await startDoorJob(
      services,
      auth,
      { model, params: job.params, body, idempotencyKey: headers['idempotency-key'] },
      {
        output(delta) {
          pieces.push(delta);
          onChange?.();
        },
        end(generation) {
          ended = generation;
          if (gone) {
            gone.ended();
            started.stop();
          }
          onChange?.();
        },
      },
    );
    const replayed: Record<string, string> = { 'X-Generation-Id': started.id, ...(started.replayed ? { 'Idempotent-Replayed': 'true' } : {}) };
    // Until the job ended, or, streamed, until its first piece.
    const ready = () => ended !== undefined || (job.stream && pieces.length > 0);
    const first = () =>
      ready()
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            onChange = () => {
              if (ready()) resolve();
            };
          });
    // The client went away: a job that has not ended goes on, drained within the node's bound, or is cancelled.
    const whenGone = () => {
      if (ended) started.stop();
      else gone ??= clientGone(services, key.workspaceId, started.id);
    };

    if (!job.stream) {
      await first();
      onChange = undefined;
      started.stop();
      const generation = ended!;
      if (generation.status !== 'succeeded') return { ...failureReply(generation), headers: replayed };
      const usage = usageOf(generation);
      return {
        status: 200,
        headers: replayed,
        body: {
          id: completionId(generation.id),
          object: 'chat.completion',
          created: createdOf(generation),
          model: model.id,
          choices: [
            {
              index: 0,
              message: { role: 'assistant', content: generation.textOutput ?? '', refusal: null },
              logprobs: null,
              finish_reason: finishReasonOf(generation, maxTokens),
            },
          ],
          ...(usage ? { usage } : {}),
          system_fingerprint: null,
        },
      };
    }

    await first();
    onChange = undefined;
    // Failed before its first piece: an ordinary error answer, nothing streamed (nor charged).
    if (ended && ended.status !== 'succeeded' && pieces.length === 0) {
      started.stop();
      return { ...failureReply(ended), headers: replayed };
    }
    const id = completionId(started.id);
    const created = Math.floor(Date.now() / 1000);
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      JSON.stringify({
        id,
        object: 'chat.completion.chunk',
        created,
        model: model.id,
        system_fingerprint: null,
        choices,
        ...(job.includeUsage ? { usage: null } : {}),
        ...extra,
      });
    const reply: Reply = {
      headers: replayed,
      sse: {
        attach(sink: FrameSink) {
          sink.onClose(whenGone);
          const send = (data: string) => sink.send({ event: 'message', data });
          let sent = 0;
          send(chunk([{ index: 0, delta: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: null }]));
          const flush = () => {
            for (; sent < pieces.length; sent++) send(chunk([{ index: 0, delta: { content: pieces[sent] }, logprobs: null, finish_reason: null }]));
          };
          const finish = (generation: Ended) => {
            flush();
            if (generation.status === 'succeeded') {
              // A provider that did not stream: its whole answer as one piece.
              if (sent === 0 && generation.textOutput)
                send(chunk([{ index: 0, delta: { content: generation.textOutput }, logprobs: null, finish_reason: null }]));
              send(chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: finishReasonOf(generation, maxTokens) }]));
              const usage = usageOf(generation);
              if (job.includeUsage)
                send(
                  JSON.stringify({
                    id,
                    object: 'chat.completion.chunk',
                    created,
                    model: model.id,
                    system_fingerprint: null,
                    choices: [],
                    usage: usage ?? null,
                  }),
                );
              sink.end({ event: 'message', data: '[DONE]' });
            } else {
              // After its first piece, a failure ends the stream with an error event, as OpenAI's streams do.
              sink.end({ event: 'message', data: JSON.stringify(failureOf(generation).body) });
            }
          };
          onChange = () => {
            if (sink.closed) return;
            if (ended) finish(ended);
            else flush();
          };
          onChange();
        },
        cancel: whenGone,
      },
    };
    return reply;
  },
});
