/**
 * A strict fake of a ComfyUI server, for the adapter's tests. Built from:
 * - comfyanonymous/ComfyUI server.py (routes /ws, /upload/image, /view, /prompt, /queue, /interrupt,
 *   /history/{prompt_id}; the multipart fields image, overwrite, type, subfolder and the upload's answer
 *   { name, subfolder, type }; `{ error, node_errors }` with 400 for a refused prompt; the prompt_id a
 *   client may choose; the targeted `{ prompt_id }` interrupt; the first `status` message carrying `sid`);
 * - execution.py (validate_prompt and validate_inputs: the error objects { type, message, details,
 *   extra_info } such as required_input_missing, value_not_in_list, invalid_input_type,
 *   value_smaller_than_min, return_type_mismatch, prompt_no_outputs, prompt_outputs_failed_validation;
 *   PromptExecutor's messages execution_start, execution_cached, executing, executed, execution_success,
 *   execution_error, execution_interrupted; PromptQueue.task_done's history entry
 *   { prompt, outputs, status: { status_str, completed, messages }, meta });
 * - main.py prompt_worker (the history is written, then `executing` with node null goes to the client id)
 *   and hijack_progress (`progress` { value, max, prompt_id, node });
 * - script_examples/websockets_api_example.py, and docs.comfy.org "Messages" (comms_messages) and
 *   "Server routes".
 * ComfyUI checks no credentials; with `apiKey` set the fake stands for an authenticating proxy in front of
 * it and refuses any request (socket upgrade included) without `Authorization: Bearer <key>` with 401.
 * Messages of a prompt go only to the socket open under its client_id, as in server.py's send_json.
 *
 * A small node library stands for the server's nodes (checkpoints, samplers, LoadImage, SaveImage,
 * SaveAnimatedWEBP, VHS_VideoCombine, SaveAudio...), validated as validate_inputs does. Output files are
 * real: PNGs drawn here, and GIF/WEBP/MP4/FLAC made by the bundled ffmpeg.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import type { AdapterContext, AdapterJob, AdapterUpdate, Report } from '../../providers/adapter.ts';
import { encodePng } from '../../providers/local/png.ts';
import { imageDimensions } from '../../providers/local/sniff.ts';
import { guardedFetcher } from '../../runtime/egress.ts';
import { fixture } from '../providers/support.ts';

type InputSpec = { type: string | string[]; min?: number; max?: number; optional?: boolean };
interface NodeClass {
  inputs: Record<string, InputSpec>;
  returns: string[];
  /** Output nodes and the list their UI output goes in. */
  output?: 'images' | 'gifs' | 'audio';
  validate?(inputs: Record<string, unknown>, server: FakeState): string | true;
}

const SAMPLERS = ['euler', 'euler_ancestral', 'dpmpp_2m'];
const SCHEDULERS = ['normal', 'karras', 'simple'];
const CHECKPOINTS = ['sd_xl_base_1.0.safetensors', 'v1-5-pruned-emaonly.safetensors'];
// biome-ignore lint/correctness/noPrecisionLoss: ComfyUI's own bound for seeds, as its /object_info answers it (a JSON number past 2^53).
const INT_MAX = 0xffffffffffffffff;

export const NODES: Record<string, NodeClass> = {
  CheckpointLoaderSimple: { inputs: { ckpt_name: { type: CHECKPOINTS } }, returns: ['MODEL', 'CLIP', 'VAE'] },
  CLIPTextEncode: { inputs: { text: { type: 'STRING' }, clip: { type: 'CLIP' } }, returns: ['CONDITIONING'] },
  EmptyLatentImage: {
    inputs: { width: { type: 'INT', min: 16, max: 16384 }, height: { type: 'INT', min: 16, max: 16384 }, batch_size: { type: 'INT', min: 1, max: 4096 } },
    returns: ['LATENT'],
  },
  KSampler: {
    inputs: {
      model: { type: 'MODEL' },
      seed: { type: 'INT', min: 0, max: INT_MAX },
      steps: { type: 'INT', min: 1, max: 10000 },
      cfg: { type: 'FLOAT', min: 0, max: 100 },
      sampler_name: { type: SAMPLERS },
      scheduler: { type: SCHEDULERS },
      positive: { type: 'CONDITIONING' },
      negative: { type: 'CONDITIONING' },
      latent_image: { type: 'LATENT' },
      denoise: { type: 'FLOAT', min: 0, max: 1 },
    },
    returns: ['LATENT'],
  },
  VAEDecode: { inputs: { samples: { type: 'LATENT' }, vae: { type: 'VAE' } }, returns: ['IMAGE'] },
  VAEEncode: { inputs: { pixels: { type: 'IMAGE' }, vae: { type: 'VAE' } }, returns: ['LATENT'] },
  LoadImage: {
    inputs: { image: { type: 'COMBO_INPUT_FILES' } },
    returns: ['IMAGE', 'MASK'],
    // LoadImage.VALIDATE_INPUTS: folder_paths.exists_annotated_filepath(image) or "Invalid image file: ..."
    validate: (inputs, server) => server.files.has(`input/${String(inputs.image)}`) || `Invalid image file: ${String(inputs.image)}`,
  },
  SaveImage: { inputs: { images: { type: 'IMAGE' }, filename_prefix: { type: 'STRING' } }, returns: [], output: 'images' },
  PreviewImage: { inputs: { images: { type: 'IMAGE' } }, returns: [], output: 'images' },
  SaveAnimatedWEBP: {
    inputs: {
      images: { type: 'IMAGE' },
      filename_prefix: { type: 'STRING' },
      fps: { type: 'FLOAT', min: 0.01, max: 1000 },
      lossless: { type: 'BOOLEAN' },
      quality: { type: 'INT', min: 0, max: 100 },
      method: { type: ['default', 'fastest', 'slowest'] },
    },
    returns: [],
    output: 'images',
  },
  VHS_VideoCombine: {
    inputs: {
      images: { type: 'IMAGE' },
      frame_rate: { type: 'FLOAT', min: 1 },
      loop_count: { type: 'INT', min: 0, max: 100 },
      filename_prefix: { type: 'STRING' },
      format: { type: ['image/gif', 'image/webp', 'video/h264-mp4'] },
      pingpong: { type: 'BOOLEAN' },
      save_output: { type: 'BOOLEAN' },
    },
    returns: ['VHS_FILENAMES'],
    output: 'gifs',
  },
  EmptyLatentAudio: { inputs: { seconds: { type: 'FLOAT', min: 1, max: 1000 }, batch_size: { type: 'INT', min: 1, max: 4096 } }, returns: ['LATENT'] },
  VAEDecodeAudio: { inputs: { samples: { type: 'LATENT' }, vae: { type: 'VAE' } }, returns: ['AUDIO'] },
  SaveAudio: { inputs: { audio: { type: 'AUDIO' }, filename_prefix: { type: 'STRING' } }, returns: [], output: 'audio' },
};

