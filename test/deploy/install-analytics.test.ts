import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from '../fixtures/child.ts';

/**
 * No install of the project reports anything (docs/build.md, Install analytics): @scarf/scarf, the install
 * analytics that @stoplight/spectral-cli's packages depend on, is overridden by an empty package of ours
 * (package.json's overrides, deploy/no-install-analytics), so `npm ci` and `npm install` put no copy of it and
 * run no script of it. Read from the lockfile npm installs from, and from the stand-in itself.
 */
const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { name?: string; resolved?: string; link?: boolean; hasInstallScript?: boolean; version?: string }>;
};
const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  overrides?: Record<string, string>;
  devDependencies: Record<string, string>;
};

t.test('@scarf/scarf is our empty stand-in wherever the lockfile has it', async (t) => {
  t.equal(pkg.overrides?.['@scarf/scarf'], '$@scarf/scarf', 'every dependent gets the root one');
  t.equal(pkg.devDependencies['@scarf/scarf'], 'file:deploy/no-install-analytics', 'which is the stand-in');
  const copies = Object.entries(lock.packages).filter(([where, entry]) => where.endsWith('node_modules/@scarf/scarf') || entry.name === '@scarf/scarf');
  t.ok(copies.length >= 1, 'the lockfile names it');
  for (const [where, entry] of copies) {
    if (where.startsWith('node_modules/')) t.same(entry, { resolved: 'deploy/no-install-analytics', link: true }, `${where}: a link to the stand-in`);
    else t.equal(where, 'deploy/no-install-analytics', `${where}: the stand-in itself`);
    t.notOk(entry.hasInstallScript, `${where}: no install script`);
  }
  const stub = JSON.parse(readFileSync(path.join(ROOT, 'deploy/no-install-analytics/package.json'), 'utf8')) as Record<string, unknown>;
  t.equal(stub.name, '@scarf/scarf');
  t.notOk('scripts' in stub || 'main' in stub || 'dependencies' in stub, 'the stand-in has no script, no code and no dependency');
  t.notOk(
    Object.values(lock.packages).some((entry) => entry.resolved?.includes('@scarf/scarf/-/')),
    "nothing is downloaded from the registry's @scarf/scarf",
  );
});
