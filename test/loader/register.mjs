// The tests' TypeScript loader: `node --import ./test/loader/register.mjs file.ts`. Each `.ts` file is given to
// esbuild's transformSync on its own and resolution is left to Node: the tree imports with explicit `.ts`
// extensions, and `verbatimModuleSyntax` with `isolatedModules` make a per-file transform exact. It does what
// tsx did for the tests at about half of tsx's CPU per start (docs/testing.md, "What the suite's time is made of").
import { register } from 'node:module';

process.setSourceMapsEnabled(true);
register('./hooks.mjs', import.meta.url);
