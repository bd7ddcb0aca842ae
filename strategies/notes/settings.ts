// The notes layer's section of extensions.json (strategies/notes/notes.ts is the layer).
import { z } from 'zod';

export const NotesSettings = z.strictObject({
  /** Tokens the notes may use; a rewrite may answer up to a quarter more (notesOutputCap). */
  budgetTokens: z.number().int().positive().default(2000),
});
export type NotesSettings = z.output<typeof NotesSettings>;