type Prompt = Record<string, { class_type: string; inputs: Record<string, unknown> }>;
type QueueItem = [number, string, Prompt, Record<string, unknown>, string[]];
type Route = 'POST /prompt' | 'GET /history' | 'GET /queue' | 'POST /queue' | 'POST /interrupt' | 'POST /upload/image' | 'GET /view';

export interface Misbehaviour {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  /** Never answer (the client's time-out decides). */
  hang?: boolean;
  /** Answer 200 with a body that is not JSON. */
  malformed?: boolean;
  /** How many requests it applies to; 1 by default. */
  times?: number;
}

export interface ExecutionError {
  node?: string;
  exception_type: string;
  exception_message: string;
}

interface FakeState {
  files: Map<string, Buffer>;
}

export interface FakeComfyui {
  url: string;
  /** Accepted `POST /prompt`s, in order: the prompt id, the client id, the workflow as received. */
  submissions: Array<{ promptId: string; clientId: string | undefined; prompt: Prompt }>;
  /** `METHOD /path` of every HTTP request, in order. */
  requests: string[];
  /** Every `POST /interrupt`: the prompt id asked for, and the one that was running. */
  interrupts: Array<{ asked: string | undefined; running: string | undefined }>;
  /** Socket connections per client id. */
  socketsOpened: Map<string, number>;
  /** Uploaded and produced files, by `type/subfolder-and-name`. */
  files: Map<string, Buffer>;
  history: Map<string, Record<string, unknown>>;
  /** The next `times` requests to `route` misbehave. */
  misbehave(route: Route, how: Misbehaviour): void;
  /** Forgets the misbehaviours not yet used. */
  behave(): void;
  /** While paused no queued prompt starts. */
  paused: boolean;
  /** Progress steps a sampler reports (each a `progress` message). */
  steps: number;
  /** The next prompt to run stops after its first step until release(). */
  holdNext(): void;
  release(): void;
  /** The next prompt to run fails with this exception. */
  failNext(error: ExecutionError): void;
  /** No message goes over any socket (the poll backstop must carry the job). */
  silentSockets: boolean;
  /** Bytes appended to every file /view serves (an output over the size limit). */
  outputPadding: number;
  /** Deletes every produced output (a /view of them answers 404). */
  expireOutputs(): void;
  /** Closes every open socket, as a server restart or a proxy's idle time-out does. */
  dropSockets(): void;
  /** Forgets the queue, the running prompt and the history (a restarted server). */
  restart(): void;
  /** Resolves once a prompt is running (held or not), with its id. */
  running(): Promise<string>;
  queued(): { running: string[]; pending: string[] };
  close(): Promise<void>;
}

const CONTENT_TYPES: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
  mp4: 'video/mp4',
  flac: 'audio/flac',
};

