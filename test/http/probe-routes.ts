import { Type } from '@sinclair/typebox';
import { defineRoute, type RouteDef } from '../../http/route.ts';

/** Routes that exist only in tests, to drive the pipeline through every branch. */
export function probeRoutes(gate?: { wait: () => Promise<void> }): RouteDef[] {
  const Item = Type.Object(
    { name: Type.String({ minLength: 1, maxLength: 50 }), count: Type.Optional(Type.Integer({ minimum: 0 })) },
    { additionalProperties: false },
  );
  return [
    defineRoute({
      method: 'POST',
      path: '/v1/test/echo',
      operationId: 'testEcho',
      summary: 'echo',
      description: 'A route of the tests: echo.',
      tags: ['test'],
      access: 'public',
      body: Item,
      responses: { 201: Type.Object({ echoed: Item }, { additionalProperties: false }) },
      handler: ({ body }) => ({ status: 201, body: { echoed: body } }),
    }),
    defineRoute({
      method: 'GET',
      path: '/v1/test/items/:id',
      operationId: 'testGetItem',
      summary: 'item',
      description: 'A route of the tests: item.',
      tags: ['test'],
      access: 'public',
      params: Type.Object({ id: Type.String({ maxLength: 40 }) }),
      query: Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })) }, { additionalProperties: false }),
      responses: { 200: Type.Object({ id: Type.String(), limit: Type.Integer() }) },
      handler: ({ params, query }) => ({ body: { id: params.id, limit: query.limit ?? 20 } }),
    }),
    defineRoute({
      method: 'GET',
      path: '/v1/test/items/special',
      operationId: 'testGetSpecial',
      summary: 'a literal path beside a parameterised one',
      description: 'A route of the tests: a literal path beside a parameterised one.',
      tags: ['test'],
      access: 'public',
      responses: { 200: Type.Object({ special: Type.Boolean() }) },
      handler: () => ({ body: { special: true } }),
    }),
    defineRoute({
      method: 'GET',
      path: '/v1/test/boom',
      operationId: 'testBoom',
      summary: 'throws',
      description: 'A route of the tests: throws.',
      tags: ['test'],
      access: 'public',
      responses: { 200: null },
      handler: () => {
        throw new Error('secret internal detail at /srv/app.ts:42');
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/v1/test/wrong-shape',
      operationId: 'testWrongShape',
      summary: 'answers with a body its schema forbids',
      description: 'A route of the tests: answers with a body its schema forbids.',
      tags: ['test'],
      access: 'public',
      responses: { 200: Type.Object({ ok: Type.Boolean() }, { additionalProperties: false }) },
      handler: () => ({ body: { ok: true, leaked: 'password-hash' } }),
    }),
    defineRoute({
      method: 'POST',
      path: '/v1/test/slow',
      operationId: 'testSlow',
      summary: 'waits for the test to let it go',
      description: 'A route of the tests: waits for the test to let it go.',
      tags: ['test'],
      access: 'public',
      body: Type.Object({}, { additionalProperties: true }),
      responses: { 200: Type.Object({ done: Type.Boolean() }) },
      handler: async () => {
        await gate?.wait();
        return { body: { done: true } };
      },
    }),
  ];
}
