import t from 'tap';
import { createComfyuiAdapter } from '../../providers/comfyui/adapter.ts';
import { parseComfyuiSettings } from '../../providers/comfyui/settings.ts';
import { loadWorkflowTemplate } from '../../providers/comfyui/workflow.ts';
import { WORKFLOWS, comfyContext, comfyJob, startFakeComfyui, updateLog } from '../fakes/comfyui.ts';

const fake = await startFakeComfyui();
t.teardown(() => fake.close());
const settings = { baseUrl: fake.url };
const deployment = { id: 'sd15', target: { workflow: WORKFLOWS.textToImage, defaults: { steps: 20 } } };
const tick = () => new Promise((resolve) => setTimeout(resolve, 10));

t.test('cancel a queued prompt: taken off the queue with POST /queue, nothing interrupted', async (t) => {
  const adapter = createComfyuiAdapter(settings, deployment, comfyContext());
  t.teardown(() => adapter.close());
  fake.paused = true;
  t.teardown(() => {
    fake.paused = false;
  });
  const { providerJobId } = await adapter.submit(comfyJob(), updateLog().report);
  const promptId = providerJobId.split(':')[0]!;
  t.ok(fake.queued().pending.includes(promptId));
  const interrupts = fake.interrupts.length;
  await adapter.cancel(providerJobId);
  t.notOk(fake.queued().pending.includes(promptId), 'gone from the queue');
  t.equal(fake.interrupts.length, interrupts, 'no interrupt');
});

t.test('cancel the running prompt: interrupted by its prompt id; another prompt running is never interrupted', async (t) => {
  const adapter = createComfyuiAdapter(settings, deployment, comfyContext());
  t.teardown(() => adapter.close());
  fake.holdNext();
  const log = updateLog();
  const { providerJobId } = await adapter.submit(comfyJob(), log.report);
  const promptId = providerJobId.split(':')[0]!;
  t.equal(await fake.running(), promptId);
  // A second job, queued behind the first: cancelling it must not stop the first.
  fake.paused = true;
  const second = await adapter.submit(comfyJob(), updateLog().report);
  await adapter.cancel(second.providerJobId);
  t.same(fake.interrupts, [], 'the queued one was deleted, the running one left alone');
  fake.paused = false;

  await adapter.cancel(providerJobId);
  t.same(fake.interrupts.at(-1), { asked: promptId, running: promptId });
  while (!fake.history.has(promptId)) await tick();
  const status = fake.history.get(promptId)!.status as { status_str: string; messages: Array<[string]> };
  t.equal(status.status_str, 'error');
  t.ok(
    status.messages.some(([event]) => event === 'execution_interrupted'),
    'ComfyUI recorded the interruption',
  );
  t.notOk(
    log.updates.some((u) => u.type === 'succeeded' || u.type === 'failed'),
    'a job we cancelled reports nothing more',
  );
});

t.test('cancel a finished or unknown prompt: nothing is deleted or interrupted, nothing throws', async (t) => {
  const adapter = createComfyuiAdapter(settings, deployment, comfyContext());
  t.teardown(() => adapter.close());
  const log = updateLog();
  const { providerJobId } = await adapter.submit(comfyJob(), log.report);
  await log.end;
  const requests = fake.requests.length;
  const interrupts = fake.interrupts.length;
  await adapter.cancel(providerJobId);
  await adapter.cancel('not-a-prompt');
  await adapter.cancel('bad id with spaces');
  t.equal(fake.interrupts.length, interrupts);
  t.notOk(fake.requests.slice(requests).some((r) => r === 'POST /queue' || r === 'POST /interrupt'));
  const down = createComfyuiAdapter({ baseUrl: 'http://127.0.0.1:9' }, deployment, comfyContext());
  await down.cancel(providerJobId);
  await down.close();
  t.pass('a server that cannot be reached does not throw');
});

t.test('resume by provider job id after a crash: no second /prompt, the socket reopened under the same client id, followed to the end', async (t) => {
  const first = createComfyuiAdapter(settings, deployment, comfyContext());
  fake.holdNext();
  const job = comfyJob();
  const { providerJobId } = await first.submit(job, updateLog().report);
  const [promptId, clientId] = providerJobId.split(':') as [string, string];
  await fake.running();
  await first.close(); // the process dies; the prompt stays at ComfyUI
  const submitted = fake.submissions.length;

  const second = createComfyuiAdapter(settings, deployment, comfyContext());
  t.teardown(() => second.close());
  const log = updateLog();
  second.resume(providerJobId, job, log.report);
  await log.waitFor((u) => u.type === 'running');
  while ((fake.socketsOpened.get(clientId) ?? 0) < 2) await tick();
  fake.release();
  const end = await log.end;
  t.match(end, { type: 'succeeded' });
  t.equal(fake.submissions.length, submitted, 'never submitted again');
  t.equal(fake.submissions.filter((s) => s.promptId === promptId).length, 1);
});

