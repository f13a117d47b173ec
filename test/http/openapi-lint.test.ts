import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sharedTestServer } from '../helpers/server.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = path.join(ROOT, 'node_modules', '.bin');
/** The lint budget of the served document: no errors, and at most this many warnings from both linters together. */
const MAX_WARNINGS = 10;

interface Problem {
  linter: string;
  rule: string;
  severity: 'error' | 'warning';
  message: string;
  where: string;
}

/** Runs a linter's CLI; its exit code says only whether it found problems, so the JSON it prints is what counts. */
function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      path.join(BIN, command),
      args,
      {
        cwd: ROOT,
        maxBuffer: 64 * 1024 * 1024,
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
      },
      (error, stdout, stderr) => {
        if (stdout.trim() !== '') return resolve(stdout);
        reject(new Error(`${command} printed nothing: ${error?.message ?? ''} ${stderr}`));
      },
    );
  });
}

async function redocly(file: string): Promise<Problem[]> {
  const out = JSON.parse(await run('redocly', ['lint', file, '--config', path.join(ROOT, 'redocly.yaml'), '--format=json'])) as {
    problems: Array<{ ruleId: string; severity: string; message: string; location: Array<{ pointer: string }> }>;
  };
  return out.problems.map((p) => ({
    linter: 'redocly',
    rule: p.ruleId,
    severity: p.severity === 'error' ? 'error' : 'warning',
    message: p.message,
    where: p.location[0]?.pointer ?? '',
  }));
}

async function spectral(file: string): Promise<Problem[]> {
  const out = JSON.parse(
    await run('spectral', ['lint', file, '--ruleset', path.join(ROOT, '.spectral.yaml'), '--format=json', '--fail-severity=error']),
  ) as Array<{ code: string; severity: number; message: string; path: string[] }>;
  // Spectral's severities: 0 error, 1 warning, 2 information, 3 hint; the last two are not counted.
  return out
    .filter((p) => p.severity <= 1)
    .map((p) => ({
      linter: 'spectral',
      rule: p.code,
      severity: p.severity === 0 ? 'error' : 'warning',
      message: p.message,
      where: p.path.join('.'),
    }));
}

t.test('the served OpenAPI document passes Redocly (recommended) and Spectral (spectral:oas) within the budget', async (t) => {
  const server = await sharedTestServer();
  const { status, body } = await server.json('/v1/openapi.json');
  t.equal(status, 200);
  const dir = await mkdtemp(path.join(tmpdir(), 'openapi-lint-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'openapi.json');
  await writeFile(file, JSON.stringify(body, null, 2));

  const problems = [...(await redocly(file)), ...(await spectral(file))];
  const count = (linter: string, severity: string) => problems.filter((p) => p.linter === linter && p.severity === severity).length;
  for (const linter of ['redocly', 'spectral']) t.comment(`${linter}: ${count(linter, 'error')} errors, ${count(linter, 'warning')} warnings`);
  const list = problems.map((p) => `${p.linter} ${p.severity} ${p.rule} at ${p.where}: ${p.message}`).join('\n');
  t.equal(problems.filter((p) => p.severity === 'error').length, 0, `no errors\n${list}`);
  t.ok(problems.length <= MAX_WARNINGS, `at most ${MAX_WARNINGS} warnings in all (${problems.length})\n${list}`);
});

t.test('every operation has a summary, a description and its error responses; every tag a description', async (t) => {
  const server = await sharedTestServer();
  const doc = (await server.json('/v1/openapi.json')).body;
  for (const tag of doc.tags) t.ok(tag.description, `tag ${tag.name} has a description`);
  for (const [route, item] of Object.entries<Record<string, any>>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      const name = `${method.toUpperCase()} ${route}`;
      t.ok(op.summary && op.description, `${name} has a summary and a description`);
      const statuses = Object.keys(op.responses).filter((s) => /^[45]\d\d$/.test(s));
      t.ok(statuses.some((s) => s.startsWith('4')) || op.responses['4XX'], `${name} declares its 4xx answers`);
      for (const s of statuses) {
        const content = op.responses[s].content['application/json'];
        t.equal(content.schema.$ref, '#/components/schemas/ErrorEnvelope', `${name} ${s} answers the error envelope`);
        for (const code of Object.keys(content.examples)) {
          t.equal(doc.components.examples[code].value.error.code, code);
          t.match(op.responses[s].description, `\`${code}\``, `${name} ${s} names ${code}`);
        }
      }
    }
  }
});
