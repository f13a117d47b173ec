/**
 * A chat request as a job (docs/openai-compatible.md): the conversation and the chat fields a deployment may
 * take besides the catalog's parameters, what each deployment takes of them, and the prompt template that
 * turns a conversation into one prompt for a deployment that takes a prompt only. Pure: no I/O.
 */

/** What a deployment may declare it takes of a chat request (catalog `capabilities.chat`). */
export const CHAT_CAPABILITIES = ['messages', 'response_format', 'tools'] as const;
export type ChatCapability = (typeof CHAT_CAPABILITIES)[number];

/** One message of a conversation, as OpenAI's chat completions take it (text content only). */
export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content: string;
  name?: string;
  tool_call_id?: string;
  tool_calls?: unknown[];
}

/**
 * The job parameters a chat request adds besides the catalog's own (prompt, systemPrompt, temperature,
 * maxTokens, seed): kept with the job, checked by the door, not by the model's parameterSchema.
 */
export const CHAT_PARAMS = ['messages', 'topP', 'stop', 'user', 'responseFormat', 'tools', 'toolChoice'] as const;
const CHAT_PARAM_SET: ReadonlySet<string> = new Set(CHAT_PARAMS);

export function isChatParam(name: string): boolean {
  return CHAT_PARAM_SET.has(name);
}

/** What a deployment takes of a chat request: its declared capabilities, or by default `messages` for OpenAI's kind only. */
export function chatCapabilitiesOf(deployment: { provider: string; capabilities: { chat?: readonly ChatCapability[] } }): readonly ChatCapability[] {
  return deployment.capabilities.chat ?? (deployment.provider === 'openai' ? ['messages'] : []);
}

/** The capabilities a job's chat params need of its deployment (`messages` is never needed: the template serves). */
export function chatNeedsOf(params: Record<string, unknown>): ChatCapability[] {
  return [...(params.responseFormat !== undefined ? (['response_format'] as const) : []), ...(params.tools !== undefined ? (['tools'] as const) : [])];
}

/** The system and developer messages, joined: what a prompt-only deployment gets as its system prompt. */
export function systemOf(messages: readonly ChatMessage[]): string {
  return messages
    .filter((m) => m.role === 'system' || m.role === 'developer')
    .map((m) => m.content)
    .join('\n\n');
}

/**
 * The prompt a prompt-only deployment gets from a conversation (the documented template). One user message
 * and nothing else but system messages: its text as it is. Otherwise every turn but the system ones, in
 * order, as `User: …`, `Assistant: …` (a tool's answer as `Tool: …`), separated by a blank line, ending with
 * `Assistant:` for the model to go on.
 */
export function promptOfMessages(messages: readonly ChatMessage[]): string {
  const turns = messages.filter((m) => m.role !== 'system' && m.role !== 'developer');
  if (turns.length === 1 && turns[0]!.role === 'user') return turns[0]!.content;
  const label = { user: 'User', assistant: 'Assistant', tool: 'Tool' } as const;
  return [...turns.map((m) => `${label[m.role as keyof typeof label]}: ${m.content}`), 'Assistant:'].join('\n\n');
}

/** Bytes of every message's text and tool calls: with the roles' overhead, the most input tokens the conversation can be. */
export function messagesBytes(messages: unknown): { bytes: number; count: number } {
  if (!Array.isArray(messages)) return { bytes: 0, count: 0 };
  let bytes = 0;
  for (const message of messages) {
    const { content, tool_calls: calls } = (message ?? {}) as { content?: unknown; tool_calls?: unknown };
    if (typeof content === 'string') bytes += Buffer.byteLength(content, 'utf8');
    if (calls !== undefined) bytes += Buffer.byteLength(JSON.stringify(calls), 'utf8');
  }
  return { bytes, count: messages.length };
}
