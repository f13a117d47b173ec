import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import t from 'tap';
import { signatureHeader } from '../../actors/webhook/signature.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);

/** Runs an ES module script with plain node (no tsx, no loader, no NODE_OPTIONS) in the repository's root. */
async function plainNode(script: string, env: Record<string, string> = {}): Promise<any> {
  const { NODE_OPTIONS: _options, ...inherited } = process.env;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, env: { ...inherited, ...env }, timeout: 60_000 });
  return JSON.parse(stdout);
}

t.test('generation-service/webhooks/verify imports and verifies with plain node', async (t) => {
  const secret = 'whsec_plain_node';
  const body = JSON.stringify({ id: 'dlv_plain', event: 'generation.completed', data: { generationId: 'gen_1' }, createdAt: new Date().toISOString() });
  const header = signatureHeader(secret, body, Math.floor(Date.now() / 1000));
  const result = await plainNode(
    `
    const { verifyWebhook, WebhookVerificationError } = await import('generation-service/webhooks/verify');
    const { BODY, HEADER, SECRET } = process.env;
    const event = verifyWebhook(BODY, HEADER, SECRET);
    let tampered;
    try { verifyWebhook(BODY.replace('gen_1', 'gen_2'), HEADER, SECRET); tampered = 'accepted'; }
    catch (error) { tampered = error instanceof WebhookVerificationError ? error.code : String(error); }
    const resolved = import.meta.resolve('generation-service/webhooks/verify');
    console.log(JSON.stringify({ id: event.id, tampered, resolved, loaders: [...process.execArgv, process.env.NODE_OPTIONS ?? ''].filter((a) => a.startsWith('--') && /import|loader|require|tsx/.test(a)) }));
  `,
    { BODY: body, HEADER: header, SECRET: secret },
  );
  t.equal(result.id, 'dlv_plain', 'the signature of the service is accepted');
  t.equal(result.tampered, 'signature_mismatch', 'a tampered body is refused');
  t.match(result.resolved, /\/client\/dist\/webhooks\.js$/, 'resolved to built JavaScript');
  t.same(result.loaders, [], 'no loader in the child');
});

t.test('the SDK and its webhooks entry import with plain node', async (t) => {
  const result = await plainNode(`
    const sdk = await import('@generation-service/client');
    const hooks = await import('@generation-service/client/webhooks');
    const client = sdk.createClient({ baseUrl: 'http://127.0.0.1:9', workspaceId: 'ws_1' });
    console.log(JSON.stringify({ sdk: Object.keys(sdk).sort(), hooks: Object.keys(hooks).sort(), client: Object.keys(client).sort() }));
  `);
  t.same(result.sdk, ['ApiError', 'TERMINAL_STATUSES', 'WaitTimeoutError', 'createClient', 'pages', 'parseRetryAfter', 'retryDelayMs', 'unwrap']);
  t.same(result.hooks, ['DEFAULT_TOLERANCE_SECONDS', 'DELIVERY_HEADER', 'EVENT_HEADER', 'SIGNATURE_HEADER', 'WebhookVerificationError', 'verifyWebhook']);
  t.same(result.client, ['assets', 'credits', 'generations', 'models', 'raw', 'usage', 'waitFor', 'wallet', 'webhooks', 'workspaceId']);
});
