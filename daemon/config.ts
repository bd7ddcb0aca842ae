// $ALBEDO_HOME/extensions.json and models.json: parsed with zod, loaded at start and hot-watched.
// A bad file keeps its last good content and is reported once; using the config (selection,
// windows, summarizer) is left to the kernels, strategies and the summarizer module.
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import { AlbedoError } from '../protocol/errors.ts';
import { loadCatalog, ModelsFile, type Catalog } from '../strategies/catalog/models.ts';
import { SummarizerConfig } from '../strategies/summarizer/types.ts';
import { resolve, validateSelection } from '../strategies/extensions/selection.ts';
import { BUILTIN_SET, type ExtensionSections, type ExtensionSet } from '../strategies/index.ts';

/** The proxy's port when neither ALBEDO_PROXY_PORT nor extensions.json names one. */
export const DEFAULT_PROXY_PORT = 7788;

const SelectionSection = z.strictObject({
  enable: z.array(z.string().min(1)).default([]),
  disable: z.array(z.string().min(1)).default([]),
});

/** The provider-compatible proxy (daemon/proxy/): where it listens and where it forwards. */
export const ProxySection = z.strictObject({
  /** Port on 127.0.0.1; 0 picks a free one, `off` serves no proxy. Read at start only. */
  port: z.union([z.number().int().min(0).max(65535), z.literal('off')]).default(DEFAULT_PROXY_PORT),
  /** Where Anthropic Messages requests go: the provider, or any gateway with the same wire. */
  anthropicUpstream: z.url().default('https://api.anthropic.com'),
  /**
   * Where OpenAI Responses and Chat Completions requests go, up to the path the agent adds
   * (`/responses`, `/chat/completions`): the platform API, ChatGPT's Codex backend
   * (`https://chatgpt.com/backend-api/codex`), or any compatible server.
   */
  openaiUpstream: z.url().default('https://api.openai.com/v1'),
  /**
   * The memory tools the proxy adds to the agent's tools and runs itself: `on` (all the
   * session's enabled ones), `off`, or a list of tool names. Read with every request.
   */
  memoryTools: z.union([z.enum(['on', 'off']), z.array(z.string().min(1).max(200)).max(100)]).default('on'),
});

/**
 * The whole of extensions.json. Unknown keys are errors at the top level and in every section
 * (typos should not pass silently); snapcompact's old `enabled` key is the one tolerated leftover.
 * Missing sections parse to their defaults; `summarizer` uses the summarizer module's schema.
 * Extension names are checked against the registry separately.
 */
function extensionsFileOf<S extends Record<string, z.ZodType>>(sections: S) {
  return z.strictObject({
    extensions: SelectionSection.prefault({}),
    ...(sections as unknown as { [K in keyof S]: z.ZodPrefault<S[K]> }),
    summarizer: SummarizerConfig.optional(),
    proxy: ProxySection.prefault({}),
  });
}

/** One section per extension of the set, each defaulted when absent. */
function sectionsOf(set: ExtensionSet): Record<string, z.ZodType> {
  return Object.fromEntries(Object.entries(set.settings as Readonly<Record<string, z.ZodType>>).map(([name, schema]) => [name, schema.prefault({})]));
}

/** extensions.json for the shipped extensions, its sections typed by name. */
export const ExtensionsFile = extensionsFileOf(sectionsOf(BUILTIN_SET) as ExtensionSections);

const schemas = new WeakMap<ExtensionSet, z.ZodType<ExtensionsFileParsed>>([[BUILTIN_SET, ExtensionsFile]]);

/**
 * extensions.json for a daemon's extension set: the shipped sections (typed), plus one for each
 * extension its starter added (read by name).
 */
export function extensionsFileFor(set: ExtensionSet): z.ZodType<ExtensionsFileParsed> {
  let schema = schemas.get(set);
  if (schema === undefined) schemas.set(set, schema = extensionsFileOf(sectionsOf(set)) as unknown as z.ZodType<ExtensionsFileParsed>);
  return schema;
}
export type ExtensionsFileParsed = z.output<typeof ExtensionsFile>;

export type ParseOutcome<T> = { ok: true; value: T } | { ok: false; message: string; issues?: z.core.$ZodIssue[] };

function oneLine(err: z.ZodError): string {
  return z.prettifyError(err).replaceAll('\n', ' ').replace(/\s+/g, ' ').trim();
}

