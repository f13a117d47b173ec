// A language model's prediction streams its text from `urls.stream` (server-sent events): the fake's stream as
// Replicate documents it, read raw and by Replicate's own client, and the adapter's `output` deltas from it.
import { createRequire } from 'node:module';
import t from 'tap';
import type { AdapterUpdate } from '../../providers/adapter.ts';
import { adapterFor, jobFor, png, recorder, startReplicateFake, TOKEN, type ReplicateFake } from '../fakes/replicate.ts';

// replicate 1.4.0's parser of a prediction's stream (lib/stream.js, CommonJS, untyped).
const { createReadableStream } = createRequire(import.meta.url)('replicate/lib/stream.js') as {
  createReadableStream(config: {
    url: string;
    fetch: typeof fetch;
    options?: { useFileOutput?: boolean };
  }): AsyncIterable<{ event: string; id: string; data: string }>;
};

let fake: ReplicateFake;
t.before(async () => {
  fake = await startReplicateFake({ token: TOKEN });
});
t.teardown(() => fake.close());

const deltas = (updates: AdapterUpdate[]) => updates.flatMap((u) => (u.type === 'output' ? [u.delta] : []));

/** A recorder whose `until` resolves once its updates satisfy a check (rejects, naming them, after a guard). */
function watched() {
  const rec = recorder();
  const waiters = new Set<{ check: (updates: AdapterUpdate[]) => boolean; resolve: () => void }>();
  return {
    ...rec,
    report(update: AdapterUpdate) {
      rec.report(update);
      for (const waiter of waiters) {
        if (waiter.check(rec.updates)) {
          waiters.delete(waiter);
          waiter.resolve();
        }
      }
    },
    until(check: (updates: AdapterUpdate[]) => boolean, what: string, guardMs = 5_000): Promise<void> {
      if (check(rec.updates)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${what}: not within ${guardMs} ms; got ${JSON.stringify(rec.updates)}`)), guardMs);
        waiters.add({
          check,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
  };
}

/** The promise's value, or a rejection naming `what` after the guard (never a wait for state by itself). */
function within<T>(promise: Promise<T>, what: string, guardMs = 5_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${guardMs} ms`)), guardMs);
  });
  return Promise.race([promise, guard]).finally(() => clearTimeout(timer));
}

const succeeded = (update: AdapterUpdate) => {
  if (update.type !== 'succeeded') throw new Error(`expected succeeded, got ${JSON.stringify(update)}`);
  return update;
};
const failed = (update: AdapterUpdate) => {
  if (update.type !== 'failed') throw new Error(`expected failed, got ${JSON.stringify(update)}`);
  return update;
};

