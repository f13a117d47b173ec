import t from 'tap';
import { inputTokenBound, reservationOf } from '../../domain/catalog/pricing.ts';

/**
 * The most input tokens a conversation (the OpenAI-compatible door) can be, which its reservation is made of
 * (docs/money.md, Prices): every byte of its messages' text and tool calls, its tools' definitions, and each
 * message's overhead, so that what a provider reports never exceeds what was held.
 */

t.test('a conversation: its bytes, its tool calls, its tools, and the overhead of each message', async (t) => {
  const messages = [
    { role: 'system', content: 'be brief' },
    { role: 'user', content: 'héllo' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
  ];
  const calls = Buffer.byteLength(JSON.stringify(messages[2]!.tool_calls), 'utf8');
  const texts = 8 + 6; // 'be brief', and 'héllo' in UTF-8
  t.equal(inputTokenBound({ messages }), texts + calls + 3 * 8 + 8, 'three messages of 8 tokens each, and 8 around them');
  const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }];
  t.equal(inputTokenBound({ messages, tools }), texts + calls + Buffer.byteLength(JSON.stringify(tools), 'utf8') + 3 * 8 + 8, "the tools' definitions count");
  t.equal(inputTokenBound({ messages: [], prompt: 'ignored' }), 8, 'a conversation is its messages, not a prompt');
});

t.test("a conversation's reservation holds its bound and its maxTokens at the price", async (t) => {
  const price = { per: 'tokens' as const, inputPer1k: 1, outputPer1k: 2 };
  const messages = [{ role: 'user', content: 'x'.repeat(984) }];
  // 984 bytes + 8 + 8 = 1,000 input tokens at 1 credit per 1k, and 500 output tokens at 2 per 1k: 2 credits.
  t.equal(reservationOf(price, { messages, maxTokens: 500 }), 2);
  t.equal(reservationOf(price, { messages, maxTokens: 501 }), 3, 'a billionth over rounds up to a whole credit');
});
