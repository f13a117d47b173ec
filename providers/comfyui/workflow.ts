import { randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { PROVIDER_ERROR_CODES, ProviderFailure } from '../adapter.ts';
import type { ComfyuiDeploymentTarget } from './deployment.ts';

/**
 * A deployment's workflow template: ComfyUI's API format (node id → { class_type, inputs }) whose string
 * values may hold placeholders. A value that is exactly `"{{name}}"` becomes the job's value with its JSON
 * type (a number stays a number: `"{{seed}}"` → 42); a placeholder inside a longer string is replaced by
 * its text (`"a photo of {{prompt}}"`). Input files are named `{{image}}`, `{{image2}}`..`{{image4}}`,
 * `{{mask}}` and `{{video}}`, each replaced by the name the upload answered.
 */
export type ApiWorkflow = Record<string, { class_type: string; inputs: Record<string, unknown> }>;

export interface WorkflowTemplate {
  workflow: ApiWorkflow;
  /** Every placeholder the workflow holds. */
  placeholders: Set<string>;
}

export const FILE_PLACEHOLDERS = ['image', 'image2', 'image3', 'image4', 'mask', 'video'] as const;
/** Our standard parameters (SPEC section 2), and the width and height a catalog mapping derives from aspectRatio. */
export const PARAM_PLACEHOLDERS = [
  'prompt',
  'negativePrompt',
  'seed',
  'aspectRatio',
  'strength',
  'numImages',
  'voice',
  'speed',
  'format',
  'systemPrompt',
  'temperature',
  'maxTokens',
  'durationSeconds',
  'width',
  'height',
];

/** Optional texts a job may leave out: an empty string says "nothing to avoid". */
const OPTIONAL_TEXT = ['negativePrompt', 'systemPrompt'];

const PLACEHOLDER = /\{\{\s*([A-Za-z][A-Za-z0-9_]*)\s*\}\}/g;
const WHOLE = /^\{\{\s*([A-Za-z][A-Za-z0-9_]*)\s*\}\}$/;

/** Reads and checks the deployment's workflow; `problems` says what is wrong, one line each. */
export function loadWorkflowTemplate(
  target: ComfyuiDeploymentTarget,
  readFile: (path: string) => string = (path) => readFileSync(path, 'utf8'),
): { template?: WorkflowTemplate; problems: string[] } {
  let json: unknown;
  if ('workflowFile' in target) {
    let text: string;
    try {
      text = readFile(target.workflowFile);
    } catch (error) {
      return { problems: [`workflowFile ${target.workflowFile} cannot be read: ${(error as Error).message}`] };
    }
    try {
      json = JSON.parse(text);
    } catch (error) {
      return { problems: [`workflowFile ${target.workflowFile} is not valid JSON: ${(error as Error).message}`] };
    }
  } else {
    json = target.workflow;
  }
  const known = new Set<string>([...PARAM_PLACEHOLDERS, ...FILE_PLACEHOLDERS, ...Object.keys(target.defaults ?? {})]);
  return checkWorkflow(json, known, target.outputNodes);
}

export function checkWorkflow(json: unknown, known: ReadonlySet<string>, outputNodes?: readonly string[]): { template?: WorkflowTemplate; problems: string[] } {
  const problems: string[] = [];
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return { problems: ['the workflow is not a JSON object of nodes'] };
  const record = json as Record<string, unknown>;
  if (Array.isArray(record.nodes) && Array.isArray(record.links)) {
    return { problems: ['the workflow is in the editor\'s format; export it with "Save (API Format)"'] };
  }
  const ids = Object.keys(record);
  if (ids.length === 0) problems.push('the workflow has no nodes');
  const placeholders = new Set<string>();
  for (const id of ids) {
    const node = record[id] as { class_type?: unknown; inputs?: unknown } | null;
    if (typeof node !== 'object' || node === null || typeof node.class_type !== 'string' || node.class_type === '') {
      problems.push(`node ${id} has no class_type`);
      continue;
    }
    if (typeof node.inputs !== 'object' || node.inputs === null || Array.isArray(node.inputs)) {
      problems.push(`node ${id} (${node.class_type}) has no inputs object`);
      continue;
    }
    walkStrings(
      node.inputs,
      (text, path) => {
        for (const name of placeholdersIn(text)) {
          placeholders.add(name);
          if (!known.has(name)) problems.push(`node ${id} (${node.class_type}) input ${path} names an unknown placeholder {{${name}}}`);
        }
        if (text.replace(PLACEHOLDER, '').includes('{{'))
          problems.push(`node ${id} (${node.class_type}) input ${path} holds a malformed placeholder: ${text.slice(0, 80)}`);
      },
      '',
    );
  }
  for (const id of outputNodes ?? []) if (!(id in record)) problems.push(`outputNodes names node ${id}, which the workflow does not have`);
  if (problems.length > 0) return { problems };
  return { template: { workflow: record as ApiWorkflow, placeholders }, problems };
}

/**
 * Where each placeholder's value comes from: the job's mapped input, then its params, then the
 * deployment's defaults, then the uploaded files; a seed nobody gave is drawn at random (a seed is only
 * promised to repeat an output when the caller sets it), a negative or system prompt left out is empty.
 * Any other placeholder without a value refuses the job.
 */
export function placeholderValues(
  template: WorkflowTemplate,
  sources: { input: Record<string, unknown>; params: Record<string, unknown>; defaults?: Record<string, unknown>; files: Record<string, string> },
): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  const missing: string[] = [];
  for (const name of template.placeholders) {
    const value = (FILE_PLACEHOLDERS as readonly string[]).includes(name)
      ? sources.files[name]
      : (sources.input[name] ?? sources.params[name] ?? sources.defaults?.[name]);
    if (value !== undefined && value !== null) values[name] = value;
    else if (name === 'seed') values[name] = randomInt(0, 2 ** 31 - 1);
    else if (OPTIONAL_TEXT.includes(name)) values[name] = '';
    else missing.push(name);
  }
  if (missing.length > 0) {
    const what = missing.map((name) => ((FILE_PLACEHOLDERS as readonly string[]).includes(name) ? `an input file for {{${name}}}` : `a value for {{${name}}}`));
    throw new ProviderFailure(PROVIDER_ERROR_CODES.inputRejected, `The deployment's workflow needs ${what.join(', ')}, which the job does not give.`);
  }
  return values;
}