/**
 * Parses extensions.json text: JSON, then the schema, then the selection checks against the
 * registry (unknown or unavailable names, two strategies, a name both enabled and disabled,
 * disabling the only strategy). Empty text stands for an empty object.
 */
export function parseExtensionsText(text: string, set: ExtensionSet): ParseOutcome<ExtensionsFileParsed> {
  const json = parseJson(text);
  if (!json.ok) return json;
  const parsed = extensionsFileFor(set).safeParse(json.value);
  if (!parsed.success) return { ok: false, message: oneLine(parsed.error), issues: parsed.error.issues };
  try {
    validateSelection(set.registry, resolve(set.registry, [], []), parsed.data.extensions);
  } catch (err) {
    if (err instanceof AlbedoError) return { ok: false, message: `extensions: ${err.message}` };
    throw err;
  }
  return { ok: true, value: parsed.data };
}

/** Parses models.json text into a catalog merged over the shipped list. */
export function parseModelsText(text: string): ParseOutcome<Catalog> {
  const json = parseJson(text);
  if (!json.ok) return json;
  const parsed = ModelsFile.safeParse(json.value);
  if (!parsed.success) return { ok: false, message: oneLine(parsed.error), issues: parsed.error.issues };
  return { ok: true, value: loadCatalog(parsed.data) };
}

function parseJson(text: string): ParseOutcome<unknown> {
  if (text.trim() === '') return { ok: true, value: {} };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return { ok: false, message: `invalid JSON: ${(err as Error).message}` };
  }
}

export interface ConfigSnapshot {
  /** The extension modules this daemon runs, which extensions.json was parsed against. */
  readonly modules: ExtensionSet;
  readonly extensions: ExtensionsFileParsed;
  readonly models: Catalog;
  /** Starts at 1 after `load()`; grows by one on each reload that changed something or cleared a problem. */
  readonly version: number;
}

export interface ConfigProblem {
  /** The file's base name (`extensions.json`), never a full path: this may go over the wire. */
  readonly file: string;
  readonly message: string;
}

export interface ConfigStoreOptions {
  extensionsPath: string;
  modelsPath: string;
  /** The daemon's extensions: each one's section of extensions.json and the names it may select. */
  modules: ExtensionSet;
  log: Logger;
  /** Called after every version bump with the new snapshot. */
  onChange?: (cfg: ConfigSnapshot) => void;
  /** Quiet time (ms) after a file event before reloading; coalesces editors' bursts. Default 50. */
  debounceMs?: number;
}

/** The state of one watched file. `text` null means absent (defaults). */
interface FileSlot<T> {
  readonly path: string;
  readonly name: string;
  good: T;
  goodText: string | null;
  /** The content of the file now failing, or undefined when the file is fine. */
  badText: string | undefined;
  problem: string | undefined;
  parse(text: string): ParseOutcome<T>;
  defaults(): T;
}

/**
 * Holds the current extensions.json and models.json. `load()` (also what `/reload` and SIGHUP
 * call) reads both files synchronously; `watch()` reloads on change. A missing file means
 * defaults. A file that fails to read or parse leaves that file's last good content in place,
 * logs one error per distinct bad content, and is listed by `problems()` until a later load
 * succeeds, which is logged at info.
 */
export class ConfigStore {
  private readonly opts: ConfigStoreOptions;
  private readonly log: Logger;
  private readonly extensionsSlot: FileSlot<ExtensionsFileParsed>;
  private readonly modelsSlot: FileSlot<Catalog>;
  private version = 0;
  private watchers: FSWatcher[] | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(opts: ConfigStoreOptions) {
    this.opts = opts;
    this.log = opts.log;
    const extDefaults = (): ExtensionsFileParsed => extensionsFileFor(opts.modules).parse({});
    this.extensionsSlot = {
      path: path.resolve(opts.extensionsPath),
      name: path.basename(opts.extensionsPath),
      good: extDefaults(),
      goodText: null,
      badText: undefined,
      problem: undefined,
      parse: (text) => parseExtensionsText(text, opts.modules),
      defaults: extDefaults,
    };
    this.modelsSlot = {
      path: path.resolve(opts.modelsPath),
      name: path.basename(opts.modelsPath),
      good: loadCatalog(),
      goodText: null,
      badText: undefined,
      problem: undefined,
      parse: parseModelsText,
      defaults: () => loadCatalog(),
    };
  }

