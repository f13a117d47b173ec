/**
 * text_to_text for the local provider: `makeText(params, options)` → `{ text, tokens, truncated }`.
 *
 * Params: prompt (required), systemPrompt, temperature 0..2 (default 1), maxTokens 1..cap
 * (default 256; cap options.maxTokens, default 4096), seed.
 *
 * The reply is readable English built from the prompt: a few simple instructions are carried
 * out for real ("echo: …", "repeat …", "reverse …", "uppercase …", "lowercase …", "count the
 * words in …"); any other prompt gets an answer that restates it and talks about its key words.
 * The system prompt sets the style: it asks for JSON → a JSON object; a list/bullets → bullet
 * lines; concise/brief/short/one sentence → the first two sentences only; uppercase → shouting.
 *
 * Determinism: the same params give the same text. At temperature 0 the seed is ignored (like
 * greedy decoding); above it the seed picks among phrasings, and above 1 a further sentence.
 * The text is cut to maxTokens whitespace-separated tokens (`truncated` then is true).
 */
import { hashOf, pick, rng, type Rng } from './random.ts';
import { DEFAULTS, option, readNumber, readSeed, readString, type LocalOutputOptions, type Params } from './params.ts';

export interface TextOutput {
  text: string;
  /** Whitespace-separated tokens in `text`. */
  tokens: number;
  /** Whitespace-separated tokens in prompt and system prompt. */
  promptTokens: number;
  truncated: boolean;
}

const STOP_WORDS = new Set(
  (
    'a an and are as at be but by can could did do does for from had has have how i if in into is it its ' +
    'me my of on or our please should so than that the their them then there these they this to us was we ' +
    'were what when where which who why will with would you your about tell give write make explain describe ' +
    'summarise summarize some any all one two three short long words sentences sentence paragraph'
  ).split(' '),
);

/**
 * Whether a UTF-16 code unit is whitespace as a regular expression's `\s` has it. The token helpers below scan
 * the text by code unit instead of matching `\S+`, which made an array per token of every answer.
 */
