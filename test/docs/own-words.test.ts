import t from 'tap';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/**
 * The code and the docs speak in the project's own words: no file cites a document that is not part of the
 * repository (a specification or a record of decisions kept elsewhere). What such a document settled is
 * written on the page of its area in docs/, and comments point there.
 */
const ROOT = path.resolve(import.meta.dirname, '..', '..');

/** The names of the outside documents, built so that this file does not cite them itself. */
const OUTSIDE = ['SPEC', 'DECISIONS'].map((name) => `${name}.md`);
const CITATION = new RegExp(`\\b(?:${OUTSIDE.map((name) => name.replace('.', '\\.')).join('|')})\\b`);

/** The tracked .ts and .md files (git's list); without git, every such file outside node_modules and build output. */
function trackedFiles(): string[] {
  try {
    const listed = execFileSync('git', ['ls-files', '-z', '--', '*.ts', '*.md'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    return listed.split('\0').filter((file) => file !== '' && !file.split('/').includes('node_modules'));
  } catch {
    const found: string[] = [];
    const walk = (dir: string) => {
      for (const entry of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
        const relative = path.join(dir, entry.name);
        if (entry.isDirectory()) {
          if (entry.name !== 'node_modules' && entry.name !== 'dist' && !entry.name.startsWith('.')) walk(relative);
        } else if (/\.(?:ts|md)$/.test(entry.name)) {
          found.push(relative);
        }
      }
    };
    walk('');
    return found;
  }
}

t.test('the pattern finds a citation in any of its usual forms', async (t) => {
  for (const name of OUTSIDE) {
    t.match(`(${name} section 3)`, CITATION, `(${name} section 3)`);
    t.match(`see ${name}: "Lists"`, CITATION, `see ${name}`);
    t.match(`[${name}](../shared/${name})`, CITATION, 'a Markdown link');
  }
  t.notMatch('docs/generations.md, States', CITATION, 'a docs page is not a citation');
});

t.test('no tracked .ts or .md file cites a document outside the repository', async (t) => {
  const files = trackedFiles();
  t.ok(files.length > 500, `${files.length} files read`);
  t.ok(files.includes('README.md') && files.includes('docs/architecture.md'), 'the README and the docs are among them');
  const citations: string[] = [];
  for (const file of files) {
    const absolute = path.join(ROOT, file);
    if (!fs.existsSync(absolute)) continue; // deleted in the working tree, not yet in git's list
    fs.readFileSync(absolute, 'utf8')
      .split('\n')
      .forEach((line, index) => {
        if (CITATION.test(line)) citations.push(`${file}:${index + 1}: ${line.trim().slice(0, 160)}`);
      });
  }
  t.same(citations, [], 'cite docs/ instead: the page of the area that says it');
});
