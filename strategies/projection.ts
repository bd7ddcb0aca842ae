// Provider projection: durable rows -> provider-neutral plain inputs for one target model.
// Every rule that makes stored rows sendable is written here once for all strategies (merging,
// caps, answering calls, orphans, unreadable images, reasoning routing); choosing rows is theirs.
import { clampJsonDepth } from '../protocol/json-depth.ts';
import type { OutPart, PlainInput } from '../protocol/prepared.ts';
import type { ImagePart, OpaquePart, StoredRow, TextPart } from '../protocol/rows.ts';
import { ELIDED_IMAGE_TEXT, imageMarker, opaqueMarker } from '../storage/transcript/row-text.ts';
import { runSteps, type Steps, timeSlicer } from '../protocol/time-slice.ts';
import { inputsTokens, partTokens, PER_INPUT_TOKENS, textTokens } from './estimate.ts';

/**
 * Where a prepared request goes, as far as projection and the strategies need to know. Built
 * once per preparation by the engine from `prepare` params, the upstream's declared limits and
 * the models catalog (in that order of precedence).
 */
export interface ProjectionTarget {
  /** The session's wire id; pointers back into the transcript name it. */
  session: string;
  /** Provider the request goes to (`prepare {provider}`, else the catalog's), if known. */
  provider: string | undefined;
  /** Model id the request goes to, if known. */
  model: string | undefined;
  /** False when the catalog says the model reads no image input; unknown models read images. */
  readsImages: boolean;
  /** Longest image edge the provider keeps before downsizing, in pixels; undefined: none known. */
  maxImageEdgePx: number | undefined;
  /** Images one request may carry; undefined: no limit known. */
  maxImages: number | undefined;
  /** Largest image the upstream accepts, in bytes; undefined: no limit known. */
  maxImageBytes: number | undefined;
  /** The upstream uploads images through a files API rather than inline request bytes. */
  uploadsImages: boolean;
  /**
   * A tool output (or user paste) estimated above this many tokens goes into the request as its
   * head and tail with a transcript_read pointer between; null: no cap.
   */
  maxOutputTokens: number | null;
}

/** A target with nothing known but the session: no caps, images readable. */
export function plainTarget(session: string): ProjectionTarget {
  return {
    session,
    provider: undefined,
    model: undefined,
    readsImages: true,
    maxImageEdgePx: undefined,
    maxImages: undefined,
    maxImageBytes: undefined,
    uploadsImages: false,
    maxOutputTokens: null,
  };
}

type ResultPart = Extract<OutPart, { type: 'tool_result' }>['content'][number];
type ToolResultBody = Extract<StoredRow['body'], { kind: 'tool_result' }>;

/**
 * How far a provider's encrypted reasoning may travel. `provider`: any model of the provider
 * that wrote it reads it back (Anthropic thinking signatures verify across Claude models).
 * `model`: only the model that wrote it (OpenAI Responses reasoning `encrypted_content`). A
 * provider not listed counts as `model`: a blob the provider rejects fails the whole request,
 * while leaving one out only loses that reasoning.
 */
const ENCRYPTED_REASONING_SCOPE: ReadonlyMap<string, 'provider' | 'model'> = new Map([
  ['anthropic', 'provider'],
  ['openai', 'model'],
]);

/**
 * Providers that reject a tool-use turn whose signed reasoning is missing (Anthropic's extended
 * thinking), so their blobs always go back whole. Elsewhere (OpenAI's `encrypted_content`) a
 * missing item only costs the model that reasoning: a blob larger than the output cap is left
 * out, so that one turn's reasoning cannot keep a request over the window.
 */
const REASONING_REQUIRED = new Set(['anthropic']);

/** What a call with no result yet gets in the request, so that every call is answered. */
export const NO_RESULT_TEXT = '[no result: the tool has not returned, or its run was interrupted]';

/** Whether encrypted reasoning written by `provider` / `model` can go to `target`. */
function encryptedGoesTo(provider: string | undefined, model: string | undefined, target: ProjectionTarget): boolean {
  if (provider === undefined || provider !== target.provider) return false;
  if ((ENCRYPTED_REASONING_SCOPE.get(provider) ?? 'model') === 'provider') return true;
  return model === undefined || target.model === undefined || model === target.model;
}

