// Local, byte-based size estimates in tokens. Never provider accounting: the numbers only
// decide when to compact and how much tail fits. Images are sized from their dimensions, so
// base64 length can never inflate (or deflate) an estimate.
import { stringifyJson } from '../protocol/json-depth.ts';
import type { OutPart, PlainInput, ToolSpec } from '../protocol/prepared.ts';

/** Fixed overhead per input (role, separators), in tokens. */
export const PER_INPUT_TOKENS = 12;

/** ceil(bytes / 4) of the UTF-8 text: the one text estimate (strategies and summarizers alike). */
export function textTokens(text: string): number {
  return Math.floor((Buffer.byteLength(text, 'utf8') + 3) / 4);
}

/** Longest image edge assumed when the target declares none, in pixels (Anthropic's rule). */
export const DEFAULT_MAX_IMAGE_EDGE_PX = 1568;

/**
 * The size, in pixels, at which the provider will see an image: scaled down, aspect kept, so
 * that its longest edge is at most `maxEdgePx`; never scaled up, and no edge below 1 px.
 * Source: Anthropic's vision guide ("Evaluate image size": an image whose long edge exceeds
 * 1568 px is scaled down, preserving its aspect ratio, before the model reads it). Other
 * providers' edges come in through the target's `maxImageEdgePx`.
 */
export function providerImageSize(width: number, height: number, maxEdgePx: number = DEFAULT_MAX_IMAGE_EDGE_PX): { width: number; height: number } {
  const longest = Math.max(width, height);
  if (longest <= maxEdgePx) return { width, height };
  const scale = maxEdgePx / longest;
  return { width: Math.max(1, Math.round(width * scale)), height: Math.max(1, Math.round(height * scale)) };
}

/**
 * Tiles of 512 px, as vision models bill them, plus a fixed part, counted at the size the
 * provider will see (`providerImageSize`), not the stored one. `maxEdgePx` undefined: the default.
 */
export function imageTokens(width: number, height: number, maxEdgePx?: number): number {
  const seen = providerImageSize(width, height, maxEdgePx);
  return 85 + 170 * Math.ceil(seen.width / 512) * Math.ceil(seen.height / 512) + 20;
}

/**
 * Sizes of parts that depend on nothing but themselves (text, tool calls, reasoning), kept on
 * the part. A projection hands on the same part objects from request to request (a row's
 * projected parts are memoized per kernel), so a tail is not re-serialized and re-measured on
 * every prepare. Parts are never changed after they are built; the size is a private,
 * non-enumerable key (invisible to JSON and to deep comparison), not a WeakMap entry: a WeakMap
 * of a long history's parts grew by rehashing in one go, a long stall for a single `set`.
 */
const OWN_SIZE = Symbol('own-size');
type Sized = OutPart & { [OWN_SIZE]?: number };

/** `maxImageEdgePx` below: the target's image edge in pixels; undefined uses the default. */
export function partTokens(part: OutPart, maxImageEdgePx?: number): number {
  switch (part.type) {
    case 'image':
      return imageTokens(part.width, part.height, maxImageEdgePx);
    case 'tool_result':
      return textTokens(part.call_id) + part.content.reduce((n, p) => n + partTokens(p, maxImageEdgePx), 0);
    default: {
      const known = (part as Sized)[OWN_SIZE];
      if (known !== undefined) return known;
      const n = ownTokens(part);
      // A frozen part is measured each time.
      if (Object.isExtensible(part)) Object.defineProperty(part, OWN_SIZE, { value: n });
      return n;
    }
  }
}

function ownTokens(part: Exclude<OutPart, { type: 'image' | 'tool_result' }>): number {
  switch (part.type) {
    case 'text':
      return textTokens(part.text);
    case 'tool_call':
      return textTokens(part.name) + textTokens(stringifyJson(part.arguments));
    case 'reasoning':
      return textTokens(part.text ?? '') + textTokens(part.encrypted ?? '');
    case 'opaque':
      return textTokens(stringifyJson(part.data));
  }
}

export function inputTokens(input: PlainInput, maxImageEdgePx?: number): number {
  return PER_INPUT_TOKENS + input.content.reduce((n, p) => n + partTokens(p, maxImageEdgePx), 0);
}

export function inputsTokens(inputs: readonly PlainInput[], maxImageEdgePx?: number): number {
  return inputs.reduce((n, i) => n + inputTokens(i, maxImageEdgePx), 0);
}

/**
 * What every request pays before any history: the system prompt and the tool schemas. A
 * ToolSpec's schema is within the depth bound by its type (checked where it entered, clamped
 * where it was read back: protocol/prepared.ts), so it is stringified as it is: the depth walk
 * of stringifyJson was a sizeable share of a nothing-due prepare's own time.
 */
export function pinnedTokens(system: string, tools: readonly ToolSpec[]): number {
  let n = TOOLS_TOKENS.get(tools);
  if (n === undefined) {
    n = 0;
    for (const t of tools) n += textTokens(t.name) + textTokens(t.description) + textTokens(JSON.stringify(t.input_schema));
    TOOLS_TOKENS.set(tools, n);
  }
  return textTokens(system) + n;
}

/** The tokens of a tool list, by the list: a session's requests share theirs while the tools stay the same (strategies/prepare.ts). */
const TOOLS_TOKENS = new WeakMap<readonly ToolSpec[], number>();