function isSpace(c: number): boolean {
  return (
    c === 32 ||
    (c >= 9 && c <= 13) ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/** Whitespace-separated tokens in `text` (as many as `text.match(/\S+/g)` finds). */
export function countTokens(text: string): number {
  let count = 0;
  let inToken = false;
  for (let i = 0; i < text.length; i++) {
    const space = isSpace(text.charCodeAt(i));
    if (!space && !inToken) count++;
    inToken = !space;
  }
  return count;
}

export function makeText(params: Params, options?: LocalOutputOptions): TextOutput {
  const prompt = readString(params, 'prompt', { required: true })!;
  const systemPrompt = readString(params, 'systemPrompt') ?? '';
  const temperature = readNumber(params, 'temperature', { min: 0, max: 2, fallback: DEFAULTS.temperature });
  const maxTokens = readNumber(params, 'maxTokens', { min: 1, max: option(options, 'maxTokens'), fallback: DEFAULTS.maxTokensDefault, integer: true });
  const seed = readSeed(params, prompt);

  // Temperature 0 is greedy: the seed plays no part.
  const r = rng(temperature === 0 ? hashOf('text', prompt, systemPrompt) : hashOf('text', prompt, systemPrompt, seed, Math.round(temperature * 10)));
  const choose = <T>(items: readonly T[]): T => (temperature === 0 ? items[0]! : pick(r, items));

  const style = styleOf(systemPrompt);
  const sentences = instruction(prompt) ?? answer(prompt, choose, r, temperature);
  const text = render(sentences, style, prompt);
  const { text: cut, truncated } = truncateTokens(text, maxTokens);
  return { text: cut, tokens: countTokens(cut), promptTokens: countTokens(prompt) + countTokens(systemPrompt), truncated };
}

/** The first `max` whitespace-separated tokens of `text`, with the whitespace between them kept. */
export function truncateTokens(text: string, max: number): { text: string; truncated: boolean } {
  let count = 0;
  let end = 0;
  let i = 0;
  while (i < text.length) {
    while (i < text.length && isSpace(text.charCodeAt(i))) i++;
    if (i === text.length) break;
    if (count === max) return { text: text.slice(0, end), truncated: true };
    count++;
    while (i < text.length && !isSpace(text.charCodeAt(i))) i++;
    end = i;
  }
  return { text: text.slice(0, end), truncated: false };
}

type Style = 'plain' | 'json' | 'list' | 'concise' | 'shout';

function styleOf(systemPrompt: string): Style {
  const s = systemPrompt.toLowerCase();
  if (/\bjson\b/.test(s)) return 'json';
  if (/\b(bullet|bullets|list)\b/.test(s)) return 'list';
  if (/\b(concise|brief|short|one sentence|terse)\b/.test(s)) return 'concise';
  if (/\b(uppercase|upper case|shout|all caps)\b/.test(s)) return 'shout';
  return 'plain';
}

/** Prompts that ask for a plain transformation of their own text get it done. */
function instruction(prompt: string): string[] | undefined {
  const m = /^\s*(echo|repeat|reverse|uppercase|lowercase|count the words in|count words in|count words)\s*[:-]?\s*([\s\S]*)$/i.exec(prompt);
  if (!m) return undefined;
  const verb = m[1]!.toLowerCase();
  const body = m[2]!.trim();
  if (body === '') return undefined;
  switch (verb) {
    case 'echo':
    case 'repeat':
      return [body];
    case 'reverse':
      return [body.split(/\s+/).reverse().join(' ')];
    case 'uppercase':
      return [body.toUpperCase()];
    case 'lowercase':
      return [body.toLowerCase()];
    default: {
      const n = countTokens(body);
      return [`The text has ${n} word${n === 1 ? '' : 's'}.`];
    }
  }
}

function keywordsOf(prompt: string): string[] {
  const seen = new Set<string>();
  const words: string[] = [];
  for (const raw of prompt.match(/[\p{L}\p{N}][\p{L}\p{N}'-]*/gu) ?? []) {
    const word = raw.replace(/'s$/, '');
    const key = word.toLowerCase();
    if (key.length < 3 || STOP_WORDS.has(key) || seen.has(key)) continue;
    seen.add(key);
    // Names keep their capital; a sentence's first word does not.
    words.push(/^\p{Lu}\p{Ll}/u.test(word) && prompt.trimStart().startsWith(word) ? key : word);
  }
  // Longer words first (they carry the topic), ties in prompt order.
  return words
    .map((w, i) => ({ w, i }))
    .sort((a, b) => b.w.length - a.w.length || a.i - b.i)
    .slice(0, 4)
    .map((x) => x.w);
}

const listOf = (items: string[]) => (items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`);

function answer(prompt: string, choose: <T>(items: readonly T[]) => T, r: Rng, temperature: number): string[] {
  const trimmed = prompt.trim().replace(/\s+/g, ' ');
  const short = trimmed.length > 120 ? `${trimmed.slice(0, 117).replace(/\s+\S*$/, '')}…` : trimmed;
  // The quote keeps the prompt's own closing mark; a sentence without one gets a full stop.
  const quoted = /[.?!…]$/.test(short) ? `"${short}"` : `"${short}".`;
  const keywords = keywordsOf(prompt);
  const isQuestion = /\?\s*$/.test(trimmed) || /^(what|how|why|who|when|where|which|is|are|can|could|should|does|do)\b/i.test(trimmed);
  const main = keywords[0] ?? 'this';
  const rest = keywords.slice(1);

  const sentences: string[] = [];
  sentences.push(
    isQuestion
      ? choose([`Good question: ${quoted}`, `You asked: ${quoted}`, `Here is a short answer to ${quoted}`])
      : choose([`Here is a response to ${quoted}`, `You wrote: ${quoted}`, `Taking up your request: ${quoted}`]),
  );
  sentences.push(
    choose([
      `The heart of it is ${main}${rest.length ? `, and how it relates to ${listOf(rest)}` : ''}.`,
      `It mostly comes down to ${main}${rest.length ? `, seen together with ${listOf(rest)}` : ''}.`,
      `Start from ${main}${rest.length ? `; then bring in ${listOf(rest)}` : ''}.`,
    ]),
  );
  sentences.push(
    choose([
      `A useful first step is to say what ${main} means in your situation and what a good outcome looks like.`,
      `Think about what you already know about ${main} and which part is still unclear.`,
      `Picture a concrete example of ${main}; details make the rest easier to judge.`,
    ]),
  );
  sentences.push(
    choose([
      'This answer comes from the built-in local model, so treat it as a draft to refine.',
      'The local model wrote this offline; a larger model would go into more depth.',
      'That is the short version, made by the local model without any network.',
    ]),
  );
  if (temperature > 1) {
    const extra = keywords.length ? pick(r, keywords) : main;
    sentences.splice(
      3,
      0,
      pick(r, [
        `On a lighter note, ${extra} has surprised more than one expert.`,
        `Curiously, ${extra} turns up in places one would not expect.`,
        `One could even write a poem about ${extra}.`,
      ]),
    );
  }
  return sentences;
}

function render(sentences: string[], style: Style, prompt: string): string {
  switch (style) {
    case 'json':
      return JSON.stringify({ answer: sentences.join(' '), keywords: keywordsOf(prompt) }, null, 2);
    case 'list':
      return sentences.map((s) => `- ${s}`).join('\n');
    case 'concise':
      return sentences.slice(0, 2).join(' ');
    case 'shout':
      return sentences.join(' ').toUpperCase();
    default:
      return sentences.join(' ');
  }
}
