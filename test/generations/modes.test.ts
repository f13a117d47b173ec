import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { sniffContentType, imageDimensions } from '../../providers/local/outputs.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { makePng } from '../helpers/files.ts';
import { decode, fixture } from '../providers/support.ts';
import { setPlan } from './support.ts';
import { cancelGeneration, createGeneration, getGeneration, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor, type Gen } from './flow.ts';

const FULL_RUN = ['queued', 'reserved', 'submitted', 'running', 'succeeded'];

async function download(server: TestServer, key: string, workspaceId: string, assetId: string) {
  const meta = await server.json(`/v1/assets/${assetId}?workspaceId=${workspaceId}`, { headers: withKey(key) });
  const link = await server.json(`/v1/assets/${assetId}/download?workspaceId=${workspaceId}`, { headers: withKey(key) });
  const bytes = Buffer.from(await (await fetch(link.body.url)).arrayBuffer());
  return { meta: meta.body as { mediaType: string; contentType: string; sourceGenerationId: string; bytes: number }, bytes };
}

t.test("every mode runs end to end through HTTP to succeeded, with real outputs stored as the workspace's assets", async (t) => {
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '0', RATE_LIMIT_TEAM: '100000' } });
  const user = await signUp(server);
  await setPlan(server, user.workspaceId, 'team');
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read', 'assets.read']);
  const png = makePng(32, 32);
  const webm = await fixture('testsrc2=s=160x120:r=10:d=1', ['-c:v', 'libvpx', '-b:v', '100k', '-f', 'webm']);
  const dataUrl = (mime: string, bytes: Buffer) => `data:${mime};base64,${bytes.toString('base64')}`;

  const cases: Array<{ model: string; params: Record<string, unknown>; inputs?: Record<string, unknown>; check: (g: Gen) => Promise<void> }> = [
    {
      model: 'local/text-mini',
      params: { prompt: 'Name three rivers.', seed: 1 },
      check: async (g) => {
        t.ok(g.textOutput && g.textOutput.length > 0, 'text_to_text: an answer in textOutput');
        t.same(g.outputAssetIds, [], 'no files');
      },
    },
    {
      model: 'local/image-hd',
      params: { prompt: 'a kite', numImages: 3, aspectRatio: '9:16' },
      check: async (g) => {
        t.equal(g.outputAssetIds.length, 3, 'text_to_image: numImages images');
        for (const id of g.outputAssetIds) {
          const { meta, bytes } = await download(server, key, user.workspaceId, id);
          t.match(meta, { mediaType: 'image', contentType: 'image/png', sourceGenerationId: g.id, bytes: bytes.length });
          t.equal(sniffContentType(bytes), 'image/png');
          const size = imageDimensions(bytes)!;
          t.ok(size.height > size.width, `9:16 is taller than wide (${size.width}x${size.height})`);
        }
      },
    },
    {
      model: 'local/image-edit',
      params: { prompt: 'as a linocut', strength: 0.5 },
      inputs: { imageUrls: [dataUrl('image/png', png)] },
      check: async (g) => {
        t.equal(g.outputAssetIds.length, 1, 'image_to_image: one image');
        const { bytes } = await download(server, key, user.workspaceId, g.outputAssetIds[0]!);
        t.equal(sniffContentType(bytes), 'image/png');
      },
    },
    ...(['wav', 'mp3', 'ogg'] as const).map((format) => ({
      model: 'local/voice',
      params: { prompt: 'Welcome aboard.', format, durationSeconds: 2 },
      check: async (g: Gen) => {
        t.equal(g.outputAssetIds.length, 1, `text_to_audio ${format}: one file`);
        const { meta, bytes } = await download(server, key, user.workspaceId, g.outputAssetIds[0]!);
        t.equal(meta.mediaType, 'audio');
        t.equal(meta.contentType, { wav: 'audio/wav', mp3: 'audio/mpeg', ogg: 'audio/ogg' }[format]);
        const decoded = await decode(bytes);
        t.equal(decoded.code, 0, `the ${format} decodes`);
        t.ok(decoded.audioCodec, `an audio stream (${decoded.audioCodec})`);
        t.ok(Math.abs((decoded.decodedSeconds ?? 0) - 2) < 0.5, `about 2 seconds of audio (${decoded.decodedSeconds})`);
      },
    })),
    {
      model: 'local/video-short',
      params: { prompt: 'waves', durationSeconds: 2, aspectRatio: '16:9' },
      check: async (g) => videoCheck(g, 'text_to_video', 2, (w, h) => w > h),
    },
    {
      model: 'local/animate',
      params: { prompt: 'slow zoom', durationSeconds: 2 },
      inputs: { imageUrls: [dataUrl('image/png', png)] },
      check: async (g) => videoCheck(g, 'image_to_video', 2, () => true),
    },
    {
      model: 'local/video-restyle',
      params: { prompt: 'film noir', durationSeconds: 1 },
      inputs: { videoUrls: [dataUrl('video/webm', webm)] },
      check: async (g) => videoCheck(g, 'video_to_video', 1, () => true),
    },
  ];
  async function videoCheck(g: Gen, mode: string, seconds: number, shape: (w: number, h: number) => boolean) {
    t.equal(g.outputAssetIds.length, 1, `${mode}: one clip`);
    const { meta, bytes } = await download(server, key, user.workspaceId, g.outputAssetIds[0]!);
    t.match(meta, { mediaType: 'video', contentType: 'video/mp4' });
    const decoded = await decode(bytes);
    t.equal(decoded.code, 0, `${mode}: the MP4 decodes`);
    t.ok(decoded.videoCodec, `${mode}: a video stream`);
    t.ok(shape(decoded.width!, decoded.height!), `${mode}: ${decoded.width}x${decoded.height}`);
    t.ok(Math.abs((decoded.durationSeconds ?? 0) - seconds) < 0.5, `${mode}: about ${seconds} s (${decoded.durationSeconds})`);
  }

  const modes = new Set<string>();
  let spent = 0;
  const ids: string[] = [];
  for (const c of cases) {
    const model = server.services.catalog.get(c.model)!;
    modes.add(model.mode);
    const created = await createGeneration(server, key, user.workspaceId, {
      mode: model.mode,
      model: c.model,
      params: c.params,
      inputs: c.inputs,
      paymentMode: 'credits',
    });
    t.equal(created.status, 201, `${c.model}: ${JSON.stringify(created.body).slice(0, 300)}`);
    t.equal(created.body.paymentMode, 'credits');
    const done = await waitFor(server, key, user.workspaceId, created.body.id, isTerminal, 'a terminal state');
    t.equal(done.status, 'succeeded', `${c.model}: ${done.errorCode} ${done.errorMessage}`);
    t.same(
      done.timeline.map((e) => e.status),
      FULL_RUN,
      `${c.model}: every state in the timeline`,
    );
    t.ok(done.startedAt && done.completedAt && done.startedAt <= done.completedAt, 'startedAt and completedAt set');
    await c.check(done);
    spent += done.credits;
    ids.push(done.id);
  }
  t.equal(modes.size, 7, 'all seven modes');
  const query = serverQuery(server);
  const money = await moneyOf(query, user.workspaceId);
  t.same(
    money,
    { available: 12_000 - spent, reserved: 0, ledgerAvailable: 12_000 - spent, ledgerReserved: 0, reservations: [] },
    `team plan credits less ${spent} captured`,
  );
  const ledger = await ledgerByGeneration(query, user.workspaceId);
  for (const id of ids) t.same(ledger[id], { reserve: 1, capture: 1 });
  const [wallet] = await query<{ wallet_cents: number }>('select wallet_cents from workspace_accounts where workspace_id = ?', [user.workspaceId]);
  t.equal(Number(wallet!.wallet_cents), 0, 'paymentMode credits never touches the wallet');
});