function imageOut(p: ImagePart, target: ProjectionTarget): ResultPart {
  if (p.elided === true) return { type: 'text', text: ELIDED_IMAGE_TEXT };
  if (!target.readsImages) return { type: 'text', text: imageMarker(p.hash, p.width, p.height) };
  return { type: 'image', hash: p.hash, media_type: p.media_type, width: p.width, height: p.height };
}

// The two helpers below return a number, not a pair: they run once per character of a capped
// text, and a tuple each time was the largest allocation of a prepare.

/** UTF-8 bytes of the code point starting at `i`; 4 (a surrogate pair) spans two UTF-16 units, the others one. */
function codePointAt(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if (c < 0x80) return 1;
  if (c < 0x800) return 2;
  if (c >= 0xd800 && c <= 0xdbff) {
    const d = text.charCodeAt(i + 1);
    if (d >= 0xdc00 && d <= 0xdfff) return 4;
  }
  return 3;
}

/** UTF-8 bytes of the code point ending just before `i`; units as for codePointAt. */
function codePointBefore(text: string, i: number): number {
  const c = text.charCodeAt(i - 1);
  if (c < 0x80) return 1;
  if (c < 0x800) return 2;
  if (c >= 0xdc00 && c <= 0xdfff && i >= 2) {
    const h = text.charCodeAt(i - 2);
    if (h >= 0xd800 && h <= 0xdbff) return 4;
  }
  return 3;
}

const SURROGATE_PAIR = /[\uD800-\uDBFF][\uDC00-\uDFFF]/g;

/**
 * Code points in text[from, to), `from` on a code point: UTF-16 units less one per surrogate
 * pair. The pairs are found by the regex engine, which scans megabytes far faster than a loop.
 */
export function codePointCount(text: string, from = 0, to: number = text.length): number {
  let pairs = 0;
  SURROGATE_PAIR.lastIndex = from;
  for (let m = SURROGATE_PAIR.exec(text); m !== null && m.index + 1 < to; m = SURROGATE_PAIR.exec(text)) pairs++;
  return to - from - pairs;
}

function omissionMarker(omitted: number, session: string, seq: number): string {
  return `[… ${omitted} characters omitted; transcript_read {"session": ${JSON.stringify(session)}, "from_seq": ${seq}, "to_seq": ${seq}} returns all of it]`;
}

/**
 * A text over `capTokens` as its head, an omission marker on a line of its own, and its tail.
 *
 * The bytes the cap allows (capTokens·4, the estimate's rate) less the marker (sized for the
 * longest count it could show) and two newlines are split 2/3 to the head and 1/3 to the tail,
 * so the result never estimates above the cap. The head is the longest prefix within its bytes
 * that ends on a code point, pulled back to just after its last newline when that keeps at
 * least half of it; the tail likewise starts on a code point, moved forward to the next line
 * start when that keeps at least half of it. N in the marker counts the code points left out.
 * A pure function of (text, cap, session, seq): the same row gives the same bytes every time,
 * so a cached prompt prefix stays valid. Returns `text` when it fits, or when the cap is too
 * small for the marker to save anything.
 */
function capText(text: string, capTokens: number, session: string, seq: number): string {
  if (textTokens(text) <= capTokens) return text;
  const room = capTokens * 4 - Buffer.byteLength(omissionMarker(text.length, session, seq), 'utf8') - 2;
  const headBytes = room > 0 ? Math.floor((room * 2) / 3) : 0;
  const tailBytes = room > 0 ? room - headBytes : 0;

  let head = 0;
  for (let used = 0; head < text.length;) {
    const bytes = codePointAt(text, head);
    if (used + bytes > headBytes) break;
    used += bytes;
    head += bytes === 4 ? 2 : 1;
  }
  if (head > 0 && text[head - 1] !== '\n') {
    const nl = text.lastIndexOf('\n', head - 1);
    if (nl >= 0 && (nl + 1) * 2 >= head) head = nl + 1;
  }

  let tail = text.length;
  for (let used = 0; tail > head;) {
    const bytes = codePointBefore(text, tail);
    if (used + bytes > tailBytes) break;
    used += bytes;
    tail -= bytes === 4 ? 2 : 1;
  }
  if (tail < text.length && text[tail - 1] !== '\n') {
    const nl = text.indexOf('\n', tail);
    if (nl >= 0 && (nl + 1 - tail) * 2 <= text.length - tail) tail = nl + 1;
  }
  if (tail <= head) return text;

  const kept = text.slice(0, head);
  const rest = text.slice(tail);
  const marker = omissionMarker(codePointCount(text, head, tail), session, seq);
  const out = `${kept}${kept === '' || kept.endsWith('\n') ? '' : '\n'}${marker}${rest === '' ? '' : '\n'}${rest}`;
  return Buffer.byteLength(out, 'utf8') < Buffer.byteLength(text, 'utf8') ? out : text;
}

