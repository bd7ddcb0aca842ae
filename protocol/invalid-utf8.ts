// Reading a line that is not valid UTF-8 just far enough to answer it with its own id. The line
// is never handed on as text: it is only decoded with a marker in place of each ill-formed byte
// sequence, parsed, and searched for the first key or string that holds a marker, which the
// peer (rpc-peer.ts) names in its error. A line that does not parse even so stays a parse error.

/** Where the first ill-formed text is: the path of its member, whether it is a key, and how it reads. */
export interface InvalidText {
  /** Keys and array indices from the top of the message down to the string (or the key's object). */
  path: Array<string | number>;
  /** True when the ill-formed text is a key of the object at `path` (the key is then its last element). */
  key: boolean;
  /** The text with U+FFFD where the sender's bytes were not UTF-8. */
  text: string;
}

export interface MarkedLine {
  /** The parsed line, with `marker` where its bytes were not UTF-8. */
  value: unknown;
  /** The line decoded the same way (for raw id tokens). */
  text: string;
  marker: string;
}

/**
 * Candidate markers: Unicode noncharacters, which text rarely holds. One is used only when the
 * line holds it neither as bytes nor as a \u escape, so every marker in the parsed value stands
 * for bytes that were not UTF-8.
 */
const MARKERS = Array.from({ length: 32 }, (_, i) => String.fromCharCode(0xfdd0 + i));

function pickMarker(bytes: Buffer): string | undefined {
  const latin = bytes.toString('latin1');
  return MARKERS.find((m) => {
    const hex = m.charCodeAt(0).toString(16);
    return !latin.includes(Buffer.from(m).toString('latin1')) && !new RegExp(`\\\\u${hex}`, 'i').test(latin);
  });
}

/**
 * Bytes from `i` that form one well-formed UTF-8 sequence (positive), or the length of the
 * ill-formed part to replace (negative): the longest start of a sequence that could still have
 * been valid, at least one byte, as decoders count replacements.
 */
function sequenceAt(buf: Buffer, i: number): number {
  const b = buf[i]!;
  if (b < 0x80) return 1;
  let need: number;
  let lo = 0x80;
  let hi = 0xbf;
  if (b >= 0xc2 && b <= 0xdf) need = 1;
  else if (b === 0xe0) [need, lo] = [2, 0xa0];
  else if (b === 0xed) [need, hi] = [2, 0x9f];
  else if (b >= 0xe1 && b <= 0xef) need = 2;
  else if (b === 0xf0) [need, lo] = [3, 0x90];
  else if (b === 0xf4) [need, hi] = [3, 0x8f];
  else if (b >= 0xf1 && b <= 0xf3) need = 3;
  else return -1;
  let j = i + 1;
  for (let k = 0; k < need; k++, j++) {
    const c = buf[j];
    if (c === undefined || c < lo || c > hi) return -(j - i);
    lo = 0x80;
    hi = 0xbf;
  }
  return j - i;
}

/** The bytes decoded with `marker` for each ill-formed sequence. */
function decodeMarked(bytes: Buffer, marker: string): string {
  const out: string[] = [];
  let run = 0;
  let i = 0;
  while (i < bytes.length) {
    const n = sequenceAt(bytes, i);
    if (n > 0) {
      i += n;
      continue;
    }
    if (run < i) out.push(bytes.toString('utf8', run, i));
    out.push(marker);
    i -= n;
    run = i;
  }
  if (run < bytes.length) out.push(bytes.toString('utf8', run));
  return out.join('');
}

/** The line parsed with markers for its ill-formed bytes; undefined when even so it is not JSON. */
export function parseMarked(bytes: Buffer): MarkedLine | undefined {
  const marker = pickMarker(bytes);
  if (marker === undefined) return undefined;
  const text = decodeMarked(bytes, marker);
  try {
    return { value: JSON.parse(text) as unknown, text, marker };
  } catch {
    return undefined;
  }
}

/**
 * A key or string under `value` that holds `marker` (depth first; an object's keys are looked at
 * before its values), or undefined. Iterative, so a deeply nested message cannot exhaust the stack.
 */
export function findInvalidText(value: unknown, marker: string): InvalidText | undefined {
  const shown = (s: string) => s.replaceAll(marker, '\uFFFD');
  const stack: Array<{ v: unknown; path: Array<string | number> }> = [{ v: value, path: [] }];
  while (stack.length > 0) {
    const { v, path } = stack.pop()!;
    if (typeof v === 'string') {
      if (v.includes(marker)) return { path, key: false, text: shown(v) };
      continue;
    }
    if (typeof v !== 'object' || v === null) continue;
    const entries: Array<[string | number, unknown]> = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
    for (const [k] of entries) {
      if (typeof k === 'string' && k.includes(marker)) return { path: [...path, shown(k)], key: true, text: shown(k) };
    }
    for (let i = entries.length - 1; i >= 0; i--) stack.push({ v: entries[i]![1], path: [...path, entries[i]![0]] });
  }
  return undefined;
}
