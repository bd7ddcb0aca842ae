// What a session's model was last told of its system prompt and tools, kept on the session's
// row: the instructions and extension context that prompt carried, a digest of the tools, and
// what a `capabilities changed` notice told it since (daemon/capabilities.ts decides the notices).
import { perDb, type Db } from '../db.ts';

function prepare(db: Db) {
  return {
    known: db.prepare<
      [number],
      { known_instructions: string | null; known_context: string | null; known_tools: string | null; known_told: string | null; known_told_instructions: string | null; prepared_head: number | null }
    >('SELECT known_instructions, known_context, known_tools, known_told, known_told_instructions, prepared_head FROM sessions WHERE sid = ?'),
    saveTold: db.prepare<[string, string | null, number]>('UPDATE sessions SET known_told = ?, known_told_instructions = ? WHERE sid = ?'),
    // A new system prompt (a compaction rebuilt it, or the client's instructions went out
    // changed) makes any earlier notice history: what was told is cleared. Instructions recorded
    // as null (before they were kept) count as unchanged.
    saveKnown: db.prepare<[{ sid: number; instructions: string; context: string; tools: string }]>(
      `UPDATE sessions SET
         known_told = CASE WHEN known_context IS @context AND coalesce(known_instructions, @instructions) IS @instructions THEN known_told ELSE NULL END,
         known_told_instructions = CASE WHEN known_context IS @context AND coalesce(known_instructions, @instructions) IS @instructions THEN known_told_instructions ELSE NULL END,
         known_instructions = @instructions, known_context = @context, known_tools = @tools
        WHERE sid = @sid AND (known_context IS NOT @context OR known_tools IS NOT @tools OR known_instructions IS NOT @instructions)`,
    ),
  };
}

const stmts = perDb(prepare);

/** The two parts of a system prompt a `capabilities changed` notice can tell a model of. */
export interface PromptParts {
  /** The client's instructions. */
  instructions: string;
  /** The text the enabled extensions add. */
  context: string;
}

/** What a session's model was last sent of its system prompt and tools (see `knownPrompt`). */
export interface KnownPrompt {
  /** The instructions that system prompt carried; null when recorded before they were kept. */
  instructions: string | null;
  /** The extension context it carried. */
  context: string;
  /** A digest of every tool the request carried, the client's and the extensions'. */
  toolsHash: string;
  /** What a notice since told the model, per part; null where no notice stands. */
  told: { instructions: string | null; context: string | null };
  /** The head the session's last prepared request was built from (seq). */
  preparedHead: number | null;
}

/**
 * What a session's model was last sent: the instructions and extension context in its system
 * prompt, a digest of the tools, what a notice told it since, and the head that request was
 * built from. Undefined before the first prepare.
 */
export function knownPrompt(db: Db, sid: number): KnownPrompt | undefined {
  const r = stmts(db).known.get(sid);
  if (r === undefined || r.known_context === null || r.known_tools === null) return undefined;
  return {
    instructions: r.known_instructions,
    context: r.known_context,
    toolsHash: r.known_tools,
    told: { instructions: r.known_told_instructions, context: r.known_told },
    preparedHead: r.prepared_head,
  };
}

/**
 * Records what a `capabilities changed` notice told the session's model: the extension context,
 * and the instructions when the notice carried them (null: the model goes by its system prompt's).
 */
export function saveKnownTold(db: Db, sid: number, told: { context: string; instructions: string | null }): void {
  stmts(db).saveTold.run(told.context, told.instructions, sid);
}

/** Records what a prepare sent (see `knownPrompt`); writes only when it changed. */
export function saveKnownPrompt(db: Db, sid: number, system: PromptParts, toolsHash: string): void {
  stmts(db).saveKnown.run({ sid, instructions: system.instructions, context: system.context, tools: toolsHash });
}
