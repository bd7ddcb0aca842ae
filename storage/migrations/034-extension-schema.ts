// Migration 34: the schema version of each extension that brings its own tables
// (`ExtensionModule.migrations`, applied by `migrateExtension` in storage/db.ts when a daemon
// starts with that extension). The shipped extensions' tables are in this numbered list instead.

export const sql = `
CREATE TABLE extension_schema (
  name TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  applied_at INTEGER NOT NULL
) STRICT;
`;
