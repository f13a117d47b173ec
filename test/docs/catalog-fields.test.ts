import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CatalogSpec } from '../../domain/catalog/file-schema.ts';
import { ROOT } from '../fixtures/child.ts';

/**
 * docs/catalog.md's field tables against the catalog file's schema (domain/catalog/file-schema.ts): every
 * field of a plan, a model and a deployment is in its table, and the table's `required` column says
 * `required` for exactly the fields the schema requires, so an operator writing a file from the docs is not
 * refused for a field the docs call optional, nor told to fill one that is not needed.
 */
const docs = readFileSync(path.join(ROOT, 'docs/catalog.md'), 'utf8');

/** The rows of the first table under `### <heading>`: each field named in its first cell, with its second cell. */
function table(heading: string): Map<string, string> {
  const section = docs.split(`\n### ${heading}\n`)[1]?.split('\n#')[0] ?? '';
  const rows = new Map<string, string>();
  // The first table of the section (the Models section has the parameters' table after it).
  const all = section.split('\n');
  const start = all.findIndex((line) => line.startsWith('| field |'));
  const end = all.findIndex((line, i) => i > start && !line.startsWith('|'));
  const lines = all.slice(start, end < 0 ? undefined : end).filter((line) => line.startsWith('| `'));
  for (const line of lines) {
    const [names, required] = line.split(' | ');
    for (const name of names!.matchAll(/`([A-Za-z0-9]+)`/g)) rows.set(name[1]!, required!.trim());
  }
  return rows;
}

interface ObjectSchema {
  properties: Record<string, unknown>;
  required?: string[];
}
const schema = CatalogSpec as unknown as {
  properties: { plans: { items: ObjectSchema }; models: { items: ObjectSchema & { properties: { deployments: { items: ObjectSchema } } } } };
};
const model = schema.properties.models.items;
const objects: Array<[string, ObjectSchema]> = [
  ['Plans', schema.properties.plans.items],
  ['Models', model],
  ['Deployments', model.properties.deployments.items],
];

for (const [heading, object] of objects) {
  t.test(`### ${heading}: every field, and which are required`, async (t) => {
    const rows = table(heading);
    t.ok(rows.size > 0, 'the table is found');
    const required = new Set(object.required ?? []);
    for (const field of Object.keys(object.properties)) {
      const cell = rows.get(field);
      t.ok(cell !== undefined, `${field} is in the table`);
      if (cell === undefined) continue;
      t.equal(
        cell.startsWith('required'),
        required.has(field),
        `${field}: ${required.has(field) ? 'required' : 'optional'} as the schema says (the table says "${cell}")`,
      );
    }
    for (const field of rows.keys()) t.ok(field in object.properties, `${field} in the table is a field of the file`);
  });
}

t.test("a model's sample: both of its fields said to be required", async (t) => {
  const sample = (model.properties as unknown as { sample: ObjectSchema }).sample;
  t.same([...(sample.required ?? [])].sort(), ['note', 'prompt']);
  t.match(table('Models').get('sample'), /required/);
  t.match(docs, /`sample` \| required \| `prompt` and `note`, both required/);
});