export async function startFakeComfyui(options: { apiKey?: string } = {}): Promise<FakeComfyui> {
  const files = new Map<string, Buffer>();
  const history = new Map<string, Record<string, unknown>>();
  const state: FakeState = { files };
  const sockets = new Map<string, WebSocket>();
  const socketsOpened = new Map<string, number>();
  const misbehaviours = new Map<Route, Misbehaviour[]>();
  const submissions: FakeComfyui['submissions'] = [];
  const requests: string[] = [];
  const interrupts: FakeComfyui['interrupts'] = [];
  const hanging = new Set<ServerResponse>();
  let pending: QueueItem[] = [];
  let current: { item: QueueItem; interrupted: boolean } | undefined;
  let number = 0;
  let counter = 0;
  let holdNext = false;
  let releaseHold: (() => void) | undefined;
  let nextError: ExecutionError | undefined;
  let epoch = 0;
  let runningWaiters: Array<(id: string) => void> = [];
  const media = new Map<string, Promise<Buffer>>();

  const fake = {
    url: '',
    submissions,
    requests,
    interrupts,
    socketsOpened,
    files,
    history,
    paused: false,
    steps: 3,
    silentSockets: false,
    outputPadding: 0,
    misbehave(route: Route, how: Misbehaviour) {
      const list = misbehaviours.get(route) ?? [];
      for (let i = 0; i < (how.times ?? 1); i++) list.push(how);
      misbehaviours.set(route, list);
    },
    behave() {
      misbehaviours.clear();
    },
    holdNext() {
      holdNext = true;
    },
    release() {
      releaseHold?.();
      releaseHold = undefined;
    },
    failNext(error: ExecutionError) {
      nextError = error;
    },
    expireOutputs() {
      for (const key of [...files.keys()]) if (!key.startsWith('input/')) files.delete(key);
    },
    dropSockets() {
      for (const socket of sockets.values()) socket.terminate();
      sockets.clear();
    },
    restart() {
      epoch += 1;
      pending = [];
      current = undefined;
      history.clear();
      fake.release();
      fake.dropSockets();
    },
    running() {
      if (current) return Promise.resolve(current.item[1]);
      return new Promise<string>((resolve) => runningWaiters.push(resolve));
    },
    queued() {
      return { running: current ? [current.item[1]] : [], pending: pending.map((item) => item[1]) };
    },
    async close() {
      fake.release();
      for (const response of hanging) response.destroy();
      for (const socket of sockets.values()) socket.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  function send(clientId: string | undefined, type: string, data: Record<string, unknown>): void {
    if (fake.silentSockets) return;
    const targets = clientId === undefined ? [...sockets.values()] : sockets.has(clientId) ? [sockets.get(clientId)!] : [];
    for (const socket of targets) socket.send(JSON.stringify({ type, data }));
  }

  const queueInfo = () => ({ exec_info: { queue_remaining: pending.length + (current ? 1 : 0) } });

  // The prompt worker: one prompt at a time, lowest number first, as PromptQueue's heap and prompt_worker.
  function pump(): void {
    if (current || fake.paused || pending.length === 0) return;
    pending.sort((a, b) => a[0] - b[0]);
    const item = pending.shift()!;
    current = { item, interrupted: false };
    for (const waiter of runningWaiters) waiter(item[1]);
    runningWaiters = [];
    send(undefined, 'status', { status: queueInfo() });
    void execute(current, epoch);
  }

  async function execute(run: { item: QueueItem; interrupted: boolean }, startedIn: number): Promise<void> {
    const [, promptId, prompt, extra, outputsToRun] = run.item;
    const clientId = extra.client_id as string | undefined;
    const messages: Array<[string, Record<string, unknown>]> = [];
    const message = (type: string, data: Record<string, unknown>) => {
      const stamped = { ...data, timestamp: Date.now() };
      messages.push([type, stamped]);
      send(clientId, type, stamped);
    };
    const tick = () => new Promise<void>((resolve) => setImmediate(resolve));
    const gone = () => epoch !== startedIn;
    message('execution_start', { prompt_id: promptId });
    message('execution_cached', { nodes: [], prompt_id: promptId });
    const outputs: Record<string, unknown> = {};
    const meta: Record<string, unknown> = {};
    let failed: Record<string, unknown> | undefined;
    let interruptedAt: string | undefined;
    const hold = holdNext;
    holdNext = false;
    const error = nextError;
    nextError = undefined;

    for (const nodeId of order(prompt, outputsToRun)) {
      await tick();
      if (gone()) return;
      const node = prompt[nodeId]!;
      if (run.interrupted) {
        interruptedAt = nodeId;
        break;
      }
      send(clientId, 'executing', { node: nodeId, display_node: nodeId, prompt_id: promptId });
      if (node.class_type === 'KSampler') {
        for (let step = 1; step <= fake.steps; step++) {
          send(clientId, 'progress', { value: step, max: fake.steps, prompt_id: promptId, node: nodeId });
          if (step === 1 && hold)
            await new Promise<void>((resolve) => {
              releaseHold = resolve;
            });
          await tick();
          if (gone()) return;
          if (run.interrupted) break;
        }
        if (run.interrupted) {
          interruptedAt = nodeId;
          break;
        }
      }
      if (error && (error.node ?? nodeId) === nodeId && (error.node !== undefined || node.class_type === 'KSampler')) {
        failed = {
          prompt_id: promptId,
          node_id: nodeId,
          node_type: node.class_type,
          executed: [],
          exception_message: error.exception_message,
          exception_type: error.exception_type,
          traceback: ['  File "execution.py", line 1, in execute\n'],
          current_inputs: {},
          current_outputs: [],
        };
        break;
      }
      const kind = NODES[node.class_type]!.output;
      if (kind) {
        const produced = await produce(prompt, nodeId);
        if (gone()) return;
        outputs[nodeId] = { [kind]: produced, ...(node.class_type === 'SaveAnimatedWEBP' ? { animated: [true] } : {}) };
        meta[nodeId] = { node_id: nodeId, display_node: nodeId, parent_node: null, real_node_id: nodeId };
        send(clientId, 'executed', { node: nodeId, display_node: nodeId, output: outputs[nodeId], prompt_id: promptId });
      }
    }

    if (interruptedAt !== undefined) {
      const node = prompt[interruptedAt]!;
      const data = { prompt_id: promptId, node_id: interruptedAt, node_type: node.class_type, executed: [], timestamp: Date.now() };
      messages.push(['execution_interrupted', data]);
      send(undefined, 'execution_interrupted', data); // broadcast=True in handle_execution_error
    } else if (failed) {
      message('execution_error', failed);
    } else {
      message('execution_success', { prompt_id: promptId });
    }
    const success = interruptedAt === undefined && !failed;
    history.set(promptId, {
      prompt: run.item,
      outputs: success ? outputs : {},
      status: { status_str: success ? 'success' : 'error', completed: success, messages },
      meta: success ? meta : {},
    });
    current = undefined;
    send(clientId, 'executing', { node: null, prompt_id: promptId });
    send(undefined, 'status', { status: queueInfo() });
    pump();
  }

  async function produce(prompt: Prompt, nodeId: string): Promise<Array<Record<string, unknown>>> {
    const node = prompt[nodeId]!;
    const prefix = String(node.inputs.filename_prefix ?? 'ComfyUI');
    const name = (extension: string) => `${prefix}_${String(++counter).padStart(5, '0')}_.${extension}`;
    const store = (type: string, filename: string, bytes: Buffer) => {
      files.set(`${type}/${filename}`, bytes);
      return { filename, subfolder: '', type };
    };
    if (node.class_type === 'SaveImage' || node.class_type === 'PreviewImage') {
      const { width, height, batch, seed } = imageShape(prompt);
      const type = node.class_type === 'SaveImage' ? 'output' : 'temp';
      const list = [];
      for (let i = 0; i < batch; i++) list.push(store(type, name('png'), await drawPng(width, height, seed + i)));
      return list;
    }
    if (node.class_type === 'SaveAnimatedWEBP') return [store('output', name('webp'), await clip('webp'))];
    if (node.class_type === 'VHS_VideoCombine') {
      const format = String(node.inputs.format);
      const extension = format === 'video/h264-mp4' ? 'mp4' : format === 'image/webp' ? 'webp' : 'gif';
      const type = node.inputs.save_output === false ? 'temp' : 'output';
      const entry = store(type, name(extension), await clip(extension));
      return [{ ...entry, format, frame_rate: Number(node.inputs.frame_rate) }];
    }
    if (node.class_type === 'SaveAudio') return [store('output', name('flac'), await clip('flac'))];
    return [];
  }

  function imageShape(prompt: Prompt): { width: number; height: number; batch: number; seed: number } {
    const nodes = Object.values(prompt);
    const latent = nodes.find((node) => node.class_type === 'EmptyLatentImage');
    const sampler = nodes.find((node) => node.class_type === 'KSampler');
    const seed = Number(sampler?.inputs.seed ?? 0);
    if (latent) return { width: Number(latent.inputs.width), height: Number(latent.inputs.height), batch: Number(latent.inputs.batch_size), seed };
    const load = nodes.find((node) => node.class_type === 'LoadImage');
    const size = load ? imageDimensions(files.get(`input/${String(load.inputs.image)}`) ?? Buffer.alloc(0)) : undefined;
    return { width: size?.width ?? 64, height: size?.height ?? 64, batch: 1, seed };
  }

  function clip(kind: string): Promise<Buffer> {
    let made = media.get(kind);
    if (!made) {
      const video = 'testsrc2=s=64x48:r=10:d=0.5';
      made =
        kind === 'mp4'
          ? fixture(video, ['-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-movflags', 'frag_keyframe+empty_moov', '-f', 'mp4'])
          : kind === 'webp'
            ? fixture(video, ['-c:v', 'libwebp', '-loop', '0', '-f', 'webp'])
            : kind === 'gif'
              ? fixture(video, ['-f', 'gif'])
              : fixture('sine=f=440:d=0.5', ['-c:a', 'flac', '-f', 'flac']);
      media.set(kind, made);
    }
    return made;
  }

  // ---- validation, as execution.validate_prompt ----

  function validatePrompt(
    prompt: unknown,
  ): { ok: true; outputs: string[]; nodeErrors: Record<string, unknown> } | { ok: false; error: Record<string, unknown>; nodeErrors: Record<string, unknown> } {
    const invalid = (message: string, details: string) => ({
      ok: false as const,
      error: { type: 'invalid_prompt', message, details, extra_info: {} },
      nodeErrors: {},
    });
    if (typeof prompt !== 'object' || prompt === null || Array.isArray(prompt)) return invalid('Cannot execute because the prompt is not an object.', '');
    const nodes = prompt as Record<string, { class_type?: unknown; inputs?: unknown }>;
    const outputs: string[] = [];
    for (const [id, node] of Object.entries(nodes)) {
      if (typeof node !== 'object' || node === null || !('class_type' in node))
        return invalid('Cannot execute because a node is missing the class_type property.', `Node ID '#${id}'`);
      const known = NODES[String(node.class_type)];
      if (!known) return invalid(`Cannot execute because node ${String(node.class_type)} does not exist.`, `Node ID '#${id}'`);
      if (known.output) outputs.push(id);
    }
    if (outputs.length === 0)
      return { ok: false, error: { type: 'prompt_no_outputs', message: 'Prompt has no outputs', details: '', extra_info: {} }, nodeErrors: {} };
    const validated = new Map<string, Array<Record<string, unknown>> | null>();
    const validate = (id: string): boolean => {
      if (validated.has(id)) return validated.get(id) === null;
      const node = nodes[id] as { class_type: string; inputs?: Record<string, unknown> };
      const spec = NODES[node.class_type]!;
      const inputs = typeof node.inputs === 'object' && node.inputs !== null ? node.inputs : {};
      const errors: Array<Record<string, unknown>> = [];
      let valid = true;
      validated.set(id, []);
      for (const [name, input] of Object.entries(spec.inputs)) {
        if (!(name in inputs)) {
          if (!input.optional)
            errors.push({ type: 'required_input_missing', message: 'Required input is missing', details: name, extra_info: { input_name: name } });
          continue;
        }
        const value = inputs[name];
        if (Array.isArray(value)) {
          if (value.length !== 2) {
            errors.push({
              type: 'bad_linked_input',
              message: 'Bad linked input, must be a length-2 list of [node_id, slot_index]',
              details: name,
              extra_info: { input_name: name },
            });
            continue;
          }
          const from = nodes[String(value[0])] as { class_type: string } | undefined;
          const received = from ? NODES[from.class_type]?.returns[Number(value[1])] : undefined;
          if (received !== input.type) {
            errors.push({
              type: 'return_type_mismatch',
              message: 'Return type mismatch between linked nodes',
              details: `${name}, received_type(${String(received)}) mismatch input_type(${String(input.type)})`,
              extra_info: { input_name: name },
            });
            continue;
          }
          if (!validate(String(value[0]))) valid = false;
          continue;
        }
        const problem = checkValue(name, value, input);
        if (problem) errors.push(problem);
      }
      if (errors.length === 0 && spec.validate) {
        const verdict = spec.validate(inputs, state);
        if (verdict !== true)
          errors.push({
            type: 'custom_validation_failed',
            message: 'Custom validation failed for node',
            details: `image - ${verdict}`,
            extra_info: { input_name: 'image' },
          });
      }
      validated.set(id, errors.length === 0 && valid ? null : errors);
      return errors.length === 0 && valid;
    };
    const good: string[] = [];
    const nodeErrors: Record<string, { errors: unknown[]; dependent_outputs: string[]; class_type: string }> = {};
    const reasons: string[] = [];
    for (const output of outputs) {
      if (validate(output)) {
        good.push(output);
        continue;
      }
      for (const [id, errors] of validated) {
        if (!errors || errors.length === 0) continue;
        nodeErrors[id] ??= { errors, dependent_outputs: [], class_type: String(nodes[id]!.class_type) };
        nodeErrors[id].dependent_outputs.push(output);
        for (const error of errors) reasons.push(`${String(error.message)}: ${String(error.details)}`);
      }
    }
    if (good.length === 0) {
      return {
        ok: false,
        error: {
          type: 'prompt_outputs_failed_validation',
          message: 'Prompt outputs failed validation',
          details: [...new Set(reasons)].join('\n'),
          extra_info: {},
        },
        nodeErrors,
      };
    }
    return { ok: true, outputs: good, nodeErrors };
  }

  function checkValue(name: string, value: unknown, input: InputSpec): Record<string, unknown> | undefined {
    const extra = { input_name: name, received_value: value };
    let converted = value;
    if (input.type === 'INT' || input.type === 'FLOAT') {
      // Python's int()/float() on a JSON value: numbers and numeric strings convert, anything else fails.
      const text = typeof value === 'string' ? value.trim() : undefined;
      const ok =
        typeof value === 'number' ||
        typeof value === 'boolean' ||
        (text !== undefined && (input.type === 'INT' ? /^[-+]?\d+$/.test(text) : /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(text)));
      if (!ok)
        return {
          type: 'invalid_input_type',
          message: `Failed to convert an input value to a ${input.type} value`,
          details: `${name}, ${String(value)}, invalid literal`,
          extra_info: extra,
        };
      converted = input.type === 'INT' ? Math.trunc(Number(value)) : Number(value);
    }
    if (typeof converted === 'number') {
      if (input.min !== undefined && converted < input.min)
        return { type: 'value_smaller_than_min', message: `Value ${converted} smaller than min of ${input.min}`, details: name, extra_info: extra };
      if (input.max !== undefined && converted > input.max)
        return { type: 'value_bigger_than_max', message: `Value ${converted} bigger than max of ${input.max}`, details: name, extra_info: extra };
    }
    const options = input.type === 'COMBO_INPUT_FILES' ? undefined : Array.isArray(input.type) ? input.type : undefined;
    if (options && !options.includes(String(value))) {
      return {
        type: 'value_not_in_list',
        message: 'Value not in list',
        details: `${name}: '${String(value)}' not in ${JSON.stringify(options)}`,
        extra_info: extra,
      };
    }
    if (['MODEL', 'CLIP', 'VAE', 'CONDITIONING', 'LATENT', 'IMAGE', 'AUDIO'].includes(String(input.type))) {
      return { type: 'bad_linked_input', message: 'Bad linked input, must be a length-2 list of [node_id, slot_index]', details: name, extra_info: extra };
    }
    return undefined;
  }

  // ---- HTTP ----

  function text(response: ServerResponse, status: number, body = '', type = 'text/plain; charset=utf-8'): void {
    response.writeHead(status, { 'content-type': type });
    response.end(body);
  }
  function json(response: ServerResponse, status: number, body: unknown): void {
    text(response, status, JSON.stringify(body), 'application/json; charset=utf-8');
  }
  async function readBody(request: IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }
  // aiohttp's request.json(): the body parsed whatever its content type; unparsable is a 500.
  function parseJson(body: Buffer): unknown {
    return JSON.parse(body.toString('utf8'));
  }
  const serverError = (response: ServerResponse) => text(response, 500, '500 Internal Server Error\n\nServer got itself in trouble');

  const authorized = (headers: IncomingMessage['headers']) => !options.apiKey || headers.authorization === `Bearer ${options.apiKey}`;

  const routes: Record<string, (request: IncomingMessage, response: ServerResponse, url: URL) => Promise<void> | void> = {
    'POST /prompt': async (request, response) => {
      let body: Record<string, unknown>;
      try {
        body = parseJson(await readBody(request)) as Record<string, unknown>;
      } catch {
        serverError(response);
        return;
      }
      if (typeof body !== 'object' || body === null || !('prompt' in body)) {
        json(response, 400, { error: { type: 'no_prompt', message: 'No prompt provided', details: 'No prompt provided', extra_info: {} }, node_errors: {} });
        return;
      }
      const promptId = 'prompt_id' in body ? String(body.prompt_id) : randomUUID();
      const verdict = validatePrompt(body.prompt);
      if (!verdict.ok) {
        json(response, 400, { error: verdict.error, node_errors: verdict.nodeErrors });
        return;
      }
      const extra: Record<string, unknown> = typeof body.extra_data === 'object' && body.extra_data !== null ? { ...(body.extra_data as object) } : {};
      if ('client_id' in body) extra.client_id = body.client_id;
      const taken = number++;
      const prompt = structuredClone(body.prompt) as Prompt;
      pending.push([taken, promptId, prompt, extra, verdict.outputs]);
      submissions.push({ promptId, clientId: extra.client_id as string | undefined, prompt });
      json(response, 200, { prompt_id: promptId, number: taken, node_errors: verdict.nodeErrors });
      send(undefined, 'status', { status: queueInfo() });
      queueMicrotask(pump);
    },
    'GET /history': (_request, response, url) => {
      const id = decodeURIComponent(url.pathname.slice('/history/'.length));
      const entry = history.get(id);
      json(response, 200, entry ? { [id]: entry } : {});
    },
    'GET /queue': (_request, response) => {
      json(response, 200, { queue_running: current ? [current.item] : [], queue_pending: pending });
    },
    'POST /queue': async (request, response) => {
      let body: Record<string, unknown>;
      try {
        body = parseJson(await readBody(request)) as Record<string, unknown>;
      } catch {
        serverError(response);
        return;
      }
      if (body.clear) pending = [];
      if (Array.isArray(body.delete)) {
        const ids = new Set(body.delete.map(String));
        pending = pending.filter((item) => !ids.has(item[1]));
      }
      text(response, 200, '');
    },
    'POST /interrupt': async (request, response) => {
      let body: Record<string, unknown> = {};
      try {
        body = parseJson(await readBody(request)) as Record<string, unknown>;
      } catch {
        body = {};
      }
      const asked = typeof body.prompt_id === 'string' ? body.prompt_id : undefined;
      const running = current?.item[1];
      interrupts.push({ asked, running });
      if (current && (asked === undefined || asked === running)) {
        current.interrupted = true;
        fake.release();
      }
      text(response, 200, '');
    },
    'POST /upload/image': async (request, response, url) => {
      const type = request.headers['content-type'] ?? '';
      if (!type.startsWith('multipart/form-data')) {
        text(response, 400, '');
        return;
      }
      let form: FormData;
      try {
        form = await new Request(url, { method: 'POST', headers: { 'content-type': type }, body: await readBody(request) }).formData();
      } catch {
        text(response, 400, '');
        return;
      }
      const image = form.get('image');
      if (!(image instanceof Blob) || !('name' in image) || !image.name) {
        text(response, 400, '');
        return;
      }
      const uploadType = String(form.get('type') ?? 'input');
      if (!['input', 'temp', 'output'].includes(uploadType)) {
        text(response, 400, '');
        return;
      }
      const subfolder = String(form.get('subfolder') ?? '');
      let filename = (image as File).name;
      if (filename.includes('/') || filename.includes('..') || subfolder.includes('..')) {
        text(response, 400, '');
        return;
      }
      const bytes = Buffer.from(await image.arrayBuffer());
      const overwrite = form.get('overwrite');
      const key = (name: string) => `${uploadType}/${subfolder ? `${subfolder}/` : ''}${name}`;
      if (overwrite !== 'true' && overwrite !== '1') {
        const dot = filename.lastIndexOf('.');
        const [stem, extension] = dot > 0 ? [filename.slice(0, dot), filename.slice(dot)] : [filename, ''];
        for (let i = 1; files.has(key(filename)); i++) {
          if (
            createHash('sha256')
              .update(files.get(key(filename))!)
              .digest('hex') === createHash('sha256').update(bytes).digest('hex')
          )
            break;
          filename = `${stem} (${i})${extension}`;
        }
      }
      files.set(key(filename), bytes);
      json(response, 200, { name: filename, subfolder, type: uploadType });
    },
    'GET /view': (_request, response, url) => {
      const filename = url.searchParams.get('filename');
      if (filename === null) {
        text(response, 404, '404: Not Found');
        return;
      }
      if (filename.startsWith('/') || filename.includes('..')) {
        text(response, 400, '');
        return;
      }
      const type = url.searchParams.get('type') ?? 'output';
      if (!['input', 'temp', 'output'].includes(type)) {
        text(response, 400, '');
        return;
      }
      const subfolder = url.searchParams.get('subfolder') ?? '';
      if (subfolder.includes('..')) {
        text(response, 403, '');
        return;
      }
      const bytes = files.get(`${type}/${subfolder ? `${subfolder}/` : ''}${filename}`);
      if (!bytes) {
        text(response, 404, '404: Not Found');
        return;
      }
      const extension = filename.split('.').pop() ?? '';
      response.writeHead(200, { 'content-type': CONTENT_TYPES[extension] ?? 'application/octet-stream', 'content-disposition': `filename="${filename}"` });
      response.end(fake.outputPadding > 0 ? Buffer.concat([bytes, Buffer.alloc(fake.outputPadding)]) : bytes);
    },
  };

  function routeOf(method: string, path: string): { key: Route; known: boolean } | undefined {
    const template = path.startsWith('/history/') && path.length > '/history/'.length ? '/history' : path;
    const known = ['/prompt', '/history', '/queue', '/interrupt', '/upload/image', '/view'].includes(template);
    if (!known) return undefined;
    return { key: `${method} ${template}` as Route, known };
  }

  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    requests.push(`${request.method} ${url.pathname}`);
    if (!authorized(request.headers)) {
      text(response, 401, '401: Unauthorized');
      return;
    }
    const route = routeOf(request.method ?? 'GET', url.pathname);
    if (!route) {
      text(response, 404, '404: Not Found');
      return;
    }
    const handler = routes[route.key];
    if (!handler) {
      text(response, 405, '405: Method Not Allowed');
      return;
    }
    const misbehaviour = misbehaviours.get(route.key)?.shift();
    if (misbehaviour) {
      request.resume();
      if (misbehaviour.hang) {
        hanging.add(response);
        return;
      }
      if (misbehaviour.malformed) {
        text(response, 200, '{"prompt_id": "', 'application/json; charset=utf-8');
        return;
      }
      response.writeHead(misbehaviour.status ?? 500, { 'content-type': 'text/plain; charset=utf-8', ...misbehaviour.headers });
      response.end(misbehaviour.body ?? '');
      return;
    }
    Promise.resolve(handler(request, response, url)).catch(() => serverError(response));
  });

  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (request, socket: Socket, head) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    if (url.pathname !== '/ws') {
      socket.end('HTTP/1.1 404 Not Found\r\n\r\n');
      return;
    }
    if (!authorized(request.headers)) {
      socket.end('HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => {
      const sid = url.searchParams.get('clientId') || randomUUID().replace(/-/g, '');
      socketsOpened.set(sid, (socketsOpened.get(sid) ?? 0) + 1);
      sockets.set(sid, ws); // a client id reconnecting replaces its old socket, as server.py does
      ws.on('close', () => {
        if (sockets.get(sid) === ws) sockets.delete(sid);
      });
      ws.on('error', () => undefined);
      if (!fake.silentSockets) ws.send(JSON.stringify({ type: 'status', data: { status: queueInfo(), sid } }));
    });
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let paused = false;
  Object.defineProperty(fake, 'paused', {
    get: () => paused,
    set: (value: boolean) => {
      paused = value;
      if (!value) queueMicrotask(pump);
    },
  });
  return fake as FakeComfyui;
}