/** A copy of the template with every placeholder replaced. */
export function fillWorkflow(template: WorkflowTemplate, values: Record<string, unknown>): ApiWorkflow {
  return fill(template.workflow, values) as ApiWorkflow;
}

function fill(value: unknown, values: Record<string, unknown>): unknown {
  if (typeof value === 'string') {
    const whole = WHOLE.exec(value);
    if (whole) return values[whole[1]!];
    return value.replace(PLACEHOLDER, (_, name: string) => {
      const replacement = values[name];
      if (typeof replacement === 'object') {
        throw new ProviderFailure(PROVIDER_ERROR_CODES.inputRejected, `{{${name}}} sits inside a longer string, so its value must be text or a number.`);
      }
      return String(replacement);
    });
  }
  if (Array.isArray(value)) return value.map((item) => fill(item, values));
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) out[key] = fill(item, values);
    return out;
  }
  return value;
}

function placeholdersIn(text: string): string[] {
  return [...text.matchAll(PLACEHOLDER)].map((match) => match[1]!);
}

function walkStrings(value: unknown, visit: (text: string, path: string) => void, path: string): void {
  if (typeof value === 'string') visit(value, path);
  else if (Array.isArray(value)) value.forEach((item, index) => walkStrings(item, visit, `${path}[${index}]`));
  else if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) walkStrings(item, visit, path ? `${path}.${key}` : key);
  }
}
