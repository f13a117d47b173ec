/**
 * Money exact for streamed door jobs under concurrency (docs/openai-compatible.md, Billing): twenty streamed
 * chat completions at once in one workspace, in front of an OpenAI deployment (the strict fake) with a
 * token-priced model. Eight clients leave after their first piece: the node drains three of them
 * (OPENAI_DRAINS_PER_NODE=3) to their end and cancels the other five, charged for what they streamed; two
 * upstream streams fail mid-answer; the rest are read to their end. Then every job is terminal, each reserved
 * once and settled once, none charged above its reservation, the finished ones charged their provider usage
 * exactly, and the balance equals the ledger.
 */
import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { TEST_PLAN, writeCatalogFile } from '../helpers/provider-service.ts';
import { startFakeOpenAi } from '../fakes/openai.ts';
import { moneyOf, serverQuery } from '../generations/flow.ts';
import { until } from '../catalog/support.ts';
import { drainingNow } from '../../http/routes/openai/answers.ts';

const JOBS = 20;
const LEAVING = 8;
const DRAINS = 3;
const FAILING_UPSTREAM = 2;
const CREDITS = 1_000_000;
/** Whole credits per token, so that each charge is its usage times the price, with no carry between jobs. */
const INPUT_PER_TOKEN = 1;
const OUTPUT_PER_TOKEN = 2;

const fake = await startFakeOpenAi();
t.teardown(() => fake.close());

const catalogFile = writeCatalogFile(t, { ...TEST_PLAN, monthlyCredits: CREDITS, concurrentJobs: JOBS }, [
  {
    id: 'acme/writer',
    mode: 'text_to_text',
    price: { per: 'tokens', inputPer1k: INPUT_PER_TOKEN * 1000, outputPer1k: OUTPUT_PER_TOKEN * 1000 },
    parameters: { prompt: { required: true }, systemPrompt: {}, temperature: {}, maxTokens: { maximum: 512, default: 256 } },
    deployments: [{ id: 'writer-openai', provider: 'openai', target: { model: 'gpt-4o-mini' } }],
  },
]);

const server = await startTestServer(t, {
  env: {
    CATALOG_FILE: catalogFile,
    OPENAI_BASE_URL: fake.url,
    OPENAI_API_KEY: fake.apiKey,
    OPENAI_TIMEOUT_MS: '30000',
    OPENAI_DRAINS_PER_NODE: String(DRAINS),
    ALLOW_PRIVATE_EGRESS: 'true',
  },
});
const query = serverQuery(server);

interface Read {
  /** The generation id, from the chunks' id. */
  id: string;
  text: string;
  usage: { prompt_tokens: number; completion_tokens: number } | null;
  error: unknown;
  done: boolean;
  left: boolean;
}

/**
 * One streamed request, read event by event; `leave` makes the client go away after its first piece of text.
 * `firstPiece` is called once that piece arrived (and, for a leaving client, once it has left).
 */
async function streamed(key: string, n: number, leave: boolean, firstPiece: () => void): Promise<Read> {
  const controller = new AbortController();
  const response = await fetch(`${server.url}/openai/v1/chat/completions`, {
    method: 'POST',
    headers: withKey(key),
    body: JSON.stringify({
      model: 'acme/writer',
      messages: [{ role: 'user', content: `Job ${n}: ${'tell me about the tides and the moon and the harbour lights '.repeat(1 + (n % 4))}` }],
      max_tokens: 200,
      stream: true,
      stream_options: { include_usage: true },
    }),
    signal: controller.signal,
  });
  if (response.status !== 200) throw new Error(`request ${n}: ${response.status} ${await response.text()}`);
  const read: Read = { id: '', text: '', usage: null, error: undefined, done: false, left: false };
  const decoder = new TextDecoder();
  let buffered = '';
  try {
    for await (const bytes of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(bytes, { stream: true });
      for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
        const data = buffered
          .slice(0, end)
          .split('\n')
          .filter((line) => line.startsWith('data: '))
          .map((line) => line.slice(6))
          .join('\n');
        buffered = buffered.slice(end + 2);
        if (data === '') continue;
        if (data === '[DONE]') {
          read.done = true;
          continue;
        }
        const event = JSON.parse(data);
        if (event.error) {
          read.error = event.error;
          continue;
        }
        read.id = event.id.slice('chatcmpl-'.length);
        if (event.usage) read.usage = event.usage;
        const piece: string = event.choices[0]?.delta.content ?? '';
        if (piece !== '' && read.text === '') {
          read.text += piece;
          if (leave) {
            controller.abort();
            read.left = true;
            firstPiece();
            return read;
          }
          firstPiece();
          continue;
        }
        read.text += piece;
      }
    }
  } catch (error) {
    if (!read.left) throw error;
  }
  return read;
}

