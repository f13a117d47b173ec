import { createHash } from 'node:crypto';
import { readFileSync, statSync, watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import { LineCounter, parseDocument, isNode, type Document } from 'yaml';
import { buildCatalog, ModelCatalog, type BuildOptions, type CatalogProblem } from '../domain/catalog/index.ts';

/** A catalog file larger than this is refused (it is a few kilobytes; thousands of models fit in a few MiB). */
export const MAX_CATALOG_BYTES = 8 * 1024 * 1024;

export type CatalogRead = { ok: true; catalog: ModelCatalog } | { ok: false; problems: string[] };

/**
 * Parses a catalog file's text (JSON when its name ends in .json, YAML otherwise) and builds it. Each
 * problem reads `path (line N): reason`, the line where the YAML says it.
 */
export function parseCatalog(text: string, fileName: string, options: BuildOptions & { env?: Readonly<Record<string, string | undefined>> }): CatalogRead {
  let document: unknown;
  let yaml: Document | undefined;
  const lines = new LineCounter();
  if (fileName.endsWith('.json')) {
    try {
      document = JSON.parse(text);
    } catch (error) {
      return { ok: false, problems: [`${fileName}: not valid JSON: ${(error as Error).message}`] };
    }
  } else {
    yaml = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: true });
    if (yaml.errors.length > 0) return { ok: false, problems: yaml.errors.map((e) => `${fileName}: not valid YAML: ${e.message.split('\n')[0]}`) };
    document = yaml.toJS({ maxAliasCount: 100 });
  }
  const unset: string[] = [];
  document = interpolate(document, options.env ?? {}, unset);
  if (unset.length > 0)
    return {
      ok: false,
      problems: [...new Set(unset)].map((name) => `${fileName}: names \${${name}}, which is not set (give it a default: \${${name}:-value})`),
    };
  document = resolveTargetFiles(document, path.dirname(path.resolve(fileName)));
  const built = buildCatalog(document, options);
  if (!built.ok) return { ok: false, problems: built.problems.map((p) => describe(p, yaml, lines)) };
  return { ok: true, catalog: new ModelCatalog(built.catalog) };
}

/**
 * `${NAME}` and `${NAME:-default}` in the file's strings become the environment's value (or the default), so
 * values that differ between installations (an upstream model's name) need not be edited into the file. A
 * string that is only the reference keeps the value's text; the version is of the result.
 */
function interpolate(value: unknown, env: Readonly<Record<string, string | undefined>>, unset: string[]): unknown {
  if (typeof value === 'string') {
    return value.replace(/\$\{([A-Z_][A-Z0-9_]*)(?::-([^}]*))?\}/g, (_all, name: string, fallback: string | undefined) => {
      const given = env[name];
      if (given !== undefined && given !== '') return given;
      if (fallback !== undefined) return fallback;
      unset.push(name);
      return '';
    });
  }
  if (Array.isArray(value)) return value.map((item) => interpolate(item, env, unset));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolate(v, env, unset)]));
  return value;
}

/**
 * A deployment target's fields that name a file (their names end in `File`: ComfyUI's `workflowFile`) are read
 * relative to the catalog file's folder when they are relative, not to the service's working directory, so a
 * catalog and the files beside it move together (a ConfigMap mounted with both keys).
 */
function resolveTargetFiles(document: unknown, dir: string): unknown {
  const models = (document as { models?: unknown } | null)?.models;
  if (!Array.isArray(models)) return document;
  const resolvedModels = models.map((model) => {
    const deployments = (model as { deployments?: unknown } | null)?.deployments;
    if (!Array.isArray(deployments)) return model;
    return {
      ...(model as object),
      deployments: deployments.map((deployment) => {
        const target = (deployment as { target?: unknown } | null)?.target;
        if (!target || typeof target !== 'object' || Array.isArray(target)) return deployment;
        const resolved = Object.fromEntries(
          Object.entries(target).map(([key, value]) => [
            key,
            key.endsWith('File') && typeof value === 'string' && value !== '' && !path.isAbsolute(value) ? path.resolve(dir, value) : value,
          ]),
        );
        return { ...(deployment as object), target: resolved };
      }),
    };
  });
  return { ...(document as object), models: resolvedModels };
}

