import t from 'tap';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../runtime/config.ts';
import { SecretBox } from '../../persistence/secret-box.ts';
import { WEBHOOK_SECRET_PURPOSE } from '../../actors/webhook/deps.ts';
import { startTestServer } from '../helpers/server.ts';
import { createEndpoint, tenant } from './support.ts';

t.test('WEBHOOK_SECRET_KEY: checked at start, and the key that seals the stored secrets', async (t) => {
  t.throws(() => loadConfig({ WEBHOOK_SECRET_KEY: 'short' }), ConfigError);
  t.throws(() => loadConfig({ WEBHOOK_TIMEOUT_MS: '5' }), ConfigError);
  t.equal(loadConfig({}).webhooks.timeoutMs, 10_000, 'the time-out is 10 s by default');

  const key = 'k'.repeat(40);
  const server = await startTestServer(t, { env: { ALLOW_PRIVATE_EGRESS: 'true', WEBHOOK_SECRET_KEY: key } });
  const who = await tenant(server);
  const endpoint = await createEndpoint(server, who, 'http://127.0.0.1:9/hook');
  const [row] = await server.services.db
    .em()
    .execute<Array<{ secret_sealed: string }>>('select secret_sealed from webhook_endpoints where id = ?', [endpoint.id]);
  t.equal(new SecretBox(Buffer.from(key), WEBHOOK_SECRET_PURPOSE).open(row!.secret_sealed, endpoint.id), endpoint.secret, 'opens with the configured key');
  t.throws(() => new SecretBox(Buffer.from('x'.repeat(40)), WEBHOOK_SECRET_PURPOSE).open(row!.secret_sealed, endpoint.id), 'not with another');
});

t.test('unset: a key is generated once under DATA_DIR (mode 600) and kept across restarts', async (t) => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-whkey-'));
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  const first = await startTestServer(t, { env: { DATA_DIR: dataDir } });
  const sealed = first.services.webhookSecrets.seal('whsec_kept', 'whk_1');
  const file = path.join(dataDir, 'webhook-secret-key');
  t.equal((await fs.stat(file)).mode & 0o777, 0o600);
  t.match(await fs.readFile(file, 'utf8'), /^[0-9a-f]{64}$/);
  await first.stop();
  const second = await startTestServer(t, { env: { DATA_DIR: dataDir } });
  t.equal(second.services.webhookSecrets.open(sealed, 'whk_1'), 'whsec_kept');
});
