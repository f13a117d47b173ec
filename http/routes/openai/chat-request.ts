import { ParamError } from '../../errors.ts';
import type { ModelRecord } from '../../../domain/catalog/models.ts';
import { chatCapabilitiesOf, promptOfMessages, systemOf, type ChatMessage } from '../../../domain/catalog/chat.ts';

/**
 * A chat completion request of OpenAI's API as a job's params (docs/openai-compatible.md, What maps to
 * what). Pure: every field is checked, and one this service cannot honour is refused naming its `param`,
 * never dropped.
 */

/** The fields of a chat completion request the door takes; any other is refused as OpenAI refuses an unknown one. */
const FIELDS = new Set([
  'model',
  'messages',
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'top_p',
  'seed',
  'stop',
  'n',
  'user',
  'stream',
  'stream_options',
  'response_format',
  'tools',
  'tool_choice',
]);
const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool']);
const MESSAGE_FIELDS = new Set(['role', 'content', 'name', 'tool_call_id', 'tool_calls', 'refusal']);
/** Messages of one request at most. */
export const MAX_MESSAGES = 2_048;
/** Tools of one request at most (OpenAI's own limit). */
const MAX_TOOLS = 128;
const MAX_STOPS = 4;
const MAX_USER = 256;

export interface ChatJob {
  params: Record<string, unknown>;
  stream: boolean;
  includeUsage: boolean;
}

export const invalid = (param: string | null, message: string, code: string | null = 'invalid_value') =>
  new ParamError('validation_error', message, param, code);

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/** The body's own shape, before any model is looked at: an object with a string `model`. */
export function requestModelOf(body: unknown): { body: Record<string, unknown>; model: string } {
  if (!isObject(body)) throw invalid(null, 'The request body must be a JSON object.', null);
  const model = body.model;
  if (model === undefined) throw invalid('model', "Missing required parameter: 'model'.", 'missing_required_parameter');
  if (typeof model !== 'string' || model === '' || model.length > 100)
    throw invalid('model', "Invalid type for 'model': expected a string of 1 to 100 characters.", 'invalid_type');
  return { body, model };
}

/** Refuses the first field of `body` the door does not take, as OpenAI answers an unknown parameter. */
export function refuseUnknown(body: Record<string, unknown>, fields: ReadonlySet<string>, at = ''): void {
  for (const name of Object.keys(body)) {
    if (!fields.has(name)) throw invalid(`${at}${name}`, `Unrecognized request argument supplied: ${at}${name}`, 'unknown_parameter');
  }
}

/** The model's catalog parameters (its parameterSchema's properties). */
function offeredOf(model: ModelRecord): Set<string> {
  return new Set(Object.keys((model.parameterSchema as { properties?: Record<string, unknown> }).properties ?? {}));
}

function numberIn(body: Record<string, unknown>, name: string, min: number, max: number, integer = false): number | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || (integer && !Number.isInteger(value))) {
    throw invalid(name, `Invalid type for '${name}': expected ${integer ? 'an integer' : 'a number'}.`, 'invalid_type');
  }
  if (value < min || value > max) throw invalid(name, `Invalid '${name}': ${value} is not within ${min} and ${max}.`);
  return value;
}