function describe(problem: CatalogProblem, yaml: Document | undefined, lines: LineCounter): string {
  const where = problem.path.length === 0 ? '(top)' : problem.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i === 0 ? '' : '.'}${p}`)).join('');
  let line = '';
  if (yaml) {
    // The deepest node the path reaches (a missing field points at its parent).
    for (let n = problem.path.length; n >= 0; n--) {
      const node = yaml.getIn(problem.path.slice(0, n), true);
      if (isNode(node) && node.range) {
        line = ` (line ${lines.linePos(node.range[0]).line})`;
        break;
      }
    }
  }
  return `${where}${line}: ${problem.message}`;
}

/** Reads and builds a catalog file at start-up (synchronously: nothing runs before it). */
export function readCatalogFileSync(file: string, options: Parameters<typeof parseCatalog>[2]): CatalogRead {
  let bytes: Buffer;
  try {
    if (statSync(file).size > MAX_CATALOG_BYTES) return { ok: false, problems: [`${file}: larger than ${MAX_CATALOG_BYTES} bytes`] };
    bytes = readFileSync(file);
  } catch (error) {
    return { ok: false, problems: [`${file}: cannot be read: ${(error as Error).message}`] };
  }
  return parseCatalog(bytes.toString('utf8'), file, options);
}

export interface CatalogSourceOptions {
  file: string;
  build: Parameters<typeof parseCatalog>[2];
  /** How often the file's size and time are looked at, besides the file-system events that may be missed (ConfigMap swaps, network mounts). */
  pollMs: number;
  /** Told of each reload's outcome, once per reload (metrics count it, the log says it). */
  onOutcome?(outcome: ReloadOutcome): void;
  /** Told of each new catalog served, before onOutcome. */
  onChanged?(catalog: ModelCatalog): void;
}

/**
 * What one reload did: `applied` a new version; `unchanged` when the file holds the catalog served, or is the
 * very file refused last time (then `problems` repeats why, and nothing is counted as a new refusal);
 * `refused` a file not read before that cannot be served.
 */
export type ReloadOutcome =
  | { outcome: 'applied'; version: string }
  | { outcome: 'unchanged'; version: string; problems?: string[] }
  | { outcome: 'refused'; problems: string[] };

/**
 * The catalog a node serves, and its reloads: on SIGHUP (app/main.ts calls reload), when the file changes
 * (a watch on its folder, which also sees a file replaced by rename), and at a slow poll as a backstop. A
 * valid file replaces the catalog at once for new requests; an invalid one is refused and the old one stays.
 */
export class CatalogSource {
  private served: ModelCatalog;
  private watcher: FSWatcher | undefined;
  private poll: NodeJS.Timeout | undefined;
  private lastSeen = '';
  private reloading: Promise<ReloadOutcome> | undefined;
  private again = false;
  /** What the last reload read (a hash of the file's bytes, or why it could not be read) and the problems it was refused for. */
  private lastRead: { key: string; problems: string[] | undefined } | undefined;

  constructor(
    initial: ModelCatalog,
    private readonly options: CatalogSourceOptions,
  ) {
    this.served = initial;
  }

  get current(): ModelCatalog {
    return this.served;
  }

  /** Starts following the file. */
  start(): void {
    const { file, pollMs } = this.options;
    this.lastSeen = this.fingerprint();
    try {
      this.watcher = watch(path.dirname(path.resolve(file)), { persistent: false }, (_event, name) => {
        if (!name || name === path.basename(file) || name.startsWith('..')) void this.reloadIfChanged();
      });
      this.watcher.on('error', () => undefined);
    } catch {
      // No watch on this file system: the poll alone follows the file.
    }
    this.poll = setInterval(() => void this.reloadIfChanged(), pollMs);
    this.poll.unref();
  }

  stop(): void {
    this.watcher?.close();
    if (this.poll) clearInterval(this.poll);
  }

  /** Reads the file again now; reloads asked for while one runs are folded into one more after it. */
  reload(): Promise<ReloadOutcome> {
    if (this.reloading) {
      this.again = true;
      return this.reloading;
    }
    this.reloading = this.readNow().finally(() => {
      this.reloading = undefined;
      if (this.again) {
        this.again = false;
        void this.reload();
      }
    });
    return this.reloading;
  }

  private async reloadIfChanged(): Promise<void> {
    if (this.fingerprint() === this.lastSeen) return;
    await this.reload();
  }

  /**
   * Size, time and inode of the file: cheap to read at every poll. Read synchronously, as the file is: on a
   * busy node each asynchronous step waits for a turn of the event loop and the thread pool, which put a
   * reload under load up to a second behind the file change; a stat and a read of a few kilobytes block for
   * microseconds (parsing the file, synchronous anyway, costs far more).
   */
  private fingerprint(): string {
    try {
      const s = statSync(this.options.file);
      return `${s.size}:${s.mtimeMs}:${s.ino}`;
    } catch {
      return 'missing';
    }
  }

  private async readNow(): Promise<ReloadOutcome> {
    const outcome = this.readOnce();
    this.options.onOutcome?.(outcome);
    return outcome;
  }

  private readOnce(): ReloadOutcome {
    const { file, build } = this.options;
    const seen = this.fingerprint();
    this.lastSeen = seen;
    let text: string;
    try {
      // Its size first: a file far too large is refused without being read into memory.
      if (statSync(file).size > MAX_CATALOG_BYTES) return this.refuse(`size:${seen}`, [`${file}: larger than ${MAX_CATALOG_BYTES} bytes`]);
      const bytes = readFileSync(file);
      if (bytes.length > MAX_CATALOG_BYTES) return this.refuse(`size:${seen}`, [`${file}: larger than ${MAX_CATALOG_BYTES} bytes`]);
      text = bytes.toString('utf8');
    } catch (error) {
      const message = `${file}: cannot be read: ${(error as Error).message}`;
      return this.refuse(`error:${message}`, [message]);
    }
    const key = createHash('sha256').update(text).digest('hex');
    // The file read last time (a SIGHUP after the file event that already took it): its outcome stands, counted once.
    if (this.lastRead?.key === key) {
      return this.lastRead.problems
        ? { outcome: 'unchanged', version: this.served.version, problems: this.lastRead.problems }
        : { outcome: 'unchanged', version: this.served.version };
    }
    const read = parseCatalog(text, file, build);
    if (!read.ok) return this.refuse(key, read.problems);
    this.lastRead = { key, problems: undefined };
    if (read.catalog.version === this.served.version) return { outcome: 'unchanged', version: this.served.version };
    this.served = read.catalog;
    this.options.onChanged?.(read.catalog);
    return { outcome: 'applied', version: read.catalog.version };
  }

  private refuse(key: string, problems: string[]): ReloadOutcome {
    if (this.lastRead?.key === key) return { outcome: 'unchanged', version: this.served.version, problems };
    this.lastRead = { key, problems };
    return { outcome: 'refused', problems };
  }
}
