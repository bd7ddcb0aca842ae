// The transcript formats the importers read, by name: a module of its own so the CLI can name
// them in its help without loading the importers (they load when `albedo import` runs).
export const FORMATS = ['claude-code', 'codex', 'pi', 'swe-agent'] as const;
export type ImportFormat = (typeof FORMATS)[number];

/** albedo's own format: `albedo export`'s rows, which `albedo import` takes back. */
export const OWN_FORMAT = 'albedo';
/** Every format `albedo import --format` takes. */
export const IMPORT_FORMATS = [OWN_FORMAT, ...FORMATS] as const;
export type AnyFormat = (typeof IMPORT_FORMATS)[number];
