import t from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { durableStorage } from '../helpers/database.ts';
import { ROOT } from '../fixtures/child.ts';
import { freePort } from '../helpers/ports.ts';
import { cameTrue } from '../helpers/eventually.ts';

/**
 * README.md's quick start, as a newcomer runs it: `npm start` on its defaults (bound to 127.0.0.1, no
 * BASE_URL: the development mode that allows a loopback webhook receiver), then the quick start block
 * pasted twice into a shell in an empty folder. Each run must sign in, generate and download an image, and
 * have its webhook verified; nothing may be left in the folder or in the repository. Then SIGTERM to npm
 * (what a process manager sends) must stop the server behind it.
 */
t.setTimeout(240_000);

function run(
  command: string,
  args: string[],
  options: { cwd: string; env: Record<string, string> },
): Promise<{ code: number | null; out: string; err: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    const proc = spawn(command, args, { cwd: options.cwd, env: options.env });
    let out = '';
    let err = '';
    proc.stdout.on('data', (chunk) => {
      out += chunk;
    });
    proc.stderr.on('data', (chunk) => {
      err += chunk;
    });
    proc.on('close', (code) => resolve({ code, out, err, ms: Date.now() - started }));
  });
}

const readme = await fs.readFile(path.join(ROOT, 'README.md'), 'utf8');
const section = /<!-- quickstart:start -->([\s\S]*?)<!-- quickstart:end -->/.exec(readme)?.[1] ?? '';
const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '';

t.test('the quick start block is there, against the defaults of npm start', async (t) => {
  t.match(block, /BASE=\$\{BASE:-http:\/\/127\.0\.0\.1:8080\}/, "it talks to npm start's default address");
  t.notMatch(block, /-c jar\b|> ?jar\b/, 'no cookie jar in the working folder');
});

t.test('npm start, then the quick start pasted twice; SIGTERM to npm stops the server', async (t) => {
  const { dataDir, postgres } = await durableStorage(t, 'gs-quickstart-', { empty: true });
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', METRICS_PORT: '0', DATA_DIR: dataDir };
  if (postgres) env.DATABASE_URL = postgres.url;
  const npm = spawn('npm', ['start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  // The banner is for people: it goes to stderr, and stdout carries JSON lines only (log collectors read it).
  let banner = '';
  let stdout = '';
  const exited = new Promise<number | null>((resolve) => npm.on('close', (code) => resolve(code)));
  t.teardown(() => {
    if (npm.exitCode === null) npm.kill('SIGKILL');
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no banner within 90 s:\n${banner}`)), 90_000);
    npm.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    npm.stderr.on('data', (chunk) => {
      banner += chunk;
      const found = /listening on (http:\/\/\S+)/.exec(banner);
      if (found && /Get started/.test(banner)) {
        clearTimeout(timer);
        resolve(found[1]!);
      }
    });
  });
  t.match(banner, /development mode: webhook receivers and input URLs on this machine \(loopback\) are allowed/, 'the banner says development mode is on');
  t.match(banner, /curl -si .*\/v1\/auth\/signup/, 'and how to sign up');
  t.match(banner, /npm run ops/, "and where the operator's commands are");
  await cameTrue(async () => (await fetch(`${url}/health/ready`).catch(() => undefined))?.status === 200, Date.now() + 30_000, 50);

  const before = (await run('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: ROOT, env: { PATH: env.PATH! } })).out;
  const seen = new Set<string>();
  for (const round of [1, 2]) {
    const folder = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-quickstart-run-'));
    const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-quickstart-tmp-'));
    t.teardown(() => Promise.all([fs.rm(folder, { recursive: true, force: true }), fs.rm(tmp, { recursive: true, force: true })]));
    const result = await run('bash', ['-c', block], {
      cwd: folder,
      env: { PATH: env.PATH!, HOME: env.HOME!, TMPDIR: tmp, BASE: url, HOOK_PORT: String(await freePort()) },
    });
    t.comment(`run ${round}: ${result.ms} ms`);
    t.equal(result.code, 0, `run ${round}: exits 0${result.code === 0 ? '' : `\n${result.out}\n${result.err}`}`);
    const downloaded = /^(gen_\w+) succeeded: (\d+) bytes in (\S+)$/m.exec(result.out);
    t.ok(downloaded, `run ${round}: the image generation succeeded and its output was downloaded`);
    if (downloaded) {
      const bytes = await fs.readFile(downloaded[3]!);
      t.equal(bytes.length, Number(downloaded[2]), `run ${round}: as many bytes on disk as it says`);
      t.same([...bytes.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], `run ${round}: a PNG`);
      seen.add(downloaded[1]!);
    }
    const verified = /^verified generation\.completed (gen_\w+)$/m.exec(result.out);
    t.ok(verified, `run ${round}: the receiver verified the signed webhook`);
    t.notMatch(result.out, /refused|no delivery/, `run ${round}: no delivery refused, none missing`);
    t.same(await fs.readdir(folder), [], `run ${round}: nothing left in the folder it ran in`);
    t.same(
      (await fs.readdir(tmp)).filter((name) => !name.endsWith('.png')),
      [],
      `run ${round}: its temporary files removed`,
    );
  }
  t.equal(seen.size, 2, 'two runs, two generations');
  const after = (await run('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: ROOT, env: { PATH: env.PATH! } })).out;
  t.equal(after, before, 'nothing new in the repository');

  npm.kill('SIGTERM');
  t.equal(await exited, 0, 'SIGTERM to npm start: the service stops gracefully and npm exits 0');
  // npm's own "> generation-service start" header aside, every line the service wrote to stdout is JSON.
  const lines = stdout.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('> '));
  t.ok(lines.length > 0, 'the service logged to stdout');
  t.same(
    lines.filter((line) => {
      try {
        return typeof JSON.parse(line).level !== 'number';
      } catch {
        return true;
      }
    }),
    [],
    'stdout carries JSON log lines only',
  );
  t.ok(
    lines.some((line) => JSON.parse(line).msg === 'request'),
    'with an access log line per request',
  );
  const still = await fetch(`${url}/v1`).then(
    () => true,
    () => false,
  );
  t.notOk(still, 'and nothing listens on its port any more');
});
