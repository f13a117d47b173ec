import { randomUUID } from 'node:crypto';
import type { default as OpenAI } from 'openai';
import { toFile } from 'openai/uploads';
import { PROVIDER_ERROR_CODES, ProviderFailure, type AdapterContext, type AdapterJob, type InputFile, type ProviderAdapter } from '../adapter.ts';
import { type AnswerCall, followedAdapter, type Look, type ProtocolModule, type TerminalUpdate } from '../follower.ts';
import { DEFAULT_RATE_LIMIT_ATTEMPTS } from '../upstream-http.ts';
import { type CallBounds, type CallOptions, openaiClient } from './client.ts';
import type { OpenAiDeploymentTarget } from './deployment.ts';
import { failureOf } from './failures.ts';
import { type OpenAiNotes, overdueFailure } from './notes.ts';
import { ChatStreamReading, chatUpdate, imagesUpdate, speechUpdate } from './outputs.ts';
import { waitingOutRateLimits } from './rate-limits.ts';
import { chatRequest, imageCount, imageGenerateRequest, imageResponseFormat, imageSize, speechRequest } from './requests.ts';
import type { OpenAiSettings } from './settings.ts';

/**
 * OpenAI and OpenAI-compatible servers (vLLM, Ollama, llama.cpp's server, LM Studio) through the official
 * `openai` client (./client.ts): chat completions (text_to_text), images/generations (text_to_image),
 * images/edits (image_to_image) and audio/speech (text_to_audio).
 *
 * A protocol module on the job follower (providers/follower.ts), which owns the job's request, its deadline,
 * its cancel and its one outcome. Each job is one HTTP call that answers with the result (the submission's
 * `answer`), so the provider job id is ours (`openai_<uuid>`, also sent as X-Client-Request-Id) and nothing
 * can be looked up later: `resume` of a job whose request is not out in this process fails it
 * (OPENAI_RESUME_LOST). The client's own retries are off; a 429 is waited out on the follower's clock, up to
 * the job's deadline. A chat answer is streamed (unless the deployment's `stream` is false): each piece of
 * its text is told as an `output` update as it arrives, through streamingFetch, which bounds the stream's
 * bytes and each wait as it flows. Every other answer is read whole, bounded in bytes and time, by
 * boundedFetch before the client parses it.
 */
export const OPENAI_MODES = ['text_to_text', 'text_to_image', 'image_to_image', 'text_to_audio'] as const;

/** The failure of a job resumed after its request was lost with the process that made it. */
export const OPENAI_RESUME_LOST = {
  code: PROVIDER_ERROR_CODES.error,
  message: (providerJobId: string) =>
    `The request ${providerJobId} to OpenAI was in flight when the service stopped; OpenAI answers within that request and keeps no job to look up, so its outcome is lost.`,
};

const over = (update: TerminalUpdate): Look => ({ type: 'over', update });

export function createOpenAiAdapter(
  settings: OpenAiSettings,
  deployment: { id: string; target: OpenAiDeploymentTarget },
  context: AdapterContext,
): ProviderAdapter {
  return followedAdapter(openaiProtocol(settings, deployment, context), context);
}

