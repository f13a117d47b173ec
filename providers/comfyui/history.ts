import { PROVIDER_ERROR_CODES, upstreamMessage, type ProviderErrorCode } from '../adapter.ts';

/**
 * What `GET /history/{prompt_id}` says about a prompt. ComfyUI writes the entry once the prompt is over,
 * success or not (PromptQueue.task_done): `{ [prompt_id]: { prompt, outputs, status: { status_str,
 * completed, messages: [[event, data], ...] }, meta } }`; an unknown or unfinished prompt answers `{}`.
 * `outputs` holds, per node, the files its UI shows: `images` (SaveImage, SaveAnimatedWEBP, SaveVideo),
 * `gifs` (VHS_VideoCombine), `audio` (SaveAudio), each `{ filename, subfolder, type }`.
 */
export interface OutputRef {
  node: string;
  filename: string;
  subfolder: string;
  type: string;
}

export type HistoryReading =
  | { state: 'unfinished' }
  | { state: 'succeeded'; files: OutputRef[] }
  | { state: 'failed'; code: ProviderErrorCode; message: string };

const FILE_LISTS = ['images', 'gifs', 'audio', 'video', 'videos'] as const;

export function readHistory(answer: unknown, promptId: string, outputNodes?: readonly string[]): HistoryReading {
  if (!isObject(answer)) return malformed('the history answer is not a JSON object');
  const entry = answer[promptId];
  if (entry === undefined) return { state: 'unfinished' };
  if (!isObject(entry)) return malformed('the history entry is not an object');
  const status = entry.status;

  if (isObject(status) && status.status_str === 'error') return failure(status.messages);
  if (isObject(status) && status.status_str !== 'success') {
    return malformed(`the history entry's status_str is ${JSON.stringify(status.status_str)}, neither success nor error`);
  }
  if (status !== undefined && status !== null && !isObject(status)) return malformed("the history entry's status is not an object");
  if (isObject(status) && status.completed === false) return { state: 'unfinished' };

  const outputs = entry.outputs ?? {};
  if (!isObject(outputs)) return malformed("the history entry's outputs is not an object");
  const files: OutputRef[] = [];
  for (const [node, output] of Object.entries(outputs)) {
    if (outputNodes && !outputNodes.includes(node)) continue;
    if (!isObject(output)) return malformed(`the outputs of node ${node} are not an object`);
    for (const list of FILE_LISTS) {
      const items = output[list];
      if (items === undefined) continue;
      if (!Array.isArray(items)) return malformed(`outputs.${node}.${list} is not a list`);
      for (const item of items) {
        if (!isObject(item) || typeof item.filename !== 'string' || item.filename === '') {
          return malformed(`outputs.${node}.${list} holds an entry without a filename`);
        }
        const ref = {
          node,
          filename: item.filename,
          subfolder: typeof item.subfolder === 'string' ? item.subfolder : '',
          type: typeof item.type === 'string' ? item.type : 'output',
        };
        // Previews (type temp) are what the editor shows, not the workflow's result, unless the deployment names the node.
        if (outputNodes || ref.type === 'output') files.push(ref);
      }
    }
  }
  if (files.length === 0) {
    return {
      state: 'failed',
      code: PROVIDER_ERROR_CODES.badResponse,
      message: outputNodes
        ? `The prompt finished without a file from its output nodes (${outputNodes.join(', ')}).`
        : 'The prompt finished without an output file (no node of the workflow saved one).',
    };
  }
  return { state: 'succeeded', files };
}

/** The error from `status.messages`: an interruption is a cancel at the server, anything else the workflow's failure. */
function failure(messages: unknown): HistoryReading {
  const list = Array.isArray(messages) ? messages : [];
  for (const message of list) {
    if (!Array.isArray(message) || !isObject(message[1])) continue;
    const [event, data] = message as [unknown, Record<string, unknown>];
    if (event === 'execution_interrupted') {
      return { state: 'failed', code: PROVIDER_ERROR_CODES.cancelled, message: upstreamMessage(`ComfyUI interrupted the prompt${at(data)}.`) };
    }
    if (event === 'execution_error') {
      const type = typeof data.exception_type === 'string' ? data.exception_type : 'an error';
      const said = typeof data.exception_message === 'string' ? `: ${data.exception_message}` : '';
      return { state: 'failed', code: PROVIDER_ERROR_CODES.error, message: upstreamMessage(`The workflow failed${at(data)} with ${type}${said}`) };
    }
  }
  return { state: 'failed', code: PROVIDER_ERROR_CODES.error, message: 'ComfyUI reported the prompt failed, without an error message.' };
}

function at(data: Record<string, unknown>): string {
  const node = typeof data.node_id === 'string' || typeof data.node_id === 'number' ? String(data.node_id) : undefined;
  if (node === undefined) return '';
  return typeof data.node_type === 'string' ? ` at node ${node} (${data.node_type})` : ` at node ${node}`;
}

function malformed(what: string): HistoryReading {
  return { state: 'failed', code: PROVIDER_ERROR_CODES.badResponse, message: `ComfyUI's answer is not what its API documents: ${what}.` };
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
