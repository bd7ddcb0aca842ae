// The identifiers a context-quality measurement counts: the exact strings a coding agent needs
// to find its way back (file paths, code symbols, numbers, error names and codes, commit
// hashes). Used by the eval's retention metric and by the reference-summary check, so both
// count the same things. Extraction is deliberately plain regular expressions: it has to be
// predictable and the same on every run, not clever.

export type IdentifierKind = 'path' | 'symbol' | 'number' | 'error' | 'hash';

/** Each identifier found in a text, once, with its kind (the first kind that claimed it). */
export type Identifiers = Map<string, IdentifierKind>;

// Order matters: a hash or a path claims its characters before the symbol and number rules see them.
const RULES: readonly [IdentifierKind, RegExp][] = [
  // Commit-like hex runs: 7-40 hex digits with at least one digit and one letter.
  ['hash', /\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b/g],
  // Paths: two or more segments joined by '/', or a file name with a known-looking extension.
  ['path', /(?:~|\.{1,2})?(?:\/?[\w@+-][\w.@+-]*)(?:\/[\w.@+-]+)+\/?|\b[\w-]+(?:\.[\w-]+)*\.(?:[a-z]{1,5}\d?)\b(?=[^\w(]|$)/g],
  // Error names (TypeError, ConnectionRefusedError), errno-style codes (ENOENT), HTTP-ish codes (E1234).
  ['error', /\b[A-Z][A-Za-z]*(?:Error|Exception|Failure)\b|\bE[A-Z]{3,}\b|\b[A-Z]{1,4}\d{3,5}\b/g],
  // Symbols: camelCase, PascalCase with two humps, snake_case, SCREAMING_CASE, dotted and :: paths.
  [
    'symbol',
    /\b[A-Za-z_$][\w$]*(?:(?:\.|::)[A-Za-z_$][\w$]*)+\b|\b[a-z]+[A-Z][\w$]*\b|\b[A-Z][a-z0-9]+[A-Z][\w$]*\b|\b[a-z0-9]+(?:_[a-z0-9]+)+\b|\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b/g,
  ],
  // Numbers worth keeping: versions (1.2.3), decimals, and integers of three or more digits.
  ['number', /(?:(?<=\bv)|\b)\d+\.\d+(?:\.\d+)*\b|\b\d{3,}\b/g],
];

/** Extensions that make `word.ext` a file name rather than a sentence's `end.Next`. */
const FILE_EXTENSION =
  /\.(?:[cm]?[jt]sx?|py|rs|go|rb|java|kt|c|cc|cpp|h|hpp|cs|swift|php|sh|bash|zsh|md|rst|txt|json|jsonl|ya?ml|toml|ini|cfg|conf|lock|sql|db|html?|css|scss|xml|csv|tsv|log|png|jpe?g|gif|webp|svg|pdf|env|proto|gradle|mk|cmake|vue|svelte|lua|pl|r|ex|exs|erl|hs|ml|scala|zig|nim|dart|tf|dockerfile|patch|diff)$/i;

function trimmed(s: string): string {
  return s.replace(/[.,;:!?)\]}'"`]+$/, '').replace(/^[(['"`]+/, '');
}

function accept(kind: IdentifierKind, s: string): boolean {
  if (s.length < 3 || s.length > 200) return false;
  if (kind === 'path') {
    if (s.includes('/')) {
      // "and/or", "w/o", "1/2": a path needs a segment longer than two characters and a letter.
      if (!/[A-Za-z]/.test(s)) return false;
      if (/^(?:\/|\.{1,2}\/|~\/)/.test(s)) return true;
      const segments = s.split('/').filter((x) => x !== '');
      // "Update/add", "SessionLive/SubagentLive": two capitalized words joined by a slash are
      // prose or two symbols (the symbol rule then finds each), not a relative path.
      if (segments.length === 2 && segments.every((x) => /^[A-Za-z]+$/.test(x)) && /^[A-Z]/.test(segments[0] ?? '')) return false;
      if (segments.length >= 3 || FILE_EXTENSION.test(segments.at(-1) ?? '')) return true;
      return segments.every((x) => x.length >= 3) && segments.some((x) => x.length >= 4);
    }
    return FILE_EXTENSION.test(s);
  }
  if (kind === 'symbol') {
    // A dotted run of plain lower-case words is usually prose ("e.g", "i.e") or a domain; keep
    // it when a part looks like code.
    if (/^[a-z]+(?:\.[a-z]+)+$/.test(s)) return /\.(?:[a-z]+[A-Z]|[a-z]*_)/.test(s) || s.split('.').length >= 3;
    // "Done.Next" is a missing space between sentences, not a member access.
    if (/^[A-Z][a-z]+(?:\.[A-Z][a-z]+)+$/.test(s)) return false;
    return true;
  }
  return true;
}

/** The identifiers of a text. */
export function extractIdentifiers(text: string): Identifiers {
  const out: Identifiers = new Map();
  // Each rule masks what it claimed, so "src/app.ts" is one path, not a path plus a symbol.
  let rest = text;
  for (const [kind, re] of RULES) {
    rest = rest.replace(re, (m) => {
      const s = trimmed(m);
      if (!accept(kind, s)) return m;
      if (!out.has(s)) out.set(s, kind);
      return ' '.repeat(m.length);
    });
  }
  return out;
}

/** The share (0..1) of `wanted` that occurs verbatim in `text`; 1 when nothing is wanted. */
export function retainedShare(wanted: Iterable<string>, text: string): { kept: number; total: number; share: number } {
  let kept = 0;
  let total = 0;
  for (const id of wanted) {
    total++;
    if (text.includes(id)) kept++;
  }
  return { kept, total, share: total === 0 ? 1 : kept / total };
}