function messagesOf(value: unknown): ChatMessage[] {
  if (value === undefined) throw invalid('messages', "Missing required parameter: 'messages'.", 'missing_required_parameter');
  if (!Array.isArray(value)) throw invalid('messages', "Invalid type for 'messages': expected an array.", 'invalid_type');
  if (value.length === 0) throw invalid('messages', "Invalid 'messages': empty array. Expected an array with minimum length 1.", 'empty_array');
  if (value.length > MAX_MESSAGES) throw invalid('messages', `Invalid 'messages': at most ${MAX_MESSAGES} messages.`, 'array_above_max_length');
  return value.map((raw, i) => {
    const at = `messages[${i}]`;
    if (!isObject(raw)) throw invalid(at, `Invalid type for '${at}': expected an object.`, 'invalid_type');
    refuseUnknown(raw, MESSAGE_FIELDS, `${at}.`);
    if (typeof raw.role !== 'string' || !ROLES.has(raw.role)) {
      throw invalid(`${at}.role`, `Invalid value for '${at}.role': supported values are 'system', 'developer', 'user', 'assistant' and 'tool'.`);
    }
    const role = raw.role as ChatMessage['role'];
    const message: ChatMessage = { role, content: contentOf(raw.content, role, raw.tool_calls !== undefined, `${at}.content`) };
    if (raw.name !== undefined) {
      if (typeof raw.name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(raw.name))
        throw invalid(`${at}.name`, `Invalid '${at}.name': 1 to 64 letters, digits, _ or -.`);
      message.name = raw.name;
    }
    if (role === 'tool') {
      if (typeof raw.tool_call_id !== 'string' || raw.tool_call_id === '')
        throw invalid(`${at}.tool_call_id`, `Missing required parameter: '${at}.tool_call_id'.`, 'missing_required_parameter');
      message.tool_call_id = raw.tool_call_id;
    } else if (raw.tool_call_id !== undefined) {
      throw invalid(`${at}.tool_call_id`, `Unrecognized request argument supplied: ${at}.tool_call_id (only a tool message has one)`, 'unknown_parameter');
    }
    if (raw.tool_calls !== undefined) {
      if (role !== 'assistant' || !Array.isArray(raw.tool_calls))
        throw invalid(`${at}.tool_calls`, `Invalid '${at}.tool_calls': an array, on an assistant message only.`);
      message.tool_calls = raw.tool_calls;
    }
    return message;
  });
}

/** A message's text: a string, or text parts joined; other parts (images, audio, files) are refused. */
function contentOf(value: unknown, role: string, hasToolCalls: boolean, at: string): string {
  if (typeof value === 'string') return value;
  if ((value === null || value === undefined) && role === 'assistant' && hasToolCalls) return '';
  if (!Array.isArray(value)) throw invalid(at, `Invalid type for '${at}': expected a string or an array of text parts.`, 'invalid_type');
  return value
    .map((part, j) => {
      if (!isObject(part) || part.type !== 'text' || typeof part.text !== 'string') {
        throw invalid(`${at}[${j}]`, `Invalid '${at}[${j}]': this service takes text parts only ({"type":"text","text":"…"}).`);
      }
      return part.text;
    })
    .join('');
}

function stopOf(value: unknown): string | string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  if (Array.isArray(value) && value.length <= MAX_STOPS && value.every((s) => typeof s === 'string')) return value as string[];
  throw invalid('stop', `Invalid 'stop': a string or an array of at most ${MAX_STOPS} strings.`);
}

/**
 * The job's params of a chat request for `model` (already known to make text_to_text): the catalog's
 * parameters it offers, checked against them by the caller (parameterSchema), and the chat fields besides.
 */
