// What an extension's folder exports: one value that says everything the build needs to know
// about it. The registry, the configuration schema, the engine's strategy, layer and fold
// tables, the memory tools the model is offered and how each one runs are all read off the
// list of these values in strategies/index.ts, so an extension is its folder plus one line
// there (and a migration when it stores tables).
import type { z } from 'zod';
import type { Db } from '../../storage/db.ts';
import type { LcmGrepOptions } from '../../storage/state/lcm-read.ts';
import type { FoldPlugin, LayerFactory, Strategy } from '../contract.ts';
import type { ExtensionKind } from './catalog.ts';

/** What a memory tool runs with: the daemon's database and search worker, its session bound. */
export interface ToolContext {
  readonly db: Db;
  readonly session: string;
  /** The index parts of a search, answered by the daemon's search worker thread. */
  readonly search: Required<Pick<LcmGrepOptions, 'hits' | 'scan' | 'summaryHits'>>;
}

/**
 * A read-only tool an extension gives the model. The daemon runs it in the session's
 * transcript lane, with arguments already checked against `args`.
 */
export interface MemoryToolDef {
  readonly name: string;
  readonly description: string;
  /** Its arguments as the model sends them (the session is bound by the daemon). */
  readonly args: z.ZodType<Record<string, unknown>>;
  run(args: Record<string, unknown>, cx: ToolContext): unknown;
}

/** A tool whose `run` is typed by its own schema (the daemon parses the arguments with it first). */
export function memoryTool<S extends z.ZodType<Record<string, unknown>>>(def: {
  name: string;
  description: string;
  args: S;
  run(args: z.output<S>, cx: ToolContext): unknown;
}): MemoryToolDef {
  return { name: def.name, description: def.description, args: def.args, run: (args, cx) => def.run(args as z.output<S>, cx) };
}

export interface ExtensionModule {
  /** Its name in extensions.json, `/extensions` and `/compact <name>`. */
  readonly name: string;
  readonly kind: ExtensionKind;
  /** One line for `albedo extensions`. */
  readonly description: string;
  /** On when nobody chose otherwise. */
  readonly defaultEnabled: boolean;
  /** Extensions switched on with this one (never a strategy). */
  readonly requires: readonly string[];
  /** Its section of extensions.json, defaulted when absent; a strategy's is its `settings`. */
  readonly settings?: z.ZodType;
  /** Exactly one of these for a strategy, a layer or a memory extension that stores folds. */
  readonly strategy?: Strategy;
  readonly layer?: LayerFactory;
  readonly fold?: FoldPlugin;
  readonly tools?: readonly MemoryToolDef[];
  /**
   * The tables its saved state lives in, counted as strategy state in the storage breakdown
   * (`albedo status --storage`) with their own shadow tables.
   */
  readonly tables?: readonly string[];
  /**
   * The SQL that creates and later changes those tables: one script per version, appended and
   * never edited once released, run by the daemon as it starts (`migrateExtension`). Key a
   * session's rows by `sid REFERENCES sessions(sid) ON DELETE CASCADE` so they go with it. The
   * shipped extensions' tables predate this field and live in storage/migrations/.
   */
  readonly migrations?: readonly string[];
}
