// The notes layer's section of extensions.json. The layer itself is not in this build yet.
import { z } from 'zod';

export const NotesSettings = z.strictObject({
  /** Tokens the notes may use. */
  budgetTokens: z.number().int().positive().default(2000),
});