t.test('twenty streamed door jobs at once, some left by their clients, some failing upstream: every job settled, money exact', async (t) => {
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);

  // Every upstream stream sends its first pieces, then waits at its fourth event until the gate opens: all
  // twenty are running and have streamed when the clients leave. Two of them fail after their sixth event.
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const pace = (index: number) => (index === 3 ? gate : undefined);
  for (let i = 0; i < JOBS; i++) {
    fake.next('/chat/completions', i < FAILING_UPSTREAM ? { kind: 'stream-error', afterChunks: 6, pace } : { kind: 'stream-paced', pace });
  }
  let firstPieces = 0;
  let allStreaming!: () => void;
  const streaming = new Promise<void>((resolve) => (allStreaming = resolve));
  const reads = Array.from({ length: JOBS }, (_, n) =>
    streamed(key, n, n < LEAVING, () => {
      if (++firstPieces === JOBS) allStreaming();
    }),
  );
  await streaming;

  // The node sees the eight clients leave: it drains three jobs (its bound) and cancels the other five.
  const cancelledCount = async () =>
    Number(
      (await query<{ n: string }>(`select count(*)::int8 as n from generations where workspace_id = ? and status = 'cancelled'`, [user.workspaceId]))[0]!.n,
    );
  await until(
    'the clients that left are drained or cancelled',
    async () => (drainingNow(server.services) === DRAINS && (await cancelledCount()) === LEAVING - DRAINS ? true : undefined),
    // A bound against hanging only, generous for a loaded machine.
    60_000,
  );
  open();
  const answers = await Promise.all(reads);

  const terminal = ['succeeded', 'failed', 'cancelled', 'expired'];
  type Row = {
    id: string;
    status: string;
    credits: number;
    usage: { inputTokens: number; outputTokens: number } | string | null;
    provider_job_id: string | null;
    text_output: string | null;
  };
  const rows = await until(
    'every job terminal',
    async () => {
      const all = await query<Row>('select id, status, credits, usage, provider_job_id, text_output from generations where workspace_id = ?', [
        user.workspaceId,
      ]);
      return all.length === JOBS && all.every((r) => terminal.includes(r.status)) ? all : undefined;
    },
    60_000,
  );
  const usageOf = (row: Row) => (typeof row.usage === 'string' ? JSON.parse(row.usage) : row.usage) as { inputTokens: number; outputTokens: number } | null;
  const counts = Object.fromEntries(terminal.map((s) => [s, rows.filter((r) => r.status === s).length]));
  t.comment(`statuses: ${JSON.stringify(counts)}`);
  t.equal(counts.cancelled, LEAVING - DRAINS, 'past the drain bound, the jobs whose clients left were cancelled');
  t.ok(counts.failed! <= FAILING_UPSTREAM, 'only jobs whose upstream stream failed failed');
  t.equal(counts.succeeded! + counts.failed! + counts.cancelled!, JOBS, 'none expired');
  t.equal(drainingNow(server.services), 0, 'no job left draining');

  // Each job: reserved once, settled once, charged what its ledger entries say and never above its reservation.
  const ledger = await query<{ generation_id: string; kind: string; credits: string; reserved_credits: string }>(
    'select generation_id, kind, credits, reserved_credits from credit_ledger where workspace_id = ? and generation_id is not null',
    [user.workspaceId],
  );
  let charged = 0;
  for (const row of rows) {
    const entries = ledger.filter((e) => e.generation_id === row.id);
    const kinds = (kind: string) => entries.filter((e) => e.kind === kind).length;
    const reserved = entries.filter((e) => e.kind === 'reserve').reduce((sum, e) => sum + Number(e.reserved_credits), 0);
    const spent = -entries.reduce((sum, e) => sum + Number(e.credits), 0);
    const stillHeld = entries.reduce((sum, e) => sum + Number(e.reserved_credits), 0);
    const label = `${row.id} (${row.status})`;
    t.equal(kinds('reserve'), 1, `${label}: reserved once`);
    t.ok(kinds('capture') <= 1 && kinds('release') <= 1 && kinds('capture') + kinds('release') >= 1, `${label}: settled once`);
    t.equal(stillHeld, 0, `${label}: nothing still held`);
    t.equal(spent, row.credits, `${label}: the ledger spent what the job says it was charged`);
    t.ok(row.credits <= reserved, `${label}: charged ${row.credits} ≤ its reservation of ${reserved}`);
    const usage = usageOf(row);
    if (row.status === 'succeeded') {
      const reported = fake.usage.get(row.provider_job_id ?? '');
      t.ok(reported, `${label}: the provider reported its usage`);
      t.same(usage, { inputTokens: reported!.prompt_tokens, outputTokens: reported!.completion_tokens }, `${label}: its usage is the provider's`);
      t.equal(row.credits, reported!.prompt_tokens * INPUT_PER_TOKEN + reported!.completion_tokens * OUTPUT_PER_TOKEN, `${label}: charged it exactly`);
    } else {
      // Cancelled or failed after its first piece: charged for what it streamed, counted.
      t.ok(usage && usage.inputTokens > 0 && usage.outputTokens > 0, `${label}: its tokens counted (${JSON.stringify(usage)})`);
      t.ok(row.credits > 0, `${label}: charged for what it streamed`);
      t.equal(
        row.credits,
        Math.min(reserved, usage!.inputTokens * INPUT_PER_TOKEN + usage!.outputTokens * OUTPUT_PER_TOKEN),
        `${label}: its counted tokens at the price`,
      );
    }
    charged += row.credits;
  }

  // What the clients that stayed read is what the jobs were and were charged.
  const byId = new Map(rows.map((r) => [r.id, r]));
  for (const answer of answers.filter((a) => !a.left)) {
    const row = byId.get(answer.id)!;
    if (row.status === 'succeeded') {
      t.ok(answer.done, `${answer.id}: [DONE]`);
      t.equal(answer.text, row.text_output, `${answer.id}: the streamed text is the job answer`);
      const usage = usageOf(row)!;
      t.same(answer.usage, { prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens, total_tokens: usage.inputTokens + usage.outputTokens });
    } else {
      t.equal(row.status, 'failed', `${answer.id}: a job whose client stayed failed only upstream`);
      t.ok(answer.error, `${answer.id}: its stream ended with an error event`);
    }
  }
  t.equal(new Set(answers.map((a) => a.id)).size, JOBS, 'twenty requests, twenty generations');

  const money = await moneyOf(query, user.workspaceId);
  t.equal(money.available, money.ledgerAvailable, 'balance equals ledger');
  t.equal(money.reserved, 0, 'nothing reserved');
  t.equal(money.ledgerReserved, 0, 'the ledger holds no reservation');
  t.same(money.reservations, [], 'no reservation left open');
  t.equal(CREDITS - money.available, charged, 'the balance moved by the sum of the charges');
});