/** The nodes the outputs need, each after the nodes it takes a link from (ExecutionList's order, simplified). */
function order(prompt: Prompt, outputs: string[]): string[] {
  const seen = new Set<string>();
  const list: string[] = [];
  const visit = (id: string) => {
    if (seen.has(id)) return;
    seen.add(id);
    for (const value of Object.values(prompt[id]!.inputs)) if (Array.isArray(value)) visit(String(value[0]));
    list.push(id);
  };
  for (const id of outputs) visit(id);
  return list;
}

async function drawPng(width: number, height: number, seed: number): Promise<Buffer> {
  const rgb = Buffer.alloc(width * height * 3);
  for (let i = 0; i < rgb.length; i++) rgb[i] = (i * 31 + seed * 17) & 0xff;
  return encodePng(width, height, rgb);
}

// ---- what the adapter's tests share: workflows in API format, a context, a job, an update log ----

const base = (extra: Prompt): Prompt => ({
  '4': { class_type: 'CheckpointLoaderSimple', inputs: { ckpt_name: 'v1-5-pruned-emaonly.safetensors' } },
  '6': { class_type: 'CLIPTextEncode', inputs: { text: '{{prompt}}', clip: ['4', 1] } },
  '7': { class_type: 'CLIPTextEncode', inputs: { text: 'blurry, {{negativePrompt}}', clip: ['4', 1] } },
  ...extra,
});