/**
 * A user input's or tool output's content with its text capped for `target`. When the text
 * parts together estimate above the cap, they are joined with newlines (as transcript reads
 * render them) and capped as one text in place of the first; images keep their places.
 */
function cappedContent<P extends TextPart | ImagePart | OpaquePart>(content: readonly P[], seq: number, target: ProjectionTarget): ReadonlyArray<P | TextPart> {
  const cap = target.maxOutputTokens;
  if (cap === null) return content;
  const texts: TextPart[] = [];
  for (const p of content) if (p.type === 'text') texts.push(p);
  if (texts.reduce((n, p) => n + textTokens(p.text), 0) <= cap) return content;
  const joined = texts.map((p) => p.text).join('\n');
  const capped = capText(joined, cap, target.session, seq);
  if (capped === joined) return content;
  const out: Array<P | TextPart> = [];
  let placed = false;
  for (const p of content) {
    if (p.type !== 'text') out.push(p);
    else if (!placed) {
      out.push({ type: 'text', text: capped });
      placed = true;
    }
  }
  return out;
}

/**
 * The largest per-item share `c` with sum(min(size, c)) within `cap` (water-filling: what a
 * small item does not use goes to the larger ones), or null when everything fits as it is.
 */
function fairShare(sizes: readonly number[], cap: number | null): number | null {
  if (cap === null || sizes.reduce((n, x) => n + x, 0) <= cap) return null;
  const sorted = [...sizes].sort((a, b) => a - b);
  let budget = cap;
  for (let i = 0; i < sorted.length; i++) {
    const even = Math.floor(budget / (sorted.length - i));
    if (sorted[i]! > even) return even;
    budget -= sorted[i]!;
  }
  return cap;
}

/**
 * A tool call's arguments with their long strings capped, so a call that wrote a large file
 * does not carry the file into every later request (the row keeps the real arguments). When
 * the arguments estimate above the cap, every string leaf gets an equal share of it — shares a
 * short string does not use go to the longer ones — and a leaf over its share is capped like a
 * tool output. Keys (`__proto__` included) and their order are kept; pure and deterministic.
 */
function cappedArguments(args: Record<string, unknown>, seq: number, target: ProjectionTarget): Record<string, unknown> {
  const cap = target.maxOutputTokens;
  // The walks below recurse: over-deep parts (rows stored before the depth bound) become a marker first.
  args = clampJsonDepth(args);
  if (cap === null || textTokens(JSON.stringify(args)) <= cap) return args;
  const sizes: number[] = [];
  const walk = (v: unknown): void => {
    if (typeof v === 'string') sizes.push(textTokens(JSON.stringify(v)));
    else if (Array.isArray(v)) v.forEach(walk);
    else if (typeof v === 'object' && v !== null) Object.values(v).forEach(walk);
  };
  walk(args);
  const share = fairShare(sizes, cap) ?? cap;
  const shrink = (v: unknown): unknown => {
    if (typeof v === 'string') return textTokens(JSON.stringify(v)) > share ? capText(v, share, target.session, seq) : v;
    if (Array.isArray(v)) return v.map(shrink);
    if (typeof v === 'object' && v !== null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, shrink(x)]));
    return v;
  };
  return shrink(args) as Record<string, unknown>;
}

/**
 * An opaque part goes out as it was sent to the wire that wrote it (the proxy maps it back),
 * and as its one-line marker anywhere else.
 */
function opaqueOut(p: OpaquePart, target: ProjectionTarget): OutPart {
  return target.provider === p.wire ? { type: 'opaque', wire: p.wire, data: p.data } : { type: 'text', text: opaqueMarker(p.label) };
}

/** A tool result that answers no call in the request goes out as a user's text, never a result. */
function orphanInputs(body: ToolResultBody, seq: number, target: ProjectionTarget): PlainInput[] {
  const header = `[${body.is_error ? 'error ' : ''}result of tool call ${body.call_id}, which has no matching call]`;
  const content: OutPart[] = cappedContent(body.content, seq, target).map((p) => (p.type === 'text' ? p : imageOut(p, target)));
  const first = content[0];
  if (first?.type === 'text') content[0] = { type: 'text', text: `${header}\n${first.text}` };
  else content.unshift({ type: 'text', text: header });
  return [{ role: 'user', content }];
}

