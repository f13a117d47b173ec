import t from 'tap';
import { SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { startTestServer } from '../helpers/server.ts';
import { cancelGeneration, createGeneration, eventually, getGeneration, tenant } from '../webhooks/support.ts';

const providerSpanOf = (spans: ReadableSpan[], id: string) => spans.find((s) => s.name === 'provider local' && s.attributes['generation.id'] === id);

t.test('a job that ends before its provider answers still ends its provider span, saying how the job ended', async (t) => {
  const exporter = new InMemorySpanExporter();
  // The local provider never answers within the test: the job ends only by its cancel.
  const server = await startTestServer(t, { spanExporter: exporter, env: { LOCAL_PROVIDER_LATENCY_MS: '600000' } });
  const who = await tenant(server);

  const job = await createGeneration(server, who, 'never answered');
  await eventually(
    async () => (['submitted', 'running'].includes((await getGeneration(server, who, job.id)).status) ? true : undefined),
    'the job is with its provider',
  );
  t.equal(providerSpanOf(exporter.getFinishedSpans(), job.id), undefined, 'while the provider works, its span is open');

  await cancelGeneration(server, who, job.id);
  const span = await eventually(async () => providerSpanOf(exporter.getFinishedSpans(), job.id), 'the provider span is exported after the cancel');
  t.equal(span.attributes['generation.outcome'], 'cancelled', 'the span says the job was cancelled');
  t.not(span.status.code, SpanStatusCode.ERROR, 'a cancel is no error of the provider call');
  t.equal(span.attributes['error.type'], undefined);
  t.equal((await getGeneration(server, who, job.id)).status, 'cancelled');
});

t.test("a provider that answers ends its span once, with no outcome added by the job's end", async (t) => {
  const exporter = new InMemorySpanExporter();
  const server = await startTestServer(t, { spanExporter: exporter, env: { LOCAL_PROVIDER_LATENCY_MS: '0' } });
  const who = await tenant(server);

  const job = await createGeneration(server, who, 'answered');
  await eventually(async () => ((await getGeneration(server, who, job.id)).status === 'succeeded' ? true : undefined), 'the job succeeds');
  const span = await eventually(async () => providerSpanOf(exporter.getFinishedSpans(), job.id), 'the provider span is exported');
  t.equal(
    exporter.getFinishedSpans().filter((s) => s.name === 'provider local' && s.attributes['generation.id'] === job.id).length,
    1,
    'one provider span, ended once',
  );
  t.equal(span.attributes['generation.outcome'], undefined, "ended by the provider's own answer");
  t.not(span.status.code, SpanStatusCode.ERROR);
});
