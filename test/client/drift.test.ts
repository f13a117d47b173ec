import { readFileSync } from 'node:fs';
import t from 'tap';
import { GENERATED_DIR, generatedFiles, servedDocument } from '../../client/scripts/generate.ts';
import { startTestServer } from '../helpers/server.ts';

const committed = (name: string) => readFileSync(new URL(name, `file://${GENERATED_DIR}`), 'utf8');
const HINT = 'the OpenAPI document changed: run `npm run sdk:generate` and commit client/src/generated/';

t.test('the committed SDK types are those of the document the service serves', async (t) => {
  const server = await startTestServer(t);
  const response = await server.json('/v1/openapi.json');
  t.equal(response.status, 200);
  const served = response.body;

  const fromServed = await generatedFiles(served);
  t.same(Object.keys(fromServed).sort(), ['openapi.ts', 'workspace.ts']);
  for (const [name, contents] of Object.entries(fromServed)) t.equal(contents, committed(name), `${name}: ${HINT}`);

  // The generator builds the same document in-process (no server), version and base URL aside.
  const inProcess = servedDocument();
  t.same({ ...inProcess, info: { ...inProcess.info, version: 'v' }, servers: [] }, { ...served, info: { ...served.info, version: 'v' }, servers: [] });
});

t.test('a change of the document changes the generated files', async (t) => {
  const document = servedDocument();
  const before = await generatedFiles(document);
  const create = document.paths['/v1/generations'].post;
  create.requestBody.content['application/json'].schema.properties.priority = { type: 'integer', description: 'a new field' };
  const after = await generatedFiles(document);
  t.not(after['openapi.ts'], before['openapi.ts'], 'a new body field shows in the types');
  t.match(after['openapi.ts'], /priority\?: number;/);

  document.paths['/v1/things'] = {
    get: {
      operationId: 'listThings',
      parameters: [{ name: 'workspaceId', in: 'query', schema: { type: 'string' } }],
      responses: { 200: { description: 'ok' } },
    },
  };
  const withRoute = await generatedFiles(document);
  t.match(withRoute['workspace.ts'], /'GET \/v1\/things': 'query'/, 'a new operation taking workspaceId is in the table');
});