/**
 * The inputs one row contributes on its own, before forModel merges a turn's results and
 * answers its open calls. A stored orphan result already comes out as text here; a result
 * whose call is missing from the rows sent is only known to forModel.
 */
export function rowInputs(row: StoredRow, target: ProjectionTarget): PlainInput[] {
  const body = row.body;
  switch (body.kind) {
    case 'user': {
      const content: OutPart[] = cappedContent(body.content, row.seq, target).map((p) => (p.type === 'text' ? p : p.type === 'opaque' ? opaqueOut(p, target) : imageOut(p, target)));
      if (body.origin !== 'user') content.unshift({ type: 'text', text: `[${body.origin}]` });
      return [{ role: 'user', content }];
    }
    case 'assistant': {
      // Everything the turn wrote that is only history — its text, its calls' arguments, and
      // reasoning text going where its signature cannot — shares the row's output cap. Reasoning
      // sent with its signature goes back exactly as written.
      const parts: OutPart[] = [];
      for (const p of body.content) {
        if (p.type === 'opaque') {
          parts.push(opaqueOut(p, target));
          continue;
        }
        if (p.type !== 'reasoning') {
          parts.push(p);
          continue;
        }
        // Opaque reasoning only goes back where its writer can read it; readable text goes anywhere.
        const provider = p.provider ?? body.provider;
        const text = p.text !== undefined && p.text.length > 0 ? p.text : undefined;
        const carried = p.encrypted !== undefined && encryptedGoesTo(provider, body.model, target) && (REASONING_REQUIRED.has(provider ?? '') || target.maxOutputTokens === null || textTokens(p.encrypted) <= target.maxOutputTokens);
        if (carried) parts.push({ type: 'reasoning', text, encrypted: p.encrypted, provider });
        else if (text !== undefined) parts.push({ type: 'reasoning', text });
      }
      const cappable = (p: OutPart): boolean => p.type === 'text' || p.type === 'tool_call' || (p.type === 'reasoning' && p.encrypted === undefined);
      const share = fairShare(parts.filter(cappable).map((p) => partTokens(p)), target.maxOutputTokens);
      const content = share === null ? parts : parts.map((p): OutPart => {
        if (!cappable(p) || partTokens(p) <= share) return p;
        const part = { ...target, maxOutputTokens: share };
        if (p.type === 'tool_call') return { ...p, arguments: cappedArguments(p.arguments, row.seq, part) };
        if (p.type === 'text') return { type: 'text', text: capText(p.text, share, target.session, row.seq) };
        return p.type === 'reasoning' ? { type: 'reasoning', text: capText(p.text ?? '', share, target.session, row.seq) } : p;
      });
      return content.length === 0 ? [] : [{ role: 'assistant', content }];
    }
    case 'tool_result': {
      if (body.orphan === true) return orphanInputs(body, row.seq, target);
      const parts = cappedContent(body.content, row.seq, target);
      const resultContent: ResultPart[] = parts.filter((p): p is TextPart => p.type === 'text');
      const live: ImagePart[] = [];
      for (const p of parts) {
        if (p.type !== 'image') continue;
        if (p.elided === true || !target.readsImages) resultContent.push(imageOut(p, target));
        else live.push(p);
      }
      if (live.length > 0) resultContent.push({ type: 'text', text: `[${live.length} image(s) follow in the next message]` });
      const out: PlainInput[] = [{ role: 'tool', content: [{ type: 'tool_result', call_id: body.call_id, is_error: body.is_error, content: resultContent }] }];
      if (live.length > 0) {
        out.push({ role: 'user', content: [{ type: 'text', text: `[images from tool result ${body.call_id}]` }, ...live.map((p) => imageOut(p, target))] });
      }
      return out;
    }
    case 'notice': {
      const n = body.body;
      // Image fits only change earlier rows' images; they are not model input themselves.
      if (n.notice === 'image_fit') return [];
      if (n.notice === 'capabilities_changed') return [{ role: 'user', content: [{ type: 'text', text: capabilitiesNote(n.context, n.instructions) }] }];
      if (n.notice === 'excursion') return [{ role: 'user', content: [{ type: 'text', text: `[excursion started on branch ${n.branch}]` }] }];
      return [{ role: 'user', content: [{ type: 'text', text: `[excursion on branch ${n.branch} returned]\n${n.outcome}` }] }];
    }
  }
}

