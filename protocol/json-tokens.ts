// The raw text of one member's value in a JSON line that JSON.parse has already accepted: what
// the parsed value cannot tell (`1.0`, `1e0` and `1.0000000000000000001` all parse to 1). It
// walks the top level only, jumping over strings with indexOf and over nested values by
// counting brackets. Deciding what a token means (the id rule) is the peer's job (rpc-peer.ts).
// The proxy's body memo (daemon/proxy/body-memo.ts) walks a body's history array with the same
// two steps.

// The structural characters of JSON, as char codes and as bytes (json-bytes.ts scans bytes).
export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const COMMA = 0x2c;
export const COLON = 0x3a;
export const OPEN_BRACE = 0x7b;
export const CLOSE_BRACE = 0x7d;
export const OPEN_BRACKET = 0x5b;
export const CLOSE_BRACKET = 0x5d;

/** JSON's four whitespace characters. */
export function isSpace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

/** The index of the first non-space character at or after `i`. */
export function skipSpace(s: string, i: number): number {
  while (i < s.length && isSpace(s.charCodeAt(i))) i++;
  return i;
}

/** `s[i]` opens a string: the index just past its closing quote. */
function stringEnd(s: string, i: number): number {
  let from = i + 1;
  for (;;) {
    const q = s.indexOf('"', from);
    if (q === -1) return s.length; // not valid JSON: the caller promised it is
    let k = q - 1;
    while (s.charCodeAt(k) === BACKSLASH) k--;
    if ((q - 1 - k) % 2 === 0) return q + 1; // an even run of backslashes: the quote is not escaped
    from = q + 1;
  }
}

/** `s[i]` starts a value of text JSON.parse accepted: the index just past it. */
export function valueEnd(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c === QUOTE) return stringEnd(s, i);
  if (c === OPEN_BRACE || c === OPEN_BRACKET) {
    let depth = 0;
    let j = i;
    while (j < s.length) {
      const d = s.charCodeAt(j);
      if (d === QUOTE) {
        j = stringEnd(s, j);
        continue;
      }
      if (d === OPEN_BRACE || d === OPEN_BRACKET) depth++;
      else if (d === CLOSE_BRACE || d === CLOSE_BRACKET) {
        depth--;
        if (depth === 0) return j + 1;
      }
      j++;
    }
    return j;
  }
  // A number, true, false or null: up to the next delimiter.
  let j = i;
  while (j < s.length) {
    const d = s.charCodeAt(j);
    if (d === COMMA || d === CLOSE_BRACE || d === CLOSE_BRACKET || isSpace(d)) break;
    j++;
  }
  return j;
}

/**
 * `s[i]` opens an object: the raw token of its member `name` (the last one when the name repeats,
 * as JSON.parse keeps the last), or undefined, and the index just past the object.
 */
function objectMember(s: string, i: number, name: string): { token: string | undefined; end: number } {
  const quoted = JSON.stringify(name);
  let token: string | undefined;
  let j = skipSpace(s, i + 1);
  if (s.charCodeAt(j) === CLOSE_BRACE) return { token, end: j + 1 };
  while (j < s.length) {
    const keyEnd = stringEnd(s, j);
    const key = s.slice(j, keyEnd);
    // A key written with escapes (`"\u0069d"`) is the same name once decoded.
    const matches = key === quoted || (key.includes('\\') && JSON.parse(key) === name);
    j = skipSpace(s, keyEnd);
    if (s.charCodeAt(j) !== COLON) break;
    const start = skipSpace(s, j + 1);
    j = valueEnd(s, start);
    if (matches) token = s.slice(start, j);
    j = skipSpace(s, j);
    if (s.charCodeAt(j) !== COMMA) break;
    j = skipSpace(s, j + 1);
  }
  return { token, end: j + 1 };
}

/**
 * For a line that JSON.parse accepted: the raw token of member `name` of the top-level object, as
 * a one-element list; for a top-level array (a batch), one entry per element (undefined for an
 * element that is not an object or has no such member); an empty list for any other value.
 * Linear in the line's length.
 */
export function topLevelMemberTokens(line: string, name: string): Array<string | undefined> {
  let i = skipSpace(line, 0);
  const c = line.charCodeAt(i);
  if (c === OPEN_BRACE) return [objectMember(line, i, name).token];
  if (c !== OPEN_BRACKET) return [];
  const tokens: Array<string | undefined> = [];
  i = skipSpace(line, i + 1);
  if (line.charCodeAt(i) === CLOSE_BRACKET) return tokens;
  while (i < line.length) {
    if (line.charCodeAt(i) === OPEN_BRACE) {
      const { token, end } = objectMember(line, i, name);
      tokens.push(token);
      i = end;
    } else {
      tokens.push(undefined);
      i = valueEnd(line, i);
    }
    i = skipSpace(line, i);
    if (line.charCodeAt(i) !== COMMA) break;
    i = skipSpace(line, i + 1);
  }
  return tokens;
}