t.test('resume of a prompt that already finished, and of one the server forgot (restarted)', async (t) => {
  const adapter = createComfyuiAdapter(settings, deployment, comfyContext());
  t.teardown(() => adapter.close());
  const done = updateLog();
  const { providerJobId } = await adapter.submit(comfyJob(), done.report);
  await done.end;
  const again = updateLog();
  adapter.resume(providerJobId, comfyJob(), again.report);
  t.match(await again.end, { type: 'succeeded' }, 'read from the history');

  fake.paused = true;
  const queued = await adapter.submit(comfyJob(), updateLog().report);
  fake.restart();
  fake.paused = false;
  const lost = updateLog();
  adapter.resume(queued.providerJobId, comfyJob(), lost.report);
  t.match(await lost.end, { type: 'failed', errorCode: 'provider_error', errorMessage: /no longer knows prompt/ });

  const bare = updateLog();
  adapter.resume('', comfyJob(), bare.report);
  t.match(await bare.end, { type: 'failed', errorCode: 'provider_error' });
});

t.test('parseComfyuiSettings', async (t) => {
  t.same(parseComfyuiSettings({}), { settings: undefined, problems: [] }, 'unset: not configured');
  t.same(parseComfyuiSettings({ COMFYUI_BASE_URL: 'http://gpu-1:8188/', COMFYUI_API_KEY: 'k-123', COMFYUI_MAX_CONCURRENT_JOBS: '2' }), {
    settings: { baseUrl: 'http://gpu-1:8188', apiKey: 'k-123', maxConcurrentJobs: 2 },
    problems: [],
  });
  const bad = parseComfyuiSettings({ COMFYUI_BASE_URL: 'ftp://user:secret-pw@x', COMFYUI_MAX_CONCURRENT_JOBS: '0', COMFYUI_API_KEY: 'sk secret' });
  t.equal(bad.settings, undefined);
  t.equal(bad.problems.length, 4, bad.problems.join('\n'));
  t.notMatch(bad.problems.join('\n'), /secret/, 'no secret in a problem');
  t.match(parseComfyuiSettings({ COMFYUI_API_KEY: 'k' }).problems, [/COMFYUI_BASE_URL is not/]);
});

t.test('the workflow template is checked at load', async (t) => {
  t.same(
    loadWorkflowTemplate({ workflow: WORKFLOWS.textToImage }).problems,
    ['node 3 (KSampler) input steps names an unknown placeholder {{steps}}'],
    'a placeholder neither ours nor in defaults',
  );
  t.same(loadWorkflowTemplate({ workflow: WORKFLOWS.textToImage, defaults: { steps: 20 } }).problems, []);
  t.match(loadWorkflowTemplate({ workflowFile: '/nonexistent/flow.json' }).problems, [/cannot be read/]);
  t.match(loadWorkflowTemplate({ workflowFile: 'x.json' }, () => '{"3": ').problems, [/not valid JSON/]);
  const file = loadWorkflowTemplate({ workflowFile: 'x.json' }, () => JSON.stringify(WORKFLOWS.imageToImage));
  t.same([...file.template!.placeholders].sort(), ['image', 'negativePrompt', 'prompt', 'seed', 'strength']);
  t.match(loadWorkflowTemplate({ workflow: { nodes: [], links: [] } }).problems, [/Save \(API Format\)/]);
  t.match(loadWorkflowTemplate({ workflow: { '1': { class_type: 'SaveImage', inputs: { filename_prefix: '{{prompt' } } } }).problems, [
    /malformed placeholder/,
  ]);
  t.match(loadWorkflowTemplate({ workflow: { '1': { inputs: {} } } }).problems, [/no class_type/]);
  t.match(loadWorkflowTemplate({ workflow: WORKFLOWS.textToVideo, outputNodes: ['99'] }).problems, [/node 99/]);
  t.throws(() => createComfyuiAdapter(settings, { id: 'broken', target: { workflow: WORKFLOWS.textToImage } }, comfyContext()), /broken.*\{\{steps\}\}/);
});