/**
 * A reload's notice as the model reads it. Until the next compaction the system prompt still
 * describes the extensions as they were, so the note says that it replaces that part; a notice
 * that carries instructions (the client's changed while the old prompt stays) replaces those too.
 */
export function capabilitiesNote(context: string, instructions?: string): string {
  const block = context === '' ? '(no context-management extensions are active)' : context;
  if (instructions === undefined) return `[capabilities changed: the context-management part of the system prompt is out of date; from now on it reads]\n${block}`;
  return (
    `[capabilities changed: the system prompt is out of date; from now on its instructions read]\n${instructions === '' ? '(no instructions)' : instructions}\n` +
    `[and its context-management part reads]\n${block}`
  );
}

/**
 * Estimated tokens of one row as projected for `target` (caps and image sizes included). The
 * synthetic answer forModel may add for an open call is not part of any row's estimate.
 */
export function rowTokens(row: StoredRow, target: ProjectionTarget): number {
  return inputsTokens(rowInputs(row, target), target.maxImageEdgePx);
}

/** Smallest share of the output cap a result of a turn with many calls is held to, in tokens. */
const MIN_RESULT_SHARE = 128;

/**
 * The target a result of a turn with `calls` tool calls is projected for: the turn's results
 * share the output cap, so one exchange (a turn with its results, the smallest piece a cut can
 * keep) is bounded however many calls ran in parallel. Depends only on the call row, which
 * never changes, so the bytes stay stable.
 */
function resultTarget(target: ProjectionTarget, calls: number): ProjectionTarget {
  const cap = target.maxOutputTokens;
  if (cap === null || calls <= 1) return target;
  return { ...target, maxOutputTokens: Math.max(Math.min(cap, MIN_RESULT_SHARE), Math.floor(cap / calls)) };
}

/**
 * Per-row estimates for rows in transcript order, agreeing with what `forModel` emits for them
 * (a result is sized with its turn's share of the output cap). Rows it was not built over are
 * sized on their own. `memo` keeps sizes across calls for the same row objects and target
 * (see `targetKey`); `tokenCounterYielding` fills it in slices.
 */
export function tokenCounter(rows: readonly StoredRow[], target: ProjectionTarget, memo: RowMap<number> = new WeakMap<StoredRow, number>(), inputs?: InputsMemo): (row: StoredRow) => number {
  return runSteps(tokenCounterSteps(rows, target, memo, inputs));
}

/** `tokenCounter` in steps of about a thousand rows (see runSteps). */
export function* tokenCounterSteps(rows: readonly StoredRow[], target: ProjectionTarget, memo: RowMap<number> = new WeakMap<StoredRow, number>(), inputs?: InputsMemo): Steps<(row: StoredRow) => number> {
  let calls = 0;
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    sizeInto(memo, row, target, calls = callsBefore(row, calls), inputs);
    if (i % ROWS_PER_STEP === ROWS_PER_STEP - 1) yield;
  }
  return (row) => memo.get(row) ?? rowTokens(row, target);
}

/** Rows sized between two steps: a memoized row costs a lookup, a new one a projection. */
const ROWS_PER_STEP = 1024;

/**
 * A memo by row object: a WeakMap, or the kernel's memo kept on the rows themselves
 * (strategies/harness/row-memo.ts).
 */
export interface RowMap<V> {
  get(row: StoredRow): V | undefined;
  set(row: StoredRow, value: V): unknown;
  has(row: StoredRow): boolean;
}

/**
 * Each row's own inputs for one target (see `targetKey`), kept so that sizing and `forModel`
 * project a row once: a long tail is projected in slices ahead of the request, then only
 * joined. Values are shared: nothing may modify them.
 */
export type InputsMemo = RowMap<PlainInput[]>;

/** `tokenCounter` for a long history: gives the event loop a turn whenever a slice is used up. */
export async function tokenCounterYielding(rows: readonly StoredRow[], target: ProjectionTarget, memo: RowMap<number>, inputs?: InputsMemo): Promise<void> {
  let calls = 0;
  const slice = timeSlicer();
  for (const row of rows) {
    sizeInto(memo, row, target, calls = callsBefore(row, calls), inputs);
    await slice();
  }
}

