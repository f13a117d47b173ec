import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const DOCS = path.join(ROOT, 'docs');
const pages = fs
  .readdirSync(DOCS)
  .filter((file) => file.endsWith('.md'))
  .map((file) => path.join(DOCS, file));
const sources = [path.join(ROOT, 'README.md'), path.join(ROOT, 'client/README.md'), ...pages];

/** The text outside fenced code blocks, where `](…)` and `#` are Markdown. */
function prose(text: string): string {
  return text.replace(/^```[^\n]*\n[\s\S]*?^```/gm, '');
}

/** The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of prose(fs.readFileSync(file, 'utf8')).split('\n')) {
    const heading = /^#{1,6}\s+(.*?)\s*$/.exec(line);
    if (!heading) continue;
    const slug = heading[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    out.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return out;
}

t.test('the docs index and the README link every page of docs/', async (t) => {
  const index = fs.readFileSync(path.join(DOCS, 'README.md'), 'utf8');
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  t.ok(pages.length >= 12, `${pages.length} pages in docs/`);
  for (const page of pages) {
    const name = path.basename(page);
    if (name !== 'README.md') t.ok(index.includes(`](${name})`), `docs/README.md links ${name}`);
    t.ok(readme.includes(`](docs/${name})`), `README.md links docs/${name}`);
  }
});

t.test('every relative link of the README and the docs reaches a file, and a heading of it when it names one', async (t) => {
  let links = 0;
  for (const source of sources) {
    for (const match of prose(fs.readFileSync(source, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1]!;
      if (/^[a-z]+:/.test(target)) continue;
      links += 1;
      const [file, anchor] = target.split('#') as [string, string | undefined];
      const destination = file === '' ? source : path.resolve(path.dirname(source), file);
      // A file outside the repository is not the repository's to check.
      if (path.relative(ROOT, destination).startsWith('..')) continue;
      const where = `${path.relative(ROOT, source)}: ${target}`;
      if (!fs.existsSync(destination)) {
        t.fail(`${where}: no such file`);
        continue;
      }
      if (anchor !== undefined && destination.endsWith('.md'))
        t.ok(anchors(destination).has(anchor), `${where}: a heading of ${path.relative(ROOT, destination)}`);
    }
  }
  t.ok(links >= 100, `${links} relative links checked`);
});
