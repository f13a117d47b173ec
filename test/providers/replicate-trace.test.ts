import t from 'tap';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { createGeneration, isTerminal, waitFor } from '../generations/flow.ts';
import { png, startReplicateFake, TOKEN, VERSION } from '../fakes/replicate.ts';
import { providerCatalogFile } from '../helpers/provider-catalog.ts';
import { eventually } from '../helpers/eventually.ts';

/**
 * A Replicate job in its trace: the provider's span in the trace of the create, and each call it makes under it
 * (the create, the polls, the output's download), as undici's instrumentation records them.
 */
t.test("each call to Replicate is a span under the job's provider span, in the trace of its create", async (t) => {
  const fake = await startReplicateFake({ token: TOKEN });
  t.teardown(() => fake.close());
  fake.scenario(`version:${VERSION}`, { startingPolls: 1, processingPolls: 1, end: { status: 'succeeded', output: fake.file('traced.png', png(8, 8)) } });
  const catalog = providerCatalogFile(t, [
    {
      id: 'acme/traced',
      mode: 'text_to_image',
      credits: 1,
      parameters: { prompt: { required: true } },
      deployment: { id: 'traced-replicate', provider: 'replicate', target: { version: VERSION } },
    },
  ]);
  const exporter = new InMemorySpanExporter();
  const server = await startTestServer(t, {
    spanExporter: exporter,
    env: { CATALOG_FILE: catalog, ALLOW_PRIVATE_EGRESS: 'true', REPLICATE_API_TOKEN: TOKEN, REPLICATE_BASE_URL: fake.baseUrl, PROVIDER_POLL_MS: '20' },
  });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_image', model: 'acme/traced', params: { prompt: 'a traced cat' } });
  t.equal(created.status, 201, JSON.stringify(created.body));
  const done = await waitFor(server, key, user.workspaceId, created.body.id, isTerminal, 'a terminal state');
  t.equal(done.status, 'succeeded', `${done.errorCode} ${done.errorMessage}`);
  const spans = await eventually(
    () => {
      const finished = exporter.getFinishedSpans();
      return finished.some((s) => s.name === 'provider replicate') && finished;
    },
    { timeoutMs: 20_000, everyMs: 20, what: 'the provider span' },
  );
  const provider = spans.find((s) => s.name === 'provider replicate' && s.attributes['generation.id'] === created.body.id);
  t.match(provider?.attributes, { 'gen_ai.provider.name': 'replicate', 'generation.deployment': 'traced-replicate' });
  const create = spans.find((s) => s.name === 'POST /v1/generations');
  t.equal(provider?.spanContext().traceId, create?.spanContext().traceId, 'in the trace of the create');
  const calls = spans.filter((s) => s.parentSpanContext?.spanId === provider?.spanContext().spanId && s.attributes['http.request.method'] !== undefined);
  const urls = calls.map((s) => `${s.attributes['http.request.method']} ${new URL(String(s.attributes['url.full'])).pathname}`);
  t.ok(urls.includes('POST /v1/predictions'), `the create: ${urls.join(', ')}`);
  t.ok(urls.filter((u) => u.startsWith('GET /v1/predictions/')).length >= 1, 'the polls');
  t.ok(urls.includes('GET /files/traced.png'), "the output's download");
});
