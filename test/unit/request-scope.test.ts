import t from 'tap';
import { context, createContextKey, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { currentRequestId, RequestScopeContextManager, runInRequest } from '../../runtime/request-scope.ts';

const KEY = createContextKey('test value');
// biome-ignore lint/suspicious/noShadowRestrictedNames: the name says what it reads; Object.prototype.valueOf is not used here.
const valueOf = () => context.active().getValue(KEY);

t.test('the request scope and the trace context are one store: entering either keeps the other', async (t) => {
  const manager = new RequestScopeContextManager();
  t.ok(context.setGlobalContextManager(manager), 'registered as the global context manager');
  t.teardown(() => context.disable());
  const traced = ROOT_CONTEXT.setValue(KEY, 'span of req_a');

  runInRequest(
    'req_a',
    () => {
      t.equal(currentRequestId(), 'req_a');
      t.equal(valueOf(), 'span of req_a', 'the request and its trace context are entered at once');
      context.with(ROOT_CONTEXT.setValue(KEY, 'inner'), () => {
        t.equal(valueOf(), 'inner', 'context.with enters a trace context');
        t.equal(currentRequestId(), 'req_a', 'and keeps the request id');
      });
      runInRequest(
        'req_b',
        () => {
          t.equal(currentRequestId(), 'req_b', 'another request is entered');
          t.equal(valueOf(), 'span of req_a', 'in the current trace context, none given');
        },
        undefined,
      );
      runInRequest(
        undefined,
        () => {
          t.equal(currentRequestId(), undefined, 'leaving the request (a job of no request)');
          t.equal(valueOf(), 'span of req_a', 'keeps the trace context');
        },
        undefined,
      );
      t.equal(currentRequestId(), 'req_a', 'each is left when its function returns');
    },
    undefined,
    traced,
  );
  t.equal(currentRequestId(), undefined);
  t.equal(context.active(), ROOT_CONTEXT);
});

t.test("the scope follows the work across awaits, and two requests never see each other's", async (t) => {
  t.ok(context.setGlobalContextManager(new RequestScopeContextManager()));
  t.teardown(() => context.disable());
  const seen = await Promise.all(
    ['req_1', 'req_2'].map((id) =>
      runInRequest(
        id,
        async () => {
          await new Promise((resolve) => setTimeout(resolve, id === 'req_1' ? 20 : 5));
          await null;
          return `${currentRequestId()} ${String(valueOf())}`;
        },
        undefined,
        ROOT_CONTEXT.setValue(KEY, `trace of ${id}`),
      ),
    ),
  );
  t.same(seen, ['req_1 trace of req_1', 'req_2 trace of req_2']);
});

t.test("a stopped SDK's trace contexts are not active any more; the request id stays", async (t) => {
  const manager = new RequestScopeContextManager();
  context.setGlobalContextManager(manager);
  await runInRequest(
    'req_x',
    async () => {
      t.equal(valueOf(), 'before');
      context.disable(); // what the telemetry shutdown does
      context.setGlobalContextManager(new RequestScopeContextManager()); // the next start in this process
      await null;
      t.equal(context.active(), ROOT_CONTEXT, 'the old context is retired');
      t.equal(currentRequestId(), 'req_x', 'the request id is not');
    },
    undefined,
    ROOT_CONTEXT.setValue(KEY, 'before'),
  );
  context.disable();
});

t.test('attach sets the trace context until disposed, keeping the request id', async (t) => {
  context.setGlobalContextManager(new RequestScopeContextManager());
  t.teardown(() => context.disable());
  const manager = new RequestScopeContextManager();
  runInRequest(
    'req_y',
    () => {
      const token = manager.attach(ROOT_CONTEXT.setValue(KEY, 'attached'));
      t.equal(valueOf(), 'attached');
      t.equal(currentRequestId(), 'req_y');
      token.dispose();
      token.dispose();
      t.equal(valueOf(), undefined, 'disposed: the context before');
      t.equal(currentRequestId(), 'req_y');
    },
    undefined,
  );
  t.equal(trace.getActiveSpan(), undefined);
});
