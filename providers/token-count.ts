import type { TokenUsage } from './adapter.ts';

/**
 * The tokens of a text answer that ended before its provider reported its usage (a stream cancelled or
 * broken after its first piece), counted with `gpt-tokenizer` where the upstream model's encoding is known
 * (OpenAI's families), else bounded by the text's UTF-8 bytes: every token of the byte-pair encodings in use
 * covers at least one byte, the same bound the service charges when a provider reports no usage
 * (docs/openai-compatible.md, Billing). The tokenizer's tables load on the first count only.
 */

type Encoding = 'o200k_base' | 'cl100k_base';

/** The encoding of an upstream model by its family; undefined when not known. */
export function encodingOf(model: string | undefined): Encoding | undefined {
  if (!model) return undefined;
  if (/^(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o[1-9]|chatgpt-4o|gpt-oss)/i.test(model)) return 'o200k_base';
  if (/^(gpt-4|gpt-3\.5)/i.test(model)) return 'cl100k_base';
  return undefined;
}

const encoders = new Map<Encoding, Promise<(text: string) => number>>();

function encoder(encoding: Encoding): Promise<(text: string) => number> {
  let made = encoders.get(encoding);
  if (!made) {
    made =
      encoding === 'o200k_base'
        ? import('gpt-tokenizer/encoding/o200k_base').then((m) => (text: string) => m.countTokens(text))
        : import('gpt-tokenizer/encoding/cl100k_base').then((m) => (text: string) => m.countTokens(text));
    encoders.set(encoding, made);
  }
  return made;
}

/** Tokens a chat format adds per message (role and separators), as OpenAI's cookbook counts them. */
const PER_MESSAGE = 3;
/** Tokens that prime the answer (`<|start|>assistant<|message|>`). */
const REPLY_PRIMING = 3;

/**
 * What a text job used: `input`, the texts it was sent (a conversation's messages, or its prompt and system
 * prompt), and `output`, the answer streamed so far.
 */
export async function countUsage(model: string | undefined, input: { texts: string[]; messages: number }, output: string): Promise<TokenUsage> {
  const encoding = encodingOf(model);
  if (!encoding) {
    const bytes = (text: string) => Buffer.byteLength(text, 'utf8');
    return { inputTokens: input.texts.reduce((sum, text) => sum + bytes(text), 0) + 8 * input.messages + 8, outputTokens: bytes(output) };
  }
  const count = await encoder(encoding);
  const inputTokens = input.texts.reduce((sum, text) => sum + count(text), 0) + PER_MESSAGE * input.messages + REPLY_PRIMING;
  return { inputTokens, outputTokens: count(output) };
}
