import t from 'tap';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ROOT } from '../fixtures/child.ts';
import { dockerfileCmd, dockerfileInstructions } from './dockerfile.ts';

/**
 * No container engine runs here, so the image is checked through what it is made of: its build stage runs
 * deploy/container/build.sh (the script test/deploy/production-install.test.ts runs and starts the service
 * from), its run stage takes only that script's output, runs as a non-root user under tini, and probes
 * liveness. Each assertion names what would break if the Dockerfile changed.
 */
const instructions = await dockerfileInstructions();
const stages = [...new Set(instructions.map((i) => i.stage))].filter(Boolean);

t.test('two stages: build, then run', async (t) => {
  t.same(stages, ['build', 'run']);
});

t.test('the build stage runs the one build script, with the ffmpeg switch', async (t) => {
  const build = instructions.filter((i) => i.stage === 'build');
  const runs = build.filter((i) => i.name === 'RUN').map((i) => i.args);
  t.equal(runs.length, 1, 'one RUN: the script does all the work, so the test of that script covers the image');
  t.match(runs[0], /^WITH_FFMPEG=\$\{WITH_FFMPEG\} deploy\/container\/build\.sh \/app$/, 'it is deploy/container/build.sh into /app');
  t.ok(
    build.some((i) => i.name === 'ARG' && /^WITH_FFMPEG=true$/.test(i.args)),
    'WITH_FFMPEG is a build argument, on by default',
  );
  t.ok((await fs.stat(path.join(ROOT, 'deploy/container/build.sh'))).mode & 0o100, 'the script is executable');
  const script = await fs.readFile(path.join(ROOT, 'deploy/container/build.sh'), 'utf8');
  t.match(script, /^npm ci\b/m, 'it installs from the lockfile');
  t.match(script, /^npm prune --omit=dev\b/m, 'and keeps the production dependencies alone');
});

t.test('the run stage: the build output only, non-root, tini, a liveness check, the compiled service', async (t) => {
  const run = instructions.filter((i) => i.stage === 'run');
  const copies = run.filter((i) => i.name === 'COPY');
  t.same(
    copies.map((c) => c.args),
    ['--from=build --chown=root:root /app /app'],
    "one COPY: the build script's output (the code owned by root, read-only to the service)",
  );
  t.ok(
    run.some((i) => i.name === 'USER' && i.args === 'node'),
    'runs as the unprivileged node user',
  );
  t.match(run.find((i) => i.name === 'ENTRYPOINT')?.args, /tini/, 'tini is PID 1, so SIGTERM reaches Node');
  t.match(run.find((i) => i.name === 'RUN')?.args, /install -y --no-install-recommends tini/, 'and is installed');
  t.match(run.find((i) => i.name === 'HEALTHCHECK')?.args, /\/health\/live/, 'the health check asks /health/live');
  t.same(
    await dockerfileCmd(),
    ['node', '--max-semi-space-size=32', 'dist/app/main.js'],
    'it starts the compiled service, no tsx, with the young generation npm start gives it',
  );
  const env = run.find((i) => i.name === 'ENV')?.args ?? '';
  for (const setting of ['NODE_ENV=production', 'HOST=0.0.0.0', 'DATA_DIR=/var/lib/generation-service']) t.match(env, setting);
});

t.test('.dockerignore keeps installed and built files out of the build context', async (t) => {
  const ignored = (await fs.readFile(path.join(ROOT, '.dockerignore'), 'utf8')).split('\n').map((l) => l.trim());
  for (const entry of ['**/node_modules', 'dist', '.data', '.git']) t.ok(ignored.includes(entry), entry);
});