/** The workflows of ComfyUI's examples (default graph, img2img, a VHS video, stable audio), with placeholders. */
export const WORKFLOWS = {
  textToImage: base({
    '5': { class_type: 'EmptyLatentImage', inputs: { width: '{{width}}', height: '{{height}}', batch_size: '{{numImages}}' } },
    '3': {
      class_type: 'KSampler',
      inputs: {
        seed: '{{seed}}',
        steps: '{{steps}}',
        cfg: 8,
        sampler_name: 'euler',
        scheduler: 'normal',
        denoise: 1,
        model: ['4', 0],
        positive: ['6', 0],
        negative: ['7', 0],
        latent_image: ['5', 0],
      },
    },
    '8': { class_type: 'VAEDecode', inputs: { samples: ['3', 0], vae: ['4', 2] } },
    '9': { class_type: 'SaveImage', inputs: { filename_prefix: 'ComfyUI', images: ['8', 0] } },
    '10': { class_type: 'PreviewImage', inputs: { images: ['8', 0] } },
  }),
  imageToImage: base({
    '10': { class_type: 'LoadImage', inputs: { image: '{{image}}' } },
    '11': { class_type: 'VAEEncode', inputs: { pixels: ['10', 0], vae: ['4', 2] } },
    '3': {
      class_type: 'KSampler',
      inputs: {
        seed: '{{seed}}',
        steps: 20,
        cfg: 8,
        sampler_name: 'euler',
        scheduler: 'normal',
        denoise: '{{strength}}',
        model: ['4', 0],
        positive: ['6', 0],
        negative: ['7', 0],
        latent_image: ['11', 0],
      },
    },
    '8': { class_type: 'VAEDecode', inputs: { samples: ['3', 0], vae: ['4', 2] } },
    '9': { class_type: 'SaveImage', inputs: { filename_prefix: 'img2img', images: ['8', 0] } },
  }),
  textToVideo: base({
    '5': { class_type: 'EmptyLatentImage', inputs: { width: 64, height: 48, batch_size: 5 } },
    '3': {
      class_type: 'KSampler',
      inputs: {
        seed: '{{seed}}',
        steps: 20,
        cfg: 8,
        sampler_name: 'euler',
        scheduler: 'normal',
        denoise: 1,
        model: ['4', 0],
        positive: ['6', 0],
        negative: ['7', 0],
        latent_image: ['5', 0],
      },
    },
    '8': { class_type: 'VAEDecode', inputs: { samples: ['3', 0], vae: ['4', 2] } },
    '12': { class_type: 'SaveImage', inputs: { filename_prefix: 'frames', images: ['8', 0] } },
    '20': {
      class_type: 'VHS_VideoCombine',
      inputs: { images: ['8', 0], frame_rate: 8, loop_count: 0, filename_prefix: 'AnimateDiff', format: 'video/h264-mp4', pingpong: false, save_output: true },
    },
  }),
  textToAudio: base({
    '11': { class_type: 'EmptyLatentAudio', inputs: { seconds: '{{durationSeconds}}', batch_size: 1 } },
    '3': {
      class_type: 'KSampler',
      inputs: {
        seed: '{{seed}}',
        steps: 20,
        cfg: 5,
        sampler_name: 'euler',
        scheduler: 'simple',
        denoise: 1,
        model: ['4', 0],
        positive: ['6', 0],
        negative: ['7', 0],
        latent_image: ['11', 0],
      },
    },
    '12': { class_type: 'VAEDecodeAudio', inputs: { samples: ['3', 0], vae: ['4', 2] } },
    '19': { class_type: 'SaveAudio', inputs: { filename_prefix: 'audio/ComfyUI', audio: ['12', 0] } },
  }),
};