export function openaiProtocol(
  settings: OpenAiSettings,
  deployment: { id: string; target: OpenAiDeploymentTarget },
  context: AdapterContext,
): ProtocolModule<OpenAiNotes> {
  const target = deployment.target;
  const secrets = [settings.apiKey];
  const timeoutMs = settings.timeoutMs ?? context.requestTimeoutMs;
  const clientFor = openaiClient(settings, timeoutMs);
  const rateLimits = { maxAttempts: context.rateLimitAttempts ?? DEFAULT_RATE_LIMIT_ATTEMPTS, now: () => context.now() };

  /** One job's request. */
  interface Asked {
    providerJobId: string;
    job: AdapterJob;
    notes: OpenAiNotes;
    on: AnswerCall;
  }

  /**
   * One call of the job's request, its 429s waited out: the client with the call's bounds, the call's id.
   * What the deadline would cut (the call out, streamed or not) is in the job's notes.
   */
  function call<T>(asked: Asked, bounds: CallBounds, request: (api: OpenAI, options: CallOptions) => Promise<T>): Promise<T> {
    const { providerJobId, job, notes, on } = asked;
    return waitingOutRateLimits(job, notes, on, rateLimits, async () => {
      if (context.now() >= job.deadline) throw new ProviderFailure(PROVIDER_ERROR_CODES.timeout, 'The job reached its deadline before OpenAI answered.');
      const { api, options } = await clientFor(providerJobId, on.signal, bounds);
      notes.sent = { at: context.now(), streamed: bounds.streamed === true };
      return request(api, options);
    });
  }

  /** Makes the job, by its mode: its outcome (or its outputs to read), or a throw that failureOf maps. */
  async function make(asked: Asked): Promise<Look> {
    const { job } = asked;
    const whole = { maxBytes: context.maxResponseBytes, timeoutMs };
    switch (job.mode) {
      case 'text_to_text': {
        if (target.stream !== false) return over(await streamChat(asked));
        const body = chatRequest(target, job.params);
        const answer = await call(asked, whole, (api, options) => api.chat.completions.create(body, options));
        return over(chatUpdate(answer, secrets));
      }
      case 'text_to_image': {
        const body = imageGenerateRequest(target, job.params);
        const answer = await call(asked, whole, (api, options) => api.images.generate(body, options));
        return imagesOf(job, answer);
      }
      case 'image_to_image': {
        const answer = await call(asked, whole, async (api, options) => api.images.edit(await editBody(job), options));
        return imagesOf(job, answer);
      }
      case 'text_to_audio': {
        const { body, contentType } = speechRequest(target, job.params);
        const bytes = await call(asked, { maxBytes: context.maxOutputBytes, timeoutMs }, async (api, options) =>
          Buffer.from(await (await api.audio.speech.create(body, options)).arrayBuffer()),
        );
        return over(speechUpdate(bytes, contentType, context.maxOutputBytes));
      }
      default:
        throw new ProviderFailure(PROVIDER_ERROR_CODES.inputRejected, `The openai adapter does not make ${job.mode}.`);
    }
  }

  /** The images of an answer, read once it came (an image URL fetched through the egress guard). */
  function imagesOf(job: AdapterJob, answer: unknown): Look {
    return {
      type: 'ending',
      settle: async (on) => {
        const limits = { count: imageCount(job.params), maxOutputBytes: context.maxOutputBytes, fetchOutput: context.fetchOutput, signal: on.signal };
        try {
          return over(await imagesUpdate(answer, limits, secrets));
        } catch (error) {
          return over(failed(error));
        }
      },
    };
  }

  const failed = (error: unknown): TerminalUpdate => {
    const failure = failureOf(error, secrets);
    return { type: 'failed', errorCode: failure.code, errorMessage: failure.message };
  };

  /**
   * A chat answer streamed: each piece of its text told as it arrives (to whoever follows the job now), then
   * its end. A failure after pieces arrived ends the job failed, with the usage if its chunk had come.
   */
  async function streamChat(asked: Asked): Promise<TerminalUpdate> {
    const { job, notes, on } = asked;
    const body = { ...chatRequest(target, job.params), stream: true as const, stream_options: { include_usage: true } };
    // A 429 comes before the first byte: waited out as for any call.
    const stream = await call(asked, { maxBytes: context.maxResponseBytes, timeoutMs, streamed: true }, (api, options) =>
      api.chat.completions.create(body, options),
    );
    const reading = new ChatStreamReading(secrets);
    notes.reading = reading;
    try {
      for await (const chunk of stream) {
        const delta = reading.take(chunk);
        if (delta) on.output(delta);
      }
      // The client's stream ends quietly when its request is aborted (a cancel, the deadline, close): told nothing.
      if (on.signal.aborted) throw new ProviderFailure(PROVIDER_ERROR_CODES.cancelled, 'The job was stopped.');
      return reading.end();
    } catch (error) {
      if (on.signal.aborted) throw error;
      // Stop reading: the connection is closed if anything of it is left.
      stream.controller.abort();
      const failure = failureOf(error, secrets);
      return { type: 'failed', errorCode: failure.code, errorMessage: failure.message, ...(reading.usage ? { usage: reading.usage } : {}) };
    }
  }

  /** The edit's multipart fields: one `image` file, or `image[]` for several (the client names them so). */
  async function editBody(job: AdapterJob) {
    const images = await Promise.all(job.inputs.images.map((file, i) => asUpload(file, `image-${i + 1}`)));
    const responseFormat = imageResponseFormat(target);
    return {
      model: target.model,
      prompt: String(job.params.prompt ?? ''),
      image: images.length === 1 ? images[0]! : images,
      ...(job.inputs.mask ? { mask: await asUpload(job.inputs.mask, 'mask') } : {}),
      n: imageCount(job.params),
      size: imageSize(target, job.params) as '1024x1024', // the edit's size type is narrower than the generation's
      ...(responseFormat ? { response_format: responseFormat } : {}),
      ...(target.quality && target.quality !== 'hd' ? { quality: target.quality } : {}),
    };
  }

  /** Checks what can be refused before any call, so that submit throws it. */
  function refusalOf(job: AdapterJob): ProviderFailure | undefined {
    if (!(OPENAI_MODES as readonly string[]).includes(job.mode)) {
      return new ProviderFailure(PROVIDER_ERROR_CODES.inputRejected, `The openai adapter does not make ${job.mode} (it makes ${OPENAI_MODES.join(', ')}).`);
    }
    try {
      if (job.mode === 'text_to_text') chatRequest(target, job.params);
      if (job.mode === 'text_to_image' || job.mode === 'image_to_image') imageSize(target, job.params);
      if (job.mode === 'text_to_audio') speechRequest(target, job.params);
    } catch (error) {
      if (error instanceof ProviderFailure) return error;
      throw error;
    }
    if (job.mode === 'image_to_image' && job.inputs.images.length === 0) {
      return new ProviderFailure(PROVIDER_ERROR_CODES.inputRejected, 'An image edit needs at least one input image.');
    }
    return undefined;
  }

  return {
    kind: 'openai',
    answersWithinRequest: true,
    ...(settings.maxConcurrentJobs ? { maxConcurrentJobs: settings.maxConcurrentJobs } : {}),

    async submit(job) {
      const refusal = refusalOf(job);
      if (refusal) throw refusal;
      const providerJobId = `openai_${randomUUID()}`;
      const notes: OpenAiNotes = {};
      return {
        providerJobId,
        notes,
        // The call goes out once the caller holds the id (the follower makes it).
        answer: (on) => make({ providerJobId, job, notes, on }).catch((error: unknown) => over(failed(error))),
      };
    },

    // A request still out in this process is handed over by the follower; any other was lost with its process.
    resume: (providerJobId) => ({ failure: new ProviderFailure(OPENAI_RESUME_LOST.code, OPENAI_RESUME_LOST.message(providerJobId)) }),

    // OpenAI has no cancel for these calls: the follower's abort of the request in flight is the cancel.
    cancel: async () => undefined,

    overdue(f) {
      const failure = f.notes.limited ? failureOf(f.notes.limited, secrets) : overdueFailure(f.notes, f.job.deadline);
      const usage = f.notes.reading?.usage;
      return { type: 'failed', errorCode: failure.code, errorMessage: failure.message, ...(usage ? { usage } : {}) };
    },
  };
}

async function asUpload(file: InputFile, name: string) {
  const extension = file.contentType.split('/')[1]?.replace('jpeg', 'jpg') ?? 'bin';
  return toFile(file.bytes, `${name}.${extension}`, { type: file.contentType });
}