async function create(path: string, body: Record<string, unknown>) {
  const response = await fetch(`${fake.origin}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as Record<string, any> };
}

const SSE = { accept: 'text/event-stream', 'cache-control': 'no-store' };

/** Reads a response body until its text so far matches `until` (or to its end without one); returns what was read. */
async function readUntil(reader: ReadableStreamDefaultReader<Uint8Array>, until?: RegExp): Promise<string> {
  const decoder = new TextDecoder();
  let text = '';
  while (!until?.test(text)) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  return text;
}

t.test("the fake's stream, as Replicate documents it", async (t) => {
  t.test('urls.stream without asking; output events, a multi-line piece as several data lines, then done with {}', async (t) => {
    const pieces = ['Once', ' upon', ' a time\nthere was', ' a fake'];
    fake.scenario('model:acme/raw-stream', { advance: 'manual', stream: { paceMs: 1 }, end: { status: 'succeeded', output: pieces } });
    const { status, json: p } = await create('/v1/models/acme/raw-stream/predictions', { input: { prompt: 'raw' } });
    t.equal(status, 201);
    t.equal(p.urls.stream, `${fake.origin}/streaming/v1/predictions/${p.id}`, 'no "stream": true needed');
    fake.advance(p.id);
    fake.advance(p.id);

    // No token, as Replicate's JavaScript client opens it.
    const response = await fetch(p.urls.stream, { headers: SSE });
    t.equal(response.status, 200);
    t.match(response.headers.get('content-type'), /^text\/event-stream/);
    const at = Math.floor(Date.parse(p.created_at) / 1000);
    t.equal(
      await response.text(),
      [
        `event: output\nid: ${at}:0\ndata: Once\n\n`,
        `event: output\nid: ${at}:1\ndata:  upon\n\n`,
        `event: output\nid: ${at}:2\ndata:  a time\ndata: there was\n\n`,
        `event: output\nid: ${at}:3\ndata:  a fake\n\n`,
        `event: done\nid: ${at}:4\ndata: {}\n\n`,
      ].join(''),
    );

    const events: { event: string; data: string }[] = [];
    for await (const { event, data } of createReadableStream({ url: p.urls.stream, fetch, options: { useFileOutput: false } })) events.push({ event, data });
    t.same(events, [...pieces.map((data) => ({ event: 'output', data })), { event: 'done', data: '{}' }], "Replicate's client reads the same");

    const final = (await (await fetch(`${fake.baseUrl}/predictions/${p.id}`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as Record<
      string,
      unknown
    >;
    t.same(final.output, pieces, "a language model's output is the array of its pieces");
  });

  t.test('pieces come on a pace while the prediction runs, before its end', async (t) => {
    fake.scenario('model:acme/paced', { advance: 'manual', stream: { paceMs: 5 }, end: { status: 'succeeded', output: ['a', 'b', 'c', 'd', 'e', 'f'] } });
    const { json: p } = await create('/v1/models/acme/paced/predictions', { input: { prompt: 'paced' } });
    const response = await fetch(p.urls.stream, { headers: { ...SSE, authorization: `Bearer ${TOKEN}` } });
    t.equal(response.status, 200, 'the right token is taken too');
    fake.advance(p.id);
    const reader = response.body!.getReader();
    let text = await readUntil(reader, /(event: output[\s\S]*){2}/);
    t.equal(fake.prediction(p.id)?.status, 'processing', 'two pieces while it still runs');
    t.notMatch(text, /event: done/);
    t.ok((fake.prediction(p.id)!.output as string[]).length >= 2, 'its output holds the pieces so far');
    fake.advance(p.id);
    text += await readUntil(reader);
    t.equal((text.match(/event: output/g) ?? []).length, 6);
    t.match(text, /event: done\nid: \d+:6\ndata: \{\}\n\n$/);
  });

  t.test('a failure: error with its detail, then done with reason error; a cancel: done with reason canceled', async (t) => {
    fake.scenario('model:acme/stream-fails', {
      advance: 'manual',
      stream: { pieces: ['Half', ' never sent'], paceMs: 5 },
      end: { status: 'failed', error: 'CUDA out of memory' },
    });
    const { json: failing } = await create('/v1/models/acme/stream-fails/predictions', { input: { prompt: 'fails' } });
    const reader = (await fetch(failing.urls.stream, { headers: SSE })).body!.getReader();
    fake.advance(failing.id);
    let failure = await readUntil(reader, /data: Half\n\n/);
    // It fails with a piece unsent: that piece never comes.
    fake.advance(failing.id);
    failure += await readUntil(reader);
    t.match(
      failure,
      /^event: output\nid: \d+:0\ndata: Half\n\nevent: error\nid: \d+:1\ndata: \{"detail":"CUDA out of memory"\}\n\nevent: done\nid: \d+:2\ndata: \{"reason":"error"\}\n\n$/,
    );

    fake.scenario('model:acme/stream-canceled', { advance: 'manual', stream: {}, end: { status: 'succeeded', output: ['never'] } });
    const { json: canceled } = await create('/v1/models/acme/stream-canceled/predictions', { input: { prompt: 'canceled' } });
    const cancel = await fetch(canceled.urls.cancel, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
    t.equal(cancel.status, 200);
    t.match(await (await fetch(canceled.urls.stream, { headers: SSE })).text(), /^event: done\nid: \d+:0\ndata: \{"reason":"canceled"\}\n\n$/);
  });

  t.test('what it refuses', async (t) => {
    fake.scenario('model:acme/streams', { advance: 'manual', stream: {}, end: { status: 'succeeded', output: ['x'] } });
    fake.scenario('model:acme/no-stream', { end: { status: 'succeeded', output: ['x'] } });
    const { json: p } = await create('/v1/models/acme/streams/predictions', { input: { prompt: 'refusals' }, stream: true });
    t.ok(p.urls.stream, 'the deprecated "stream": true changes nothing for a model that streams');
    t.equal((await fetch(p.urls.stream, { headers: { ...SSE, authorization: 'Bearer r8_wrong' } })).status, 401, 'a wrong token');
    t.equal((await fetch(p.urls.stream, { headers: { accept: 'application/json' } })).status, 406, 'not asking for text/event-stream');
    t.equal((await fetch(p.urls.stream, { method: 'POST', headers: SSE })).status, 405);
    t.equal((await fetch(`${fake.origin}/streaming/v1/predictions/nosuchprediction`, { headers: SSE })).status, 404);
    t.match(await create('/v1/models/acme/no-stream/predictions', { input: {}, stream: true }), { status: 422 }, 'a model that does not stream');
    t.match(await create('/v1/models/acme/streams/predictions', { input: {}, stream: 'yes' }), { status: 422 });
    const plain = await create('/v1/models/acme/no-stream/predictions', { input: {} });
    t.equal(plain.json.urls.stream, undefined, 'no stream URL for a model that does not stream');
  });
});

t.test('the adapter reports the stream as deltas', async (t) => {
  t.test('each piece as it comes, in order, before succeeded; the deltas make textOutput', async (t) => {
    const pieces = ['Hello', ',', ' wor', 'ld', '!\nSecond line', ' — ünïcode ✓'];
    fake.scenario('model:meta/llama-stream', {
      advance: 'manual',
      stream: { paceMs: 5 },
      end: { status: 'succeeded', output: pieces, metrics: { input_token_count: 4, output_token_count: 6 } },
    });
    const adapter = adapterFor(fake, { model: 'meta/llama-stream' });
    const rec = watched();
    const job = jobFor({ mode: 'text_to_text' });
    const { providerJobId } = await adapter.submit(job, rec.report);
    fake.advance(providerJobId);
    await rec.until((u) => deltas(u).length >= 2, 'two deltas');
    t.equal(fake.prediction(providerJobId)?.status, 'processing', 'deltas came while the prediction ran');
    t.same(rec.terminals(), []);
    fake.advance(providerJobId);

    const end = succeeded(await rec.ended);
    t.equal(end.textOutput, pieces.join(''), "the prediction's output, joined");
    t.same(deltas(rec.updates), pieces, 'one delta per output event, in order, whole');
    t.equal(deltas(rec.updates).join(''), end.textOutput);
    const lastDelta = rec.updates.findLastIndex((u) => u.type === 'output');
    t.ok(lastDelta < rec.updates.indexOf(end), 'every delta before the terminal update');
    t.ok(rec.updates.findIndex((u) => u.type === 'running') < rec.updates.findIndex((u) => u.type === 'output'), 'running before the first delta');
    t.equal(rec.updates.filter((u) => u.type === 'running').length, 1);
    t.same(end.usage, { inputTokens: 4, outputTokens: 6 });

    const [opened, ...more] = fake.streams.filter((s) => s.predictionId === providerJobId);
    t.same(more, [], 'one connection');
    t.equal(opened?.headers.accept, 'text/event-stream');
    t.equal(opened?.headers['cache-control'], 'no-store');
    t.equal(opened?.headers.authorization, `Bearer ${TOKEN}`);
    t.equal(opened?.closed, 'done');
    t.same(fake.creates.find((c) => c.predictionId === providerJobId)?.body, { input: job.input }, 'no deprecated "stream": true');
    await adapter.close();
  });

  t.test("the end told by a webhook as the prediction ends, before the stream's last pieces are read: they still come first", async (t) => {
    const pieces = Array.from({ length: 40 }, (_, i) => `p${i} `);
    fake.scenario('model:acme/webhooked', { advance: 'manual', stream: { paceMs: 5 }, end: { status: 'succeeded', output: pieces } });
    const adapter = adapterFor(fake, { model: 'acme/webhooked' }, { pollIntervalMs: 10_000 });
    const rec = watched();
    const { providerJobId } = await adapter.submit(jobFor({ mode: 'text_to_text' }), rec.report);
    fake.advance(providerJobId);
    await rec.until((u) => deltas(u).length >= 1, 'a delta');
    // The rest of the pieces and done are written now; the `completed` webhook is delivered in the same turn.
    const completed = structuredClone(fake.advance(providerJobId));
    adapter.deliverEvent!(providerJobId, completed);
    const end = succeeded(await rec.ended);
    t.same(deltas(rec.updates), pieces, 'every piece');
    t.ok(rec.updates.findLastIndex((u) => u.type === 'output') < rec.updates.indexOf(end), 'before the terminal update');
    t.equal(deltas(rec.updates).join(''), end.textOutput);
    await adapter.close();
  });

  t.test('a prediction that fails: the deltas so far, then the failure the prediction tells', async (t) => {
    fake.scenario('model:acme/llm-fails', {
      advance: 'manual',
      stream: { pieces: ['Half', ' an answer', ' never sent'], paceMs: 5 },
      end: { status: 'failed', error: 'CUDA out of memory' },
    });
    const adapter = adapterFor(fake, { model: 'acme/llm-fails' });
    const rec = watched();
    const { providerJobId } = await adapter.submit(jobFor({ mode: 'text_to_text' }), rec.report);
    fake.advance(providerJobId);
    await rec.until((u) => deltas(u).length >= 2, 'two deltas');
    fake.advance(providerJobId);
    const end = failed(await rec.ended);
    t.equal(end.errorCode, 'provider_error');
    t.match(end.errorMessage, /CUDA out of memory/);
    t.same(deltas(rec.updates), ['Half', ' an answer']);
    t.ok(rec.updates.findLastIndex((u) => u.type === 'output') < rec.updates.indexOf(end));
    await adapter.close();
  });

  t.test('only text jobs read it', async (t) => {
    const url = fake.file('streamed.png', png(8, 8));
    fake.scenario('model:acme/streams-images', { processingPolls: 2, stream: { pieces: ['not text'] }, end: { status: 'succeeded', output: [url] } });
    const adapter = adapterFor(fake, { model: 'acme/streams-images' });
    const rec = recorder();
    const { providerJobId } = await adapter.submit(jobFor({ mode: 'text_to_image' }), rec.report);
    t.equal(succeeded(await rec.ended).files.length, 1);
    t.same(
      fake.streams.filter((s) => s.predictionId === providerJobId),
      [],
    );
    t.same(deltas(rec.updates), []);
    await adapter.close();
  });

  t.test('a stream URL on another host is not opened; the job still ends by its prediction', async (t) => {
    fake.scenario('model:acme/foreign-stream', {
      processingPolls: 3,
      stream: { origin: fake.origin.replace('127.0.0.1', 'localhost'), paceMs: 1 },
      end: { status: 'succeeded', output: ['from', ' the', ' poll'] },
    });
    const adapter = adapterFor(fake, { model: 'acme/foreign-stream' });
    const rec = recorder();
    const before = fake.counts.stream;
    const { providerJobId } = await adapter.submit(jobFor({ mode: 'text_to_text' }), rec.report);
    t.equal(succeeded(await rec.ended).textOutput, 'from the poll');
    t.match(fake.prediction(providerJobId)?.urls, { stream: /^http:\/\/localhost:/ });
    t.equal(fake.counts.stream, before, 'never connected to it (it is this fake, by another name)');
    t.same(deltas(rec.updates), []);
    await adapter.close();
  });
});

t.test('a stream that fails does not fail the job', async (t) => {
  t.test('reset after two pieces: the deltas stop, the prediction succeeds with its whole text', async (t) => {
    const pieces = ['one', ' two', ' three', ' four', ' five'];
    fake.scenario('model:acme/breaks', { advance: 'manual', stream: { paceMs: 5, breakAfter: 2 }, end: { status: 'succeeded', output: pieces } });
    const adapter = adapterFor(fake, { model: 'acme/breaks' });
    const rec = watched();
    const { providerJobId } = await adapter.submit(jobFor({ mode: 'text_to_text' }), rec.report);
    fake.advance(providerJobId);
    t.equal(await within(fake.streamClosed(providerJobId), 'the reset'), 'server');
    await rec.until((u) => deltas(u).length >= 2, 'the two pieces sent');
    t.same(rec.terminals(), [], 'a broken stream ends nothing');
    fake.advance(providerJobId);
    const end = succeeded(await rec.ended);
    t.equal(end.textOutput, pieces.join(''));
    t.same(deltas(rec.updates), pieces.slice(0, 2));
    t.equal(rec.terminals().length, 1);
    t.equal(fake.streams.filter((s) => s.predictionId === providerJobId).length, 1, 'not opened again');
    await adapter.close();
  });

  t.test('refused (503): no deltas, the job succeeds', async (t) => {
    fake.scenario('model:acme/stream-down', { processingPolls: 3, stream: { paceMs: 1 }, end: { status: 'succeeded', output: ['still', ' here'] } });
    fake.misbehave('stream', { status: 503 });
    const adapter = adapterFor(fake, { model: 'acme/stream-down' });
    const rec = recorder();
    const before = fake.counts.stream;
    await adapter.submit(jobFor({ mode: 'text_to_text' }), rec.report);
    t.equal(succeeded(await rec.ended).textOutput, 'still here');
    t.equal(fake.counts.stream, before + 1, 'it was asked for');
    t.same(deltas(rec.updates), []);
    await adapter.close();
  });

  t.test('larger than maxResponseBytes: cut there, the prediction still succeeds', async (t) => {
    const pieces = Array.from({ length: 300 }, (_, i) => `w${i} `);
    fake.scenario('model:acme/verbose', { advance: 'manual', stream: { paceMs: 1 }, end: { status: 'succeeded', output: pieces } });
    const adapter = adapterFor(fake, { model: 'acme/verbose' }, { maxResponseBytes: 4096 });
    const rec = watched();
    const { providerJobId } = await adapter.submit(jobFor({ mode: 'text_to_text' }), rec.report);
    fake.advance(providerJobId);
    t.equal(await within(fake.streamClosed(providerJobId), 'the cut'), 'client', 'the adapter closed it');
    const [connection] = fake.streams.filter((s) => s.predictionId === providerJobId);
    t.ok(connection!.outputs < pieces.length, 'before the stream was over');
    fake.advance(providerJobId);
    const end = succeeded(await rec.ended);
    const streamed = deltas(rec.updates);
    t.equal(end.textOutput, pieces.join(''), 'the whole text, from the prediction');
    t.ok(streamed.length > 0 && streamed.length < pieces.length, `some deltas, not all (${streamed.length})`);
    t.same(streamed, pieces.slice(0, streamed.length), 'a prefix, in order');
    // Each event is `event: output\nid: <s>:<n>\ndata: w<n> \n\n`, over 30 bytes: 4096 bytes hold fewer than 140.
    t.ok(streamed.length < 140, 'no more than fits in the bound');
    await adapter.close();
  });
});

t.test('cancel and close close the stream; resume does not open it', async (t) => {
  t.test('cancel: the connection closed by us, nothing more reported', async (t) => {
    fake.scenario('model:acme/cancel-stream', {
      advance: 'manual',
      stream: { paceMs: 5 },
      end: { status: 'succeeded', output: Array.from({ length: 200 }, (_, i) => `${i} `) },
    });
    const adapter = adapterFor(fake, { model: 'acme/cancel-stream' }, { pollIntervalMs: 10_000 });
    const rec = watched();
    const { providerJobId } = await adapter.submit(jobFor({ mode: 'text_to_text' }), rec.report);
    fake.advance(providerJobId);
    await rec.until((u) => deltas(u).length >= 1, 'a delta');
    // Replicate fails to cancel: only our side can close the stream, which goes on sending.
    fake.misbehave('cancel', { status: 500 });
    await adapter.cancel(providerJobId);
    t.equal(await within(fake.streamClosed(providerJobId), 'the stream closed'), 'client');
    const reported = rec.updates.length;
    t.equal(fake.prediction(providerJobId)?.status, 'processing', 'still running at Replicate');
    fake.advance(providerJobId);
    t.equal(rec.updates.length, reported, 'nothing after the cancel');
    t.same(rec.terminals(), []);
    await adapter.close();
  });

  t.test('close: every stream closed', async (t) => {
    fake.scenario('model:acme/close-stream', {
      advance: 'manual',
      stream: { paceMs: 5 },
      end: { status: 'succeeded', output: Array.from({ length: 200 }, (_, i) => `${i} `) },
    });
    const adapter = adapterFor(fake, { model: 'acme/close-stream' }, { pollIntervalMs: 10_000 });
    const rec = watched();
    const { providerJobId } = await adapter.submit(jobFor({ mode: 'text_to_text' }), rec.report);
    fake.advance(providerJobId);
    await rec.until((u) => deltas(u).length >= 1, 'a delta');
    await adapter.close();
    t.equal(await within(fake.streamClosed(providerJobId), 'the stream closed'), 'client');
    fake.advance(providerJobId);
    t.same(rec.terminals(), []);
  });

  t.test('resume after a restart: the outcome comes, the stream is not opened again', async (t) => {
    const pieces = ['before', ' the', ' crash', ' and', ' after'];
    fake.scenario('model:acme/resumed-stream', { advance: 'manual', stream: { paceMs: 5 }, end: { status: 'succeeded', output: pieces } });
    const first = adapterFor(fake, { model: 'acme/resumed-stream' }, { pollIntervalMs: 10_000 });
    const job = jobFor({ mode: 'text_to_text' });
    const dying = watched();
    const { providerJobId } = await first.submit(job, dying.report);
    fake.advance(providerJobId);
    await dying.until((u) => deltas(u).length >= 1, 'a delta');
    await first.close(); // the process died
    await within(fake.streamClosed(providerJobId), 'its stream closed');
    fake.advance(providerJobId);

    const second = adapterFor(fake, { model: 'acme/resumed-stream' });
    const rec = recorder();
    second.resume(providerJobId, job, rec.report);
    t.equal(succeeded(await rec.ended).textOutput, pieces.join(''));
    t.same(deltas(rec.updates), [], 'no deltas after a resume');
    t.equal(fake.streams.filter((s) => s.predictionId === providerJobId).length, 1, 'only the first process opened it');
    await second.close();
  });
});
