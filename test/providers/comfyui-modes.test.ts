import t from 'tap';
import { createComfyuiAdapter } from '../../providers/comfyui/adapter.ts';
import { imageDimensions, sniffContentType } from '../../providers/local/sniff.ts';
import { makePng } from '../helpers/files.ts';
import { decode } from './support.ts';
import { WORKFLOWS, comfyContext, comfyJob, startFakeComfyui, updateLog } from '../fakes/comfyui.ts';

const fake = await startFakeComfyui();
t.teardown(() => fake.close());
const settings = { baseUrl: fake.url };

t.test('image_to_image: the input goes up through /upload/image and LoadImage takes the name it answered', async (t) => {
  const adapter = createComfyuiAdapter(settings, { id: 'img2img', target: { workflow: WORKFLOWS.imageToImage } }, comfyContext());
  t.teardown(() => adapter.close());
  const input = makePng(40, 24);
  const log = updateLog();
  const job = comfyJob({
    mode: 'image_to_image',
    params: { prompt: 'linocut', strength: 0.5, seed: 7 },
    input: {},
    inputs: { images: [{ bytes: input, contentType: 'image/png' }], videos: [] },
  });
  await adapter.submit(job, log.report);
  const end = await log.end;
  t.equal(end.type, 'succeeded', end.type === 'failed' ? end.errorMessage : '');
  if (end.type !== 'succeeded') return;
  const sent = fake.submissions.at(-1)!.prompt;
  const name = String(sent['10']!.inputs.image);
  t.equal(name, `${job.generationId}-image.png`);
  t.same(fake.files.get(`input/${name}`), input, "the uploaded bytes are the job's");
  t.equal(sent['3']!.inputs.denoise, 0.5, '{{strength}} as a number');
  t.same(imageDimensions(end.files[0]!.bytes), { width: 40, height: 24 }, "the output has the input's size (the fake draws it so)");
});

t.test('image_to_image without its input file is refused before anything is queued', async (t) => {
  const adapter = createComfyuiAdapter(settings, { id: 'img2img', target: { workflow: WORKFLOWS.imageToImage } }, comfyContext());
  t.teardown(() => adapter.close());
  const before = fake.submissions.length;
  await t.rejects(adapter.submit(comfyJob({ mode: 'image_to_image' }), updateLog().report), {
    code: 'provider_input_rejected',
    message: /input file for \{\{image\}\}/,
  });
  t.equal(fake.submissions.length, before);
});

t.test('text_to_video: the VHS_VideoCombine MP4 (gifs) is the output, the frames SaveImage wrote are left aside', async (t) => {
  const adapter = createComfyuiAdapter(settings, { id: 'video', target: { workflow: WORKFLOWS.textToVideo } }, comfyContext());
  t.teardown(() => adapter.close());
  const log = updateLog();
  await adapter.submit(comfyJob({ mode: 'text_to_video', params: { prompt: 'waves' } }), log.report);
  const end = await log.end;
  t.equal(end.type, 'succeeded', end.type === 'failed' ? end.errorMessage : '');
  if (end.type !== 'succeeded') return;
  t.equal(end.files.length, 1);
  const video = end.files[0]!;
  t.equal(video.bytes.toString('latin1', 4, 8), 'ftyp', 'an MP4 container');
  t.match(video, { contentType: 'video/mp4', mediaType: 'video' });
  const decoded = await decode(video.bytes);
  t.equal(decoded.code, 0, 'ffmpeg decodes it');
  t.equal(decoded.videoCodec, 'h264');
  t.ok(typeof fake.submissions.at(-1)!.prompt['3']!.inputs.seed === 'number', 'a seed nobody gave is drawn, as a number');
});

t.test('text_to_video naming its output node: a node whose file is not a video fails the job', async (t) => {
  const adapter = createComfyuiAdapter(settings, { id: 'video', target: { workflow: WORKFLOWS.textToVideo, outputNodes: ['12'] } }, comfyContext());
  t.teardown(() => adapter.close());
  const log = updateLog();
  await adapter.submit(comfyJob({ mode: 'text_to_video' }), log.report);
  t.match(await log.end, { type: 'failed', errorCode: 'provider_bad_response', errorMessage: /not video/ });
});

t.test("text_to_audio: SaveAudio's FLAC is fetched and typed", async (t) => {
  const adapter = createComfyuiAdapter(settings, { id: 'audio', target: { workflow: WORKFLOWS.textToAudio } }, comfyContext());
  t.teardown(() => adapter.close());
  const log = updateLog();
  await adapter.submit(comfyJob({ mode: 'text_to_audio', params: { prompt: 'rain on a tin roof', durationSeconds: 2 } }), log.report);
  const end = await log.end;
  t.equal(end.type, 'succeeded', end.type === 'failed' ? end.errorMessage : '');
  if (end.type !== 'succeeded') return;
  const audio = end.files[0]!;
  t.equal(audio.bytes.toString('latin1', 0, 4), 'fLaC', 'a FLAC stream');
  t.match(audio, { contentType: 'audio/flac', mediaType: 'audio' });
  t.equal((await decode(audio.bytes)).audioCodec, 'flac');
  t.equal(fake.submissions.at(-1)!.prompt['11']!.inputs.seconds, 2);
  t.equal(sniffContentType(audio.bytes), undefined, 'FLAC is typed by the adapter itself (the shared sniffer does not know it)');
});

t.test('text_to_text is not served', async (t) => {
  const adapter = createComfyuiAdapter(settings, { id: 'sd15', target: { workflow: WORKFLOWS.textToImage, defaults: { steps: 2 } } }, comfyContext());
  t.teardown(() => adapter.close());
  await t.rejects(adapter.submit(comfyJob({ mode: 'text_to_text' }), updateLog().report), { code: 'provider_input_rejected' });
});
