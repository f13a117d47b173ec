import fs from 'node:fs/promises';
import path from 'node:path';
import { ROOT } from '../fixtures/child.ts';

export const DOCKERFILE = path.join(ROOT, 'deploy/container/Dockerfile');

export interface Instruction {
  stage: string;
  name: string;
  args: string;
}

/** The Dockerfile's instructions (continuation lines joined, comments dropped), each with the stage it is in. */
export async function dockerfileInstructions(): Promise<Instruction[]> {
  const text = (await fs.readFile(DOCKERFILE, 'utf8')).replace(/\\\n/g, ' ');
  const instructions: Instruction[] = [];
  let stage = '';
  for (const line of text.split('\n').map((l) => l.trim())) {
    if (!line || line.startsWith('#')) continue;
    const [, name = '', args = ''] = /^(\w+)\s+(.*)$/.exec(line) ?? [];
    if (name.toUpperCase() === 'FROM') stage = /\bAS\s+(\S+)/i.exec(args)?.[1] ?? '';
    instructions.push({ stage, name: name.toUpperCase(), args: args.replace(/\s+/g, ' ') });
  }
  return instructions;
}

/** The run stage's CMD, in its exec form (the command a container starts). */
export async function dockerfileCmd(): Promise<string[]> {
  const cmd = (await dockerfileInstructions()).filter((i) => i.name === 'CMD').at(-1);
  if (!cmd) throw new Error('the Dockerfile has no CMD');
  return JSON.parse(cmd.args) as string[];
}