/** What a row's size depends on besides the row: a memo is valid for one key only. */
export function targetKey(t: ProjectionTarget): string {
  return JSON.stringify([t.session, t.provider, t.model, t.readsImages, t.maxImageEdgePx, t.maxOutputTokens]);
}

/** Calls of the turn a row belongs to: its own if it is an assistant row, else the turn's so far. */
function callsBefore(row: StoredRow, calls: number): number {
  const b = row.body;
  if (b.kind === 'assistant') return b.content.filter((p) => p.type === 'tool_call').length;
  return b.kind === 'user' ? 0 : calls;
}

function sizeInto(memo: RowMap<number>, row: StoredRow, target: ProjectionTarget, calls: number, inputs: InputsMemo | undefined): void {
  if (memo.has(row)) return;
  const b = row.body;
  const t = b.kind === 'tool_result' && b.orphan !== true ? resultTarget(target, calls) : target;
  if (inputs === undefined) {
    memo.set(row, rowTokens(row, t));
    return;
  }
  const own = inputs.get(row) ?? rowInputs(row, t);
  inputs.set(row, own);
  memo.set(row, inputsTokens(own, target.maxImageEdgePx));
}

/**
 * Projects rows in order, so that every call in the request is answered and every result
 * follows its call.
 *
 * An assistant row opens a turn whose open calls are its tool calls. The tool results that
 * follow it (storage settles each result right after its call's row) close their calls and
 * are emitted as tool inputs, consecutive ones merged into one. A result answering no open
 * call of the current turn (its call is not among the rows sent) goes out as user text, like a
 * stored orphan. The next user or assistant row, or the end, closes the turn: each call still
 * open gets a synthetic error result (NO_RESULT_TEXT), appended to the turn's last tool input
 * (right after its real results) or, when none came, as a tool input right after the
 * assistant's. When the real result arrives storage settles it beside the call, so the
 * synthetic one is gone from the next request. Notices inside a turn do not close it.
 */
export function forModel(rows: readonly StoredRow[], target: ProjectionTarget, memo?: InputsMemo): PlainInput[] {
  const projector = new Projector(target, memo);
  for (const row of rows) projector.add(row);
  return projector.finish();
}

/** The turn a projection is in: its calls still unanswered, and where their answers go. */
interface OpenTurn {
  open: string[];
  calls: number;
  /** Where a tool input with the synthetic answers goes when no result came. */
  anchor: number;
  /** The turn's last tool input, which takes the synthetic answers when there is one. */
  lastTool: PlainInput | undefined;
}

/**
 * `forModel` as a fold that can be resumed: rows are added in order, and `snapshot` gives the
 * projection of every row added so far, as forModel would return it for those rows, with its
 * estimated tokens (`inputsTokens` of it) counted as it grew. A long tail is thus projected in
 * slices ahead of a request, and a tail that only grew at its end is extended, not projected
 * again (row-memo.ts keeps one per kernel).
 */
export class Projector {
  private readonly out: PlainInput[] = [];
  private turn: OpenTurn | undefined;
  /** Tokens of every part in `out`, and of the PER_INPUT_TOKENS of its inputs. */
  private tokens = 0;
  /** Rows added, and the first and last of them (how `continues` recognizes its rows). */
  count = 0;
  private first: StoredRow | undefined;
  private last: StoredRow | undefined;

  constructor(
    readonly target: ProjectionTarget,
    private readonly memo?: InputsMemo,
  ) {}

  /**
   * Whether `rows` begin with the rows added so far. Rows are compared by object at both ends
   * only: arrays of history rows are runs of the session's rows in order, shared by object
   * while nothing was rewritten (history-rows.ts), so equal ends mean equal runs.
   */
  continues(rows: readonly StoredRow[]): boolean {
    return this.count <= rows.length && (this.count === 0 || (rows[0] === this.first && rows[this.count - 1] === this.last));
  }