t.test('cancel in reserved, submitted and running: each state left for cancelled, credits released, and nothing comes of a late provider job', async (t) => {
  // An input URL that answers only when told to keeps a job in `reserved` (its inputs are fetched before submission).
  let answer!: () => void;
  const held = new Promise<void>((resolve) => {
    answer = resolve;
  });
  const png = makePng(8, 8);
  const origin = http.createServer((_req, res) => {
    void held.then(() => res.writeHead(200, { 'content-type': 'image/png' }).end(png));
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        answer();
        origin.close(() => resolve());
      }),
  );
  const slowUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}/slow.png`;

  // On a manual clock the local provider's latency only passes when the test moves time.
  const clock = new ManualClock(Date.UTC(2026, 6, 1, 12, 0, 0));
  const server = await startTestServer(t, { clock, env: { LOCAL_PROVIDER_LATENCY_MS: '10000', ALLOW_PRIVATE_EGRESS: 'true', RATE_LIMIT_PRO: '100000' } });
  const user = await signUp(server);
  await setPlan(server, user.workspaceId, 'pro');
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const query = serverQuery(server);

  const reserved = await createGeneration(server, key, user.workspaceId, {
    mode: 'image_to_image',
    model: 'local/image-edit',
    params: { prompt: 'x' },
    inputs: { imageUrls: [slowUrl] },
  });
  t.equal(reserved.status, 201, JSON.stringify(reserved.body));
  await waitFor(server, key, user.workspaceId, reserved.body.id, (g) => g.status === 'reserved', 'reserved');
  const submitted = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'a' } });
  const running = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'b' } });
  await waitFor(server, key, user.workspaceId, submitted.body.id, (g) => g.status === 'submitted', 'submitted');
  await waitFor(server, key, user.workspaceId, running.body.id, (g) => g.status === 'submitted', 'submitted');
  clock.advance(5_000);
  await waitFor(server, key, user.workspaceId, running.body.id, (g) => g.status === 'running', 'running');
  t.equal((await getGeneration(server, key, user.workspaceId, submitted.body.id)).status, 'running', 'both text jobs run after half the latency');

  // Cancel the reserved one, then the others; the 'submitted' job is cancelled in `running`, so make one more that stays submitted.
  const another = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'c' } });
  await waitFor(server, key, user.workspaceId, another.body.id, (g) => g.status === 'submitted', 'submitted');

  const expectations: Array<[string, string[]]> = [
    [reserved.body.id, ['queued', 'reserved', 'cancelled']],
    [another.body.id, ['queued', 'reserved', 'submitted', 'cancelled']],
    [running.body.id, ['queued', 'reserved', 'submitted', 'running', 'cancelled']],
  ];
  for (const [id, timeline] of expectations) {
    const cancelled = await cancelGeneration(server, key, user.workspaceId, id);
    t.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    t.same(
      cancelled.body.timeline.map((e) => e.status),
      timeline,
      `cancelled from ${timeline.at(-2)}`,
    );
    t.equal(cancelled.body.timeline.at(-1)!.detail, 'by user');
    t.ok(cancelled.body.completedAt);
  }
  // The held input arrives after the cancel; the late provider job is stopped, and nothing comes of it.
  answer();
  clock.advance(20_000);
  const finished = await waitFor(server, key, user.workspaceId, submitted.body.id, isTerminal, 'succeeded');
  t.equal(finished.status, 'succeeded', 'the job left alone still finishes');
  await server.services.actors.drain();
  clock.advance(20_000);
  await server.services.actors.drain();
  for (const [id] of expectations) {
    const g = await getGeneration(server, key, user.workspaceId, id);
    t.equal(g.status, 'cancelled', `${id} stays cancelled`);
    t.same(g.outputAssetIds, []);
    t.equal(g.textOutput, null, 'no late output');
  }
  const [assets] = await query<{ n: string }>('select count(*)::int8 as n from assets where workspace_id = ?', [user.workspaceId]);
  t.equal(Number(assets!.n), 0, 'the cancelled image job stored nothing');
  const money = await moneyOf(query, user.workspaceId);
  t.same(money, { available: 3_000 - 1, reserved: 0, ledgerAvailable: 3_000 - 1, ledgerReserved: 0, reservations: [] }, 'only the finished job was charged');
  const ledger = await ledgerByGeneration(query, user.workspaceId);
  for (const [id] of expectations) t.same(ledger[id], { reserve: 1, release: 1 });
});

t.test("the plan's queue room: a free workspace holds 20 unfinished jobs; the 21st is 422 plan_limit_reached", async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 6, 1, 12, 0, 0));
  const server = await startTestServer(t, { clock, env: { LOCAL_PROVIDER_LATENCY_MS: '10000', RATE_LIMIT_FREE: '100000' } });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  for (let i = 0; i < 20; i++) {
    const ok = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `p${i}` } });
    t.equal(ok.status, 201);
  }
  const over = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'one too many' } });
  t.equal(over.status, 422);
  t.equal(over.body.error?.code, 'plan_limit_reached');
  t.match(over.body.error?.message, /20 unfinished jobs at a time \(2 running\)/);
  const money = await moneyOf(serverQuery(server), user.workspaceId);
  t.equal(money.available, 80, 'the refused job reserved nothing');
});
