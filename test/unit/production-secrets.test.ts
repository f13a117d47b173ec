import t from 'tap';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { ConfigError, loadConfig } from '../../runtime/config.ts';
import { estimatedBits, MIN_SECRET_BITS, OWN_SECRETS } from '../../runtime/production-secrets.ts';
import { ROOT } from '../fixtures/child.ts';

/**
 * Secrets in production (docs/operations.md): with NODE_ENV=production a placeholder, short or low-entropy
 * secret stops the start, each named, its value never printed; outside production they are accepted as
 * before. The shipped examples themselves are checked in test/deploy/shipped-secrets.test.ts.
 */
const strong = () => randomBytes(32).toString('hex');

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (error) {
    // Only the production refusals: a secret such as CLUSTER_SECRET alone brings cluster mode's other rules.
    if (error instanceof ConfigError) return error.problems.filter((p) => /in production/.test(p));
    throw error;
  }
}

t.test('random secrets of the documented kind pass; 32 random hex characters too', async (t) => {
  for (let i = 0; i < 200; i++) {
    const env = Object.fromEntries(OWN_SECRETS.map((name) => [name, randomBytes(16).toString('hex')]));
    const problems = problemsOf({ NODE_ENV: 'production', ...env });
    if (problems.length > 0) t.fail(problems.join('; '));
  }
  t.same(problemsOf({ NODE_ENV: 'production', CLUSTER_SECRET: randomBytes(24).toString('base64') }), [], 'base64');
  t.ok(estimatedBits(strong()) > 200, 'openssl rand -hex 32 scores well above the minimum');
});

t.test('each weak secret is refused in production, named, without its value', async (t) => {
  const cases: Array<[string, string, RegExp]> = [
    ['WEBHOOK_SECRET_KEY', 'replace-with-32-or-more-random-characters-webhook', /placeholder/],
    ['BILLING_SIGNING_SECRET', 'example-billing-signing-secret-change-me-012345678', /placeholder/],
    ['CLUSTER_SECRET', 'a'.repeat(40), /too little randomness/],
    ['BLOB_SIGNING_SECRET', 'passwordpasswordpasswordpassword', /too little randomness/],
    ['CLUSTER_SECRET', 'Xy7#Xy7#Xy7#Xy7#Xy7#Xy7#Xy7#Xy7#Xy7#', /too little randomness/],
  ];
  for (const [name, value, why] of cases) {
    const problems = problemsOf({ NODE_ENV: 'production', [name]: value });
    t.equal(problems.length, 1, `${name}=${value.slice(0, 12)}…: one problem`);
    t.match(problems[0], new RegExp(`^${name}: `), 'naming the variable');
    t.match(problems[0], why);
    t.notMatch(problems.join('\n'), value, 'never the value');
    t.same(
      problemsOf({ [name]: value }).filter((p) => p.startsWith(name) && !/at least 32/.test(p)),
      [],
      'accepted outside production',
    );
  }
  const short = problemsOf({ NODE_ENV: 'production', WEBHOOK_SECRET_KEY: randomBytes(8).toString('hex') });
  t.ok(
    short.some((p) => p.startsWith('WEBHOOK_SECRET_KEY: ')),
    'a short one too',
  );
  const urls = problemsOf({
    NODE_ENV: 'production',
    DATABASE_URL: 'postgres://gs:replace-with-the-database-password@db:5432/gs',
    REDIS_URL: 'redis://:example-redis-password-change-me-0123456789abcd@redis:6379',
    S3_BUCKET: 'b',
    S3_ACCESS_KEY_ID: 'AKIAEXAMPLE',
    S3_SECRET_ACCESS_KEY: 'replace-with-the-secret-access-key',
  });
  t.same(
    urls.map((p) => p.split(':')[0]),
    ['DATABASE_URL', 'REDIS_URL', 'S3_SECRET_ACCESS_KEY'],
    'placeholder passwords of the database, Redis and S3: each named',
  );
  t.ok(estimatedBits('ab'.repeat(20)) < MIN_SECRET_BITS, 'two characters repeated score under the minimum');
  t.equal(problemsOf({ NODE_ENV: 'production', BILLING_SIGNING_SECRET: 'q7Rz'.repeat(10) }).length, 1, 'one piece repeated is refused whatever it scores');
});

t.test('npm start stops with exit 78 naming the variable', async (t) => {
  const run = spawnSync(process.execPath, ['--import', './test/loader/register.mjs', 'app/main.ts'], {
    cwd: ROOT,
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH ?? '',
      NODE_ENV: 'production',
      DATABASE_URL: 'memory://',
      PORT: '0',
      METRICS_PORT: '0',
      WEBHOOK_SECRET_KEY: 'replace-with-32-or-more-random-characters-webhook',
      BILLING_SIGNING_SECRET: strong(),
    },
    timeout: 120_000,
  });
  t.equal(run.status, 78, 'exit 78 (configuration)');
  t.match(run.stderr, /WEBHOOK_SECRET_KEY: a placeholder/, 'naming WEBHOOK_SECRET_KEY');
  t.notMatch(run.stderr, /BILLING_SIGNING_SECRET/, 'and not the good one');
  t.notMatch(run.stderr, /replace-with-32/, 'without the value');
});
