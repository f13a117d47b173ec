import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';

const EXAMPLE = fileURLToPath(new URL('../../client/examples/quickstart.mjs', import.meta.url));
const README = fileURLToPath(new URL('../../client/README.md', import.meta.url));

t.test('client/README.md shows examples/quickstart.mjs as it is', async (t) => {
  const example = readFileSync(EXAMPLE, 'utf8');
  t.ok(readFileSync(README, 'utf8').includes(`\`\`\`js\n${example}\`\`\`\n`), 'the example file, verbatim, in a js block');
});

t.test('the README example runs with plain node against a real server', async (t) => {
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '0' } });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['all']);
  const { NODE_OPTIONS: _options, ...inherited } = process.env;
  const { stdout } = await promisify(execFile)(process.execPath, [EXAMPLE], {
    env: { ...inherited, GENERATION_SERVICE_URL: server.url, GENERATION_SERVICE_API_KEY: key, GENERATION_SERVICE_WORKSPACE_ID: user.workspaceId },
    timeout: 90_000,
  });
  const lines = stdout.trim().split('\n');
  t.equal(lines.length, 3, stdout);
  const [id] = lines[0]!.split(' ');
  t.match(lines[0], /^gen_\S+ succeeded: \S/, 'created and waited for');
  t.equal(lines[1], `${id} succeeded 1 credits`, 'listed');
  t.match(lines[2], /^404 not_found \(request \S+\): /, 'an ApiError');
  const generations = await server.json(`/v1/generations/${id}?workspaceId=${user.workspaceId}`, { headers: { authorization: `Bearer ${key}` } });
  t.equal(generations.body.status, 'succeeded', 'the generation is in the service');
});
