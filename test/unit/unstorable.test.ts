import t from 'tap';
import { MAX_JSON_DEPTH, unstorableProblem } from '../../http/validation.ts';
import { isUnstorable, storableText } from '../../persistence/storable-text.ts';

const BAD = ': must not contain U+0000 or an unpaired surrogate';

t.test('U+0000 and unpaired surrogates are unstorable; pairs and every other character are not', async (t) => {
  for (const text of ['', 'plain', `;'"\\$1--`, 'é 漢字', '😀', '\ud83d\ude00', '\u0001\u001f\u007f\uffff', '\ufffd'])
    t.notOk(isUnstorable(text), JSON.stringify(text));
  for (const text of ['\u0000', 'a\u0000', '\ud800', 'a\udc00b', '\ude00\ud83d', '😀\ud83d', 'x\ud83d😀']) t.ok(isUnstorable(text), JSON.stringify(text));
});

t.test('the field named is the first bad string, by path, in objects, arrays and property names', async (t) => {
  t.equal(unstorableProblem({ a: 'ok', b: { c: ['x', 'y\u0000'] } }, 'body'), `body.b.c.1${BAD}`);
  t.equal(unstorableProblem({ params: { 'k\ud800': 'v' } }, 'body'), `body.params (a property name)${BAD}`);
  t.equal(unstorableProblem({ id: 'a\u0000' }, 'path'), `path.id${BAD}`);
  t.equal(unstorableProblem({ tags: ['a', 'b\u0000'] }, 'query'), `query.tags.1${BAD}`);
  t.equal(unstorableProblem('a\u0000', 'Idempotency-Key'), `Idempotency-Key${BAD}`);
  t.equal(unstorableProblem({ a: 1, b: null, c: true, d: [1.5, null, { e: '😀' }] }, 'body'), undefined);
  t.equal(unstorableProblem(undefined, 'body'), undefined);
});

t.test('nesting past MAX_JSON_DEPTH is refused, at any depth without overflowing the stack', async (t) => {
  const nested = (depth: number, leaf: string) => JSON.parse(`${'{"k":['.repeat(depth)}${leaf}${']}'.repeat(depth)}`);
  // Each step is an object and an array: 2 * depth containers, the outermost at level 1.
  const fits = Math.floor(MAX_JSON_DEPTH / 2);
  t.equal(unstorableProblem(nested(fits, '"ok"'), 'body'), undefined, `${2 * fits} levels`);
  t.match(unstorableProblem(nested(fits + 1, '"ok"'), 'body'), new RegExp(`^body(\\.(k|0))+: nested more than ${MAX_JSON_DEPTH} levels deep$`));
  t.match(unstorableProblem(nested(300_000, '1'), 'body'), /nested more than/, 'a body of 300 000 levels');
  t.match(unstorableProblem(nested(3, '"a\\u0000"'), 'body'), /^body\.k\.0\.k\.0\.k\.0: must not contain/);
});

t.test('storableText turns each unstorable character into U+FFFD and leaves the rest as it is', async (t) => {
  t.equal(storableText('plain 😀 é'), 'plain 😀 é');
  t.equal(storableText('a\u0000b\u0000'), 'a\ufffdb\ufffd');
  t.equal(storableText('x\ud83dy\ude00\ud83d\ude00'), 'x\ufffdy\ufffd😀');
  t.notOk(isUnstorable(storableText('\u0000\ud800\udc00\udfff')));
});