  get current(): ConfigSnapshot {
    return { modules: this.opts.modules, extensions: this.extensionsSlot.good, models: this.modelsSlot.good, version: this.version };
  }

  problems(): ConfigProblem[] {
    const out: ConfigProblem[] = [];
    for (const slot of [this.extensionsSlot, this.modelsSlot]) {
      if (slot.problem !== undefined) out.push({ file: slot.name, message: slot.problem });
    }
    return out;
  }

  /** Reads both files now. Returns whether the version changed. Never throws for file content. */
  load(): boolean {
    const a = this.refresh(this.extensionsSlot);
    const b = this.refresh(this.modelsSlot);
    if (!a && !b && this.version > 0) return false;
    this.version += 1;
    this.opts.onChange?.(this.current);
    return true;
  }

  /**
   * Starts watching both files. Their parent directories are watched (fs.watch: inotify on
   * Linux), filtered to the two names, so a file created later is picked up too. Events are
   * debounced into one `load()` once writes have paused (`schedule`).
   *
   * Not chokidar: the home directory also holds the database, and chokidar re-reads and stats
   * a watched directory on its events, so every commit of the daemon (the WAL changes) cost a
   * directory scan on the event loop. An fs.watch event costs a name comparison.
   */
  async watch(): Promise<void> {
    if (this.watchers !== undefined || this.closed) return;
    const names = new Map<string, Set<string>>();
    for (const p of [this.extensionsSlot.path, this.modelsSlot.path]) {
      const dir = path.dirname(p);
      names.set(dir, (names.get(dir) ?? new Set()).add(path.basename(p)));
    }
    this.watchers = [];
    for (const [dir, files] of names) {
      try {
        const w = watch(dir, (_event, file) => {
          // No name (some platforms): reload to be safe.
          if (file === null || files.has(String(file))) this.schedule();
        });
        w.on('error', (err) => this.log.error({ err, dir }, 'config watcher failed'));
        this.watchers.push(w);
      } catch (err) {
        this.log.error({ err, dir }, 'cannot watch the configuration folder; changes need /reload or SIGHUP');
      }
    }
    // Anything written between load() and the watchers starting would otherwise be missed.
    await Promise.resolve();
    if (!this.closed) this.load();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const ws = this.watchers ?? [];
    this.watchers = undefined;
    for (const w of ws) w.close();
    await Promise.resolve();
  }

  private schedule(): void {
    if (this.closed) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!this.closed) this.load();
    }, this.opts.debounceMs ?? 50);
  }

  /** Re-reads one file; returns whether what it contributes (content or problem) changed. */
  private refresh<T>(slot: FileSlot<T>): boolean {
    let text: string | null;
    try {
      text = readFileSync(slot.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        return this.fail(slot, `\0read:${(err as NodeJS.ErrnoException).code ?? ''}`, `cannot read: ${(err as Error).message}`, { err });
      }
      text = null;
    }
    if (text !== null && text === slot.goodText && slot.problem === undefined) return false;
    if (text === null) {
      if (slot.goodText === null && slot.problem === undefined) return false;
      const cleared = slot.problem !== undefined;
      slot.good = slot.defaults();
      slot.goodText = null;
      slot.badText = undefined;
      slot.problem = undefined;
      this.log.info({ file: slot.path, cleared }, 'config file absent; using defaults');
      return true;
    }
    const result = slot.parse(text);
    if (!result.ok) {
      return this.fail(slot, text, result.message, result.issues === undefined ? {} : { issues: result.issues });
    }
    const cleared = slot.problem !== undefined;
    slot.good = result.value;
    slot.goodText = text;
    slot.badText = undefined;
    slot.problem = undefined;
    this.log.info({ file: slot.path, cleared }, 'config loaded');
    return true;
  }

  /** Records a failing file; logs only when this bad content differs from the last one seen. */
  private fail<T>(slot: FileSlot<T>, badText: string, message: string, detail: Record<string, unknown>): boolean {
    if (slot.badText === badText) return false;
    slot.badText = badText;
    slot.problem = message;
    this.log.error({ file: slot.path, problem: message, ...detail }, `${slot.name} is invalid; keeping the last good version`);
    return false;
  }
}
