import t from 'tap';
import { openDatabase } from '../../persistence/database.ts';
import { GenerationEntity, generationRowOf, type GenerationRow } from '../../persistence/entities/generation.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';

// A generation read with `select *` (as its actor and the restart recovery read it) is the row the ORM reads:
// one declaration of its columns serves both (on PGlite, or PostgreSQL with TEST_DATABASE_URL).
const fresh = await freshDatabaseUrl();
const db = await openDatabase({ databaseUrl: fresh.url, dataDir: '.data/test' });
t.teardown(async () => {
  await db.close();
  await fresh.drop();
});

const at = new Date(Date.UTC(2026, 0, 1, 12));
const base: GenerationRow = {
  id: 'gen_row_full',
  workspaceId: 'ws_row',
  apiKeyId: 'key_1',
  userId: 'usr_1',
  mode: 'text_to_text',
  modelId: 'local/text-mini',
  status: 'succeeded',
  params: { prompt: 'hello', maxTokens: 256 },
  inputs: { image: 'ast_in' },
  paymentMode: 'credits',
  credits: 7,
  project: 'p',
  idempotencyKey: 'idem',
  provider: 'local',
  deploymentId: 'local-text-mini',
  tokenTerms: { inputMicroPer1k: 10, outputMicroPer1k: 20 },
  usage: { inputTokens: 3, outputTokens: 4 },
  providerJobId: 'p_1',
  attempts: 2,
  textOutput: 'hi',
  outputAssetIds: ['ast_1', 'ast_2'],
  errorCode: null,
  errorMessage: null,
  timeline: [
    { status: 'queued', at: at.toISOString() },
    { status: 'running', at: at.toISOString(), detail: 'queue position 1' },
  ],
  queueDeadline: new Date(at.getTime() + 600_000),
  createdAt: at,
  updatedAt: new Date(at.getTime() + 5_000),
  startedAt: new Date(at.getTime() + 1_000),
  completedAt: new Date(at.getTime() + 4_000),
};

t.test('generationRowOf reads a `select *` row as the ORM does, nulls and all', async (t) => {
  await db.em().execute(`insert into workspaces (id, name, plan, created_at, updated_at) values ('ws_row', 'ws_row', 'pro', now(), now())`);
  const rows: GenerationRow[] = [
    base,
    {
      ...base,
      id: 'gen_row_bare',
      apiKeyId: null,
      userId: null,
      status: 'queued',
      project: null,
      idempotencyKey: null,
      deploymentId: null,
      tokenTerms: null,
      usage: null,
      providerJobId: null,
      attempts: 0,
      textOutput: null,
      outputAssetIds: [],
      errorCode: 'provider_error',
      errorMessage: 'boom',
      timeline: [{ status: 'queued', at: at.toISOString() }],
      startedAt: null,
      completedAt: null,
    },
  ];
  for (const row of rows) await db.em().insert(GenerationEntity, row);
  for (const row of rows) {
    const [raw] = await db.em().execute<Array<Record<string, unknown>>>('select * from generations where id = ?', [row.id]);
    const mapped = generationRowOf(raw!);
    const viaOrm = await db.em().fork().findOneOrFail(GenerationEntity, { id: row.id });
    t.strictSame(mapped, row, `${row.id}: as it was written`);
    t.strictSame(mapped, { ...viaOrm }, `${row.id}: as the ORM reads it`);
    t.strictSame(Object.keys(mapped).sort(), Object.keys(GenerationEntity.meta.properties).sort(), `${row.id}: every property, no other`);
  }
});
