import { ApiError, createClient } from '@generation-service/client';

const client = createClient({
  baseUrl: process.env.GENERATION_SERVICE_URL,        // e.g. http://localhost:3000
  apiKey: process.env.GENERATION_SERVICE_API_KEY,     // gs_live_…
  workspaceId: process.env.GENERATION_SERVICE_WORKSPACE_ID,
});

// Create a generation (the client adds an Idempotency-Key) and wait until it has finished.
const created = await client.generations.create({
  mode: 'text_to_text',
  model: 'local/text-mini',
  params: { prompt: 'Write a haiku about lighthouses' },
});
const done = await client.waitFor(created.id, { timeoutMs: 60_000 });
console.log(`${done.id} ${done.status}: ${done.textOutput}`);

// Every generation of the workspace, newest first, fetched 20 to a page.
for await (const generation of client.generations.list({ limit: 20 })) {
  console.log(`${generation.id} ${generation.status} ${generation.credits} credits`);
}

// An answer other than 2xx is thrown as an ApiError.
try {
  await client.generations.get('gen_0000000000000000000000000000');
} catch (error) {
  if (!(error instanceof ApiError)) throw error;
  console.log(`${error.status} ${error.code} (request ${error.requestId}): ${error.message}`);
}