export function comfyContext(overrides: Partial<AdapterContext> = {}): AdapterContext {
  return {
    fetchOutput: guardedFetcher({ allowAddress: (address) => address === '127.0.0.1', maxBytes: 1 << 20, timeoutMs: 2_000 }),
    maxResponseBytes: 1 << 20,
    maxOutputBytes: 1 << 20,
    pollIntervalMs: 25,
    // A bound against hanging only: on a loaded machine an answer of the fake can take more than a second.
    // Tests of a hanging server give a short one (comfyui-failures.test.ts).
    requestTimeoutMs: 10_000,
    now: () => Date.now(),
    ...overrides,
  };
}

let jobs = 0;
export function comfyJob(overrides: Partial<AdapterJob> = {}): AdapterJob {
  jobs += 1;
  return {
    generationId: `gen_${jobs}_${randomUUID().slice(0, 8)}`,
    mode: 'text_to_image',
    modelId: 'comfyui/sd15',
    params: { prompt: 'a lighthouse at dawn', negativePrompt: 'fog', seed: 42, numImages: 1 },
    input: { width: 64, height: 48 },
    inputs: { images: [], videos: [] },
    deadline: Date.now() + 10_000,
    ...overrides,
  };
}

/** Every update an adapter reported for one job, and its end. */
export interface UpdateLog {
  updates: AdapterUpdate[];
  report: Report;
  /** The first terminal update. */
  end: Promise<Extract<AdapterUpdate, { type: 'succeeded' | 'failed' }>>;
  /** Resolves at the first update that passes `test`. */
  waitFor(test: (update: AdapterUpdate) => boolean): Promise<AdapterUpdate>;
}

export function updateLog(): UpdateLog {
  const updates: AdapterUpdate[] = [];
  const waiters: Array<{ test: (update: AdapterUpdate) => boolean; resolve: (update: AdapterUpdate) => void }> = [];
  const log: UpdateLog = {
    updates,
    report: (update) => {
      updates.push(update);
      for (const waiter of [...waiters]) {
        if (waiter.test(update)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(update);
        }
      }
    },
    end: undefined as never,
    waitFor(test) {
      const seen = updates.find(test);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve) => waiters.push({ test, resolve }));
    },
  };
  log.end = log.waitFor((update) => update.type === 'succeeded' || update.type === 'failed') as UpdateLog['end'];
  return log;
}
