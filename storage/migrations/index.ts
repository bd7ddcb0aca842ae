// The ordered list of schema migrations. Append only: a released migration never changes.
import { sql as m001 } from './001-transcript.ts';

export interface Migration {
  /** Version number; migrations run in increasing order, each exactly once. */
  version: number;
  name: string;
  sql: string;
}

export const migrations: readonly Migration[] = [{ version: 1, name: 'transcript', sql: m001 }];