  add(row: StoredRow): void {
    const body = row.body;
    this.first ??= row;
    this.last = row;
    this.count++;
    if (body.kind === 'user' || body.kind === 'assistant') this.closeTurn();
    const turn = this.turn;
    if (body.kind === 'tool_result' && body.orphan !== true) {
      const at = turn === undefined ? -1 : turn.open.indexOf(body.call_id);
      if (turn === undefined || at < 0) {
        for (const input of orphanInputs(body, row.seq, this.target)) this.emit(input);
        return;
      }
      turn.open.splice(at, 1);
      for (const input of this.own(row, resultTarget(this.target, turn.calls))) {
        const holder = this.emit(input);
        if (input.role === 'tool') turn.lastTool = holder;
      }
      return;
    }
    for (const input of this.own(row, this.target)) this.emit(input);
    if (body.kind === 'assistant') {
      const calls = body.content.flatMap((p) => (p.type === 'tool_call' ? [p.id] : []));
      this.turn = { open: calls, calls: calls.length, anchor: this.out.length, lastTool: undefined };
    }
  }

  /** The projection of the rows added so far and its tokens; later adds do not change it. */
  snapshot(): { inputs: PlainInput[]; tokens: number } {
    const inputs = this.out.slice();
    let tokens = this.tokens;
    const turn = this.turn;
    if (turn !== undefined && turn.open.length > 0) {
      const answers = unanswered(turn.open);
      tokens += this.partsTokens(answers);
      if (turn.lastTool !== undefined) {
        // The one input a later row may still change (its turn's next results merge into it):
        // the snapshot gets a copy with the answers, so later rows change neither.
        const at = this.out.lastIndexOf(turn.lastTool);
        inputs[at] = { role: 'tool', content: [...turn.lastTool.content, ...answers] };
      } else {
        inputs.splice(turn.anchor, 0, { role: 'tool', content: answers });
        tokens += PER_INPUT_TOKENS;
      }
    }
    return { inputs, tokens };
  }

  /** The projection, closing the open turn in place: the projector is done after it. */
  finish(): PlainInput[] {
    this.closeTurn();
    return this.out;
  }

  private own(row: StoredRow, t: ProjectionTarget): PlainInput[] {
    const hit = this.memo?.get(row);
    if (hit !== undefined) return hit;
    const computed = rowInputs(row, t);
    this.memo?.set(row, computed);
    return computed;
  }

  private partsTokens(parts: readonly OutPart[]): number {
    let n = 0;
    for (const p of parts) n += partTokens(p, this.target.maxImageEdgePx);
    return n;
  }

  private emit(input: PlainInput): PlainInput {
    this.tokens += this.partsTokens(input.content);
    const last = this.out[this.out.length - 1];
    if (last !== undefined && last.role === 'tool' && input.role === 'tool') {
      last.content.push(...input.content);
      return last;
    }
    const copy = { role: input.role, content: [...input.content] };
    this.out.push(copy);
    this.tokens += PER_INPUT_TOKENS;
    return copy;
  }

  private closeTurn(): void {
    const turn = this.turn;
    this.turn = undefined;
    if (turn === undefined || turn.open.length === 0) return;
    const answers = unanswered(turn.open);
    this.tokens += this.partsTokens(answers);
    if (turn.lastTool !== undefined) turn.lastTool.content.push(...answers);
    else {
      this.out.splice(turn.anchor, 0, { role: 'tool', content: answers });
      this.tokens += PER_INPUT_TOKENS;
    }
  }
}

/** The synthetic error results for calls a turn left open. */
function unanswered(open: readonly string[]): OutPart[] {
  return open.map((id) => ({ type: 'tool_result', call_id: id, is_error: true, content: [{ type: 'text', text: NO_RESULT_TEXT }] }));
}

/**
 * A part as a request that asked for inline images carries it: an image with its base64 bytes
 * attached (inside a tool result too), or the elision text when its payload is gone (elided and
 * collected). Other parts are returned as they are; nothing is mutated.
 */
export function inlinePart(p: OutPart, bytesOf: (hash: string) => Buffer | undefined): OutPart {
  if (p.type === 'image') {
    const data = bytesOf(p.hash);
    return data === undefined ? { type: 'text', text: ELIDED_IMAGE_TEXT } : { ...p, data: data.toString('base64') };
  }
  if (p.type === 'tool_result') return { ...p, content: p.content.map((c) => inlinePart(c, bytesOf)) as typeof p.content };
  return p;
}

/** Copies inputs with every part inlined (inlinePart), each input as {role, content}. */
export function inlineImages(inputs: readonly PlainInput[], bytesOf: (hash: string) => Buffer | undefined): PlainInput[] {
  return inputs.map((i) => ({ role: i.role, content: i.content.map((p) => inlinePart(p, bytesOf)) }));
}
