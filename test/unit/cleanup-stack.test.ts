import t from 'tap';
import { CleanupStack } from '../../runtime/cleanup-stack.ts';

const tick = () => new Promise((resolve) => setImmediate(resolve));

t.test('clean-ups run last registered first, each awaited before the next', async (t) => {
  const stack = new CleanupStack();
  const ran: string[] = [];
  stack.defer(() => ran.push('first'));
  stack.defer(async () => {
    await tick();
    ran.push('second, after a turn of the loop');
  });
  stack.use({ [Symbol.dispose]: () => ran.push('third, a Disposable') });
  const resource = { [Symbol.asyncDispose]: async () => void ran.push('fourth, an AsyncDisposable') };
  t.equal(stack.use(resource), resource, 'use returns what it was given');
  t.equal(
    stack.adopt('db', (name) => ran.push(`fifth, adopted ${name}`)),
    'db',
    'adopt returns the value',
  );
  t.equal(stack.use(undefined), undefined, 'undefined is passed through, registering nothing');
  t.notOk(stack.disposed);
  await stack.disposeAsync();
  t.ok(stack.disposed);
  t.same(ran, ['fifth, adopted db', 'fourth, an AsyncDisposable', 'third, a Disposable', 'second, after a turn of the loop', 'first']);
});

t.test('a failing clean-up does not stop the others; one failure is thrown as it is', async (t) => {
  const stack = new CleanupStack();
  const ran: string[] = [];
  const boom = new Error('writer flush failed');
  stack.defer(() => ran.push('database closed'));
  stack.defer(() => {
    throw boom;
  });
  stack.defer(() => ran.push('actors stopped'));
  await t.rejects(stack.disposeAsync(), boom);
  t.same(ran, ['actors stopped', 'database closed'], 'the one registered before the failure still ran');
});

t.test('several failures are reported together, in the order they happened', async (t) => {
  const stack = new CleanupStack();
  const ran: string[] = [];
  stack.defer(() => ran.push('last'));
  stack.defer(() => Promise.reject(new Error('redis close failed')));
  stack.defer(() => ran.push('middle'));
  stack.defer(() => {
    throw new Error('adapters close failed');
  });
  const error = await stack.disposeAsync().then(
    () => undefined,
    (e: unknown) => e,
  );
  t.type(error, AggregateError);
  t.same(
    (error as AggregateError).errors.map((e: Error) => e.message),
    ['adapters close failed', 'redis close failed'],
  );
  t.same(ran, ['middle', 'last']);
});

t.test('disposing is idempotent: a second call waits for the first and runs nothing again', async (t) => {
  const stack = new CleanupStack();
  let runs = 0;
  let release!: () => void;
  stack.defer(async () => {
    runs++;
    await new Promise<void>((resolve) => {
      release = resolve;
    });
  });
  const first = stack.disposeAsync();
  const second = stack[Symbol.asyncDispose]();
  t.equal(second, first, 'the same promise');
  let settled = false;
  void second.then(() => {
    settled = true;
  });
  await tick();
  t.notOk(settled, 'the second call is not done while the first still runs');
  release();
  await first;
  await stack.disposeAsync();
  t.equal(runs, 1, 'each clean-up ran once');
});

t.test('a disposed stack takes nothing more', async (t) => {
  const stack = new CleanupStack();
  await stack.disposeAsync();
  t.throws(() => stack.defer(() => {}), ReferenceError);
  t.throws(() => stack.use({ [Symbol.dispose]: () => {} }), ReferenceError);
  t.throws(() => stack.adopt(1, () => {}), ReferenceError);
});

t.test('use refuses what has no dispose method', async (t) => {
  const stack = new CleanupStack();
  t.throws(() => stack.use({} as unknown as Disposable), TypeError);
});

t.test('a stack used by another is disposed at its place in the outer one', async (t) => {
  const outer = new CleanupStack();
  const ran: string[] = [];
  const last = outer.use(new CleanupStack());
  outer.defer(() => ran.push('outer'));
  last.defer(() => ran.push('inner, registered after the outer one'));
  await outer.disposeAsync();
  t.same(ran, ['outer', 'inner, registered after the outer one']);
  t.ok(last.disposed);
});