export function chatJobOf(body: Record<string, unknown>, model: ModelRecord): ChatJob {
  refuseUnknown(body, FIELDS);
  const offered = offeredOf(model);
  const messages = messagesOf(body.messages);
  const deployments = model.deployments.map(chatCapabilitiesOf);
  const anyTakes = (capability: 'response_format' | 'tools') => deployments.some((caps) => caps.includes(capability));
  const params: Record<string, unknown> = {};
  const offer = (param: string, name: string, value: unknown) => {
    if (value === undefined) return;
    if (!offered.has(name)) throw invalid(param, `The model ${model.id} does not take '${param}'.`, 'unsupported_parameter');
    params[name] = value;
  };

  if (body.max_tokens !== undefined && body.max_completion_tokens !== undefined && body.max_tokens !== null && body.max_completion_tokens !== null) {
    throw invalid('max_tokens', "Send either 'max_tokens' or 'max_completion_tokens', not both.");
  }
  const maxTokensParam = body.max_completion_tokens !== undefined && body.max_completion_tokens !== null ? 'max_completion_tokens' : 'max_tokens';
  offer(maxTokensParam, 'maxTokens', numberIn(body, maxTokensParam, 1, 1_000_000, true));
  offer('temperature', 'temperature', numberIn(body, 'temperature', 0, 2));
  offer('seed', 'seed', numberIn(body, 'seed', 0, 2_147_483_647, true));
  const n = numberIn(body, 'n', 1, 128, true);
  if (n !== undefined && n !== 1) throw invalid('n', "Invalid 'n': this service makes one choice per request (n = 1).");
  const topP = numberIn(body, 'top_p', 0, 1);
  if (topP !== undefined) params.topP = topP;
  const stop = stopOf(body.stop);
  if (stop !== undefined) params.stop = stop;
  if (body.user !== undefined) {
    if (typeof body.user !== 'string' || body.user.length > MAX_USER) throw invalid('user', `Invalid 'user': a string of at most ${MAX_USER} characters.`);
    params.user = body.user;
  }
  if (body.response_format !== undefined && body.response_format !== null) {
    const format = body.response_format;
    if (!isObject(format) || !['text', 'json_object', 'json_schema'].includes(format.type as string)) {
      throw invalid('response_format', "Invalid 'response_format': an object whose type is 'text', 'json_object' or 'json_schema'.");
    }
    if (format.type !== 'text') {
      if (!anyTakes('response_format'))
        throw invalid('response_format', `The model ${model.id} has no deployment that takes 'response_format'.`, 'unsupported_parameter');
      params.responseFormat = format;
    }
  }
  if (body.tools !== undefined && body.tools !== null) {
    const tools = body.tools;
    if (
      !Array.isArray(tools) ||
      tools.length > MAX_TOOLS ||
      !tools.every((t) => isObject(t) && t.type === 'function' && isObject(t.function) && typeof t.function.name === 'string')
    ) {
      throw invalid('tools', `Invalid 'tools': at most ${MAX_TOOLS} objects {"type":"function","function":{"name":…}}.`);
    }
    if (tools.length > 0) {
      if (!anyTakes('tools')) throw invalid('tools', `The model ${model.id} has no deployment that takes 'tools'.`, 'unsupported_parameter');
      params.tools = tools;
    }
  }
  if (body.tool_choice !== undefined && body.tool_choice !== null) {
    if (params.tools === undefined) throw invalid('tool_choice', "'tool_choice' is only allowed when 'tools' are specified.");
    const choice = body.tool_choice;
    if (!(typeof choice === 'string' ? ['none', 'auto', 'required'].includes(choice) : isObject(choice))) {
      throw invalid('tool_choice', "Invalid 'tool_choice': 'none', 'auto', 'required' or an object naming a function.");
    }
    params.toolChoice = choice;
  }
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean')
    throw invalid('stream', "Invalid type for 'stream': expected a boolean.", 'invalid_type');
  const stream = body.stream === true;
  let includeUsage = false;
  if (body.stream_options !== undefined && body.stream_options !== null) {
    if (!stream) throw invalid('stream_options', "The 'stream_options' parameter is only allowed when 'stream' is enabled.");
    const options = body.stream_options;
    if (!isObject(options)) throw invalid('stream_options', "Invalid type for 'stream_options': expected an object.", 'invalid_type');
    refuseUnknown(options, new Set(['include_usage']), 'stream_options.');
    if (options.include_usage !== undefined && typeof options.include_usage !== 'boolean') {
      throw invalid('stream_options.include_usage', "Invalid type for 'stream_options.include_usage': expected a boolean.", 'invalid_type');
    }
    includeUsage = options.include_usage === true;
  }

  // The conversation: as it is for the deployments that take messages, and through the template for the
  // others (the system messages as the system prompt when the model takes one).
  const allTakeMessages = deployments.every((caps) => caps.includes('messages'));
  const system = systemOf(messages);
  const takesSystem = offered.has('systemPrompt');
  const prompt = promptOfMessages(
    takesSystem ? messages : messages.map((m) => (m.role === 'system' || m.role === 'developer' ? { ...m, role: 'user' as const } : m)),
  );
  if (prompt === '' && !allTakeMessages) throw invalid('messages', "Invalid 'messages': no text to answer.");
  // A model whose every deployment takes messages keeps the conversation whole; its prompt is a label (lists, search).
  params.prompt = allTakeMessages ? excerpt(lastUserText(messages) || prompt || ' ', model) : prompt;
  if (!allTakeMessages && takesSystem && system !== '') params.systemPrompt = system;
  params.messages = messages;
  return { params, stream, includeUsage };
}

function lastUserText(messages: readonly ChatMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.role === 'user' && messages[i]!.content !== '') return messages[i]!.content;
  return '';
}

/** The start of a text, within the model's prompt length. */
function excerpt(text: string, model: ModelRecord): string {
  const schema = (model.parameterSchema as { properties?: { prompt?: { maxLength?: number } } }).properties?.prompt;
  const max = schema?.maxLength ?? 4_000;
  return text.length <= max ? text : text.slice(0, max);
}
