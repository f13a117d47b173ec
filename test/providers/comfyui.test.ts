import t from 'tap';
import { createComfyuiAdapter } from '../../providers/comfyui/adapter.ts';
import { imageDimensions, sniffContentType } from '../../providers/local/sniff.ts';
import { WORKFLOWS, comfyContext, comfyJob, startFakeComfyui, updateLog } from '../fakes/comfyui.ts';

const fake = await startFakeComfyui();
t.teardown(() => fake.close());
const settings = { baseUrl: fake.url };
const textToImage = { id: 'sd15', target: { workflow: WORKFLOWS.textToImage, defaults: { steps: 20 } } };

t.test('text_to_image: submitted once, followed over the socket, the PNG fetched and decoded', async (t) => {
  const adapter = createComfyuiAdapter(settings, textToImage, comfyContext());
  t.teardown(() => adapter.close());
  const log = updateLog();
  const job = comfyJob();
  const before = fake.submissions.length;
  const { providerJobId } = await adapter.submit(job, log.report);
  const end = await log.end;

  t.equal(end.type, 'succeeded', end.type === 'failed' ? end.errorMessage : 'succeeded');
  if (end.type !== 'succeeded') return;
  t.equal(end.files.length, 1, "SaveImage's file only: the PreviewImage (type temp) is left aside");
  const [file] = end.files;
  t.equal(sniffContentType(file!.bytes), 'image/png');
  t.same(imageDimensions(file!.bytes), { width: 64, height: 48 }, 'the size the job asked for, read from the PNG');
  t.match(file, { contentType: 'image/png', mediaType: 'image', width: 64, height: 48 });

  t.equal(fake.submissions.length - before, 1, 'one POST /prompt');
  const sent = fake.submissions.at(-1)!;
  t.equal(providerJobId, `${sent.promptId}:${sent.clientId}`, 'the job id carries the prompt id and the client id');
  t.equal(sent.prompt['3']!.inputs.seed, 42, '{{seed}} keeps its JSON type');
  t.equal(sent.prompt['3']!.inputs.steps, 20, 'a deployment default fills {{steps}}');
  t.equal(sent.prompt['6']!.inputs.text, 'a lighthouse at dawn');
  t.equal(sent.prompt['7']!.inputs.text, 'blurry, fog', 'a placeholder inside a string');
  t.ok((fake.socketsOpened.get(sent.clientId!) ?? 0) >= 1, "the socket was opened under the prompt's client id");
  const running = log.updates.findIndex((u) => u.type === 'running');
  t.ok(running >= 0 && running < log.updates.indexOf(end), 'running before succeeded');
  t.ok(
    log.updates.some((u) => u.type === 'progress' && /^Step \d of 3/.test(u.detail)),
    'sampler steps reach the timeline',
  );
  t.equal(log.updates.filter((u) => u.type === 'succeeded' || u.type === 'failed').length, 1);
});
