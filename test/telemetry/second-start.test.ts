import t from 'tap';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { startTestServer } from '../helpers/server.ts';
import { signUp } from '../helpers/identity.ts';

// Tests start several services in one process (a group of test files, test/groups/, does too): each traced
// start enables the client instrumentations again that the previous one's shutdown disabled. Found by a
// group where a traced server before test/telemetry/flow.test.ts left its statements and Redis commands
// without spans.
t.test("a traced start after another's stop still has its statements' (and Redis commands') spans", async (t) => {
  for (const round of ['first', 'second']) {
    await t.test(`the ${round} traced server`, async (t) => {
      const exporter = new InMemorySpanExporter();
      const server = await startTestServer(t, { spanExporter: exporter });
      await signUp(server);
      const spans = exporter.getFinishedSpans();
      const statements = spans.filter((s) => s.kind === SpanKind.CLIENT && s.attributes['db.system.name'] === 'postgresql');
      t.ok(statements.length > 0, 'the sign-up made statement spans');
      if (server.config.redisUrl) {
        t.ok(
          spans.some((s) => s.attributes['db.system.name'] === 'redis'),
          'and Redis command spans',
        );
      }
      await server.stop();
    });
  }
});
