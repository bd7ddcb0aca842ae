// The one guard for a JSON object as parsed: an object that is neither null nor an array.
// Request bodies, stream events and tool arguments are read through it before their fields are.

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
