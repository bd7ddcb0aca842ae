// The prepare reply as UTF-8 JSON, assembled from pieces encoded once. A prepared request is
// mostly the history its predecessor also carried, and the projection hands out the same part
// objects for the same rows (strategies/projection.ts keeps them per row in the kernel), so each
// part's bytes are kept beside it (protocol/kept-json.ts) and only new parts, the system
// prompt, the tools and the observation are serialized per reply. Stringifying and
// UTF-8-encoding the whole request again was most of a warm prepare's own time.
//
// Parts are never changed once projected (everything downstream copies what it alters), which
// is what makes their bytes safe to keep; the output is byte-identical to JSON.stringify of
// the result, which the tests check.
//
// With inline images, an image part's JSON carries its payload in base64 (snapcompact's frames:
// tens of kilobytes each, the same frames on every request until the archive grows). Those
// bytes are kept by the part's JSON without data, which names the payload by hash: bytes under
// a hash never change, so a kept image is neither read from storage nor encoded again. The
// reply comes back as ByteChunks: a kept image's bytes are handed to the socket as they are,
// not copied into one buffer per reply.
import { ByteChunks, ChunkBuilder } from '../protocol/byte-chunks.ts';
import { keptBytes } from '../protocol/kept-json.ts';
import type { Result } from '../protocol/methods.ts';
import type { OutPart } from '../protocol/prepared.ts';
import { inlineImages, inlinePart } from '../strategies/projection.ts';
import { TextKeyedMap } from './text-keyed-map.ts';

type PrepareResult = Result<'prepare'>;

/**
 * Long texts built afresh for every request (the running summary, the notes, the system prompt
 * are read from storage each time, so their objects are new but their text is not), by content:
 * the lookup hashes the string once and compares it on a hit, far cheaper than escaping and
 * encoding it again. Bounded in bytes, oldest first out.
 */
const LONG_TEXT_CHARS = 1024;

/**
 * One kind of JSON per cache (a text part's, a bare string's, an inlined image's), by a text
 * that determines it. Keyed through TextKeyedMap: the texts are new strings on every request,
 * and a Map hashing each whole was most of the lookup's cost.
 */
class JsonCache {
  private readonly entries = new TextKeyedMap<Buffer>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  find(key: string): Buffer | undefined {
    return this.entries.get(key);
  }

  get(key: string, json: () => string): Buffer {
    let b = this.entries.get(key);
    if (b !== undefined) return b;
    b = Buffer.from(json());
    const displaced = this.entries.set(key, b);
    if (displaced !== undefined) this.bytes -= displaced.value.length + 2 * displaced.text.length;
    this.bytes += b.length + 2 * key.length;
    while (this.bytes > this.maxBytes) {
      const oldest = this.entries.shift();
      if (oldest === undefined) break;
      this.bytes -= oldest.value.length + 2 * oldest.text.length;
    }
    return b;
  }
}

const textParts = new JsonCache(2 * 2 ** 20);
const systemPrompts = new JsonCache(2 ** 20);
/** Sized for one session's inline frames (60 at up to ~64 KB of base64) with room to spare. */
const inlinedImages = new JsonCache(8 * 2 ** 20);

function isLongText(part: object): part is { type: 'text'; text: string } {
  const p = part as { type?: unknown; text?: unknown };
  if (p.type !== 'text' || typeof p.text !== 'string' || p.text.length < LONG_TEXT_CHARS) return false;
  const keys = Object.keys(part);
  return keys.length === 2 && keys[0] === 'type' && keys[1] === 'text';
}

function partJson(part: object): Buffer {
  // Small pieces share Node's pool slabs; the parts of a kernel's history are dropped together.
  return keptBytes(part, isLongText(part) ? () => textParts.get(part.text, () => JSON.stringify({ type: 'text', text: part.text })) : undefined);
}

const COMMA = Buffer.from(',');
const INPUT_END = Buffer.from(']}');
const TOOLS_KEY = Buffer.from('],"tools":');

/** Reads a payload's bytes by hash; undefined when it is gone. */
export type ImageBytes = (hash: string) => Buffer | undefined;

/** Each image part's JSON as a string: the key its inlined JSON is kept under, per part object. */
const imageKeys = new WeakMap<object, string>();

/** An image part with its bytes (inlinePart), kept while its payload was there to inline. */
function inlinedImageJson(part: Extract<OutPart, { type: 'image' }>, bytesOf: ImageBytes): Buffer {
  let key = imageKeys.get(part);
  if (key === undefined) imageKeys.set(part, key = partJson(part).toString());
  const kept = inlinedImages.find(key);
  if (kept !== undefined) return kept;
  const inlined = inlinePart(part, bytesOf);
  // A payload that is gone reads as the elision text, which is not kept: the bytes may return.
  if (inlined.type !== 'image') return Buffer.from(JSON.stringify(inlined));
  return inlinedImages.get(key, () => JSON.stringify(inlined));
}

/** A part's JSON with its images inlined, as inlinePart makes it, pushed in pieces. */
function pushInlined(out: ChunkBuilder, part: OutPart, bytesOf: ImageBytes): void {
  if (part.type === 'image') {
    out.push(inlinedImageJson(part, bytesOf));
    return;
  }
  if (part.type !== 'tool_result' || !part.content.some((c) => c.type === 'image')) {
    out.push(partJson(part));
    return;
  }
  // A tool result holding images: its own fields once, then each piece of its content. Its
  // content must be its last key (as the projection makes it) for the pieces to go at the end.
  const keys = Object.keys(part);
  if (keys[keys.length - 1] !== 'content') {
    out.push(Buffer.from(JSON.stringify(inlinePart(part, bytesOf))));
    return;
  }
  out.push(Buffer.from(JSON.stringify({ ...part, content: [] }).slice(0, -2)));
  part.content.forEach((c, j) => {
    if (j > 0) out.push(COMMA);
    out.push(c.type === 'image' ? inlinedImageJson(c, bytesOf) : partJson(c));
  });
  out.push(INPUT_END);
}

/** Whether `input` has exactly the own keys role and content, in that order: the shape the projection makes. */
function projectedShape(input: object): boolean {
  // A key walk, not Object.keys: a reply has an input per message, and the array per input
  // was a tenth of what a nothing-due prepare allocated.
  let n = 0;
  for (const k in input) {
    if (!Object.hasOwn(input, k) || k !== (n === 0 ? 'role' : n === 1 ? 'content' : undefined)) return false;
    n += 1;
  }
  return n === 2;
}

/** `{"role":…,"content":[` by role: a handful of roles open every input of every reply. */
const INPUT_OPENINGS = new Map<string, Buffer>();

function inputOpening(role: string): Buffer {
  let b = INPUT_OPENINGS.get(role);
  if (b === undefined) {
    b = Buffer.from(`{"role":${JSON.stringify(role)},"content":[`);
    if (INPUT_OPENINGS.size < 16) INPUT_OPENINGS.set(role, b);
  }
  return b;
}

function pushInputs(out: ChunkBuilder, inputs: PrepareResult['inputs'], bytesOf: ImageBytes | undefined): void {
  inputs.forEach((input, i) => {
    if (i > 0) out.push(COMMA);
    // Only the shape the projection makes ({role, content}, in that order) is assembled here;
    // anything else is serialized whole, so the bytes always equal JSON.stringify's. Inlining
    // makes every input that shape (inlineImages).
    if (bytesOf === undefined && !projectedShape(input)) {
      out.push(Buffer.from(JSON.stringify(input)));
      return;
    }
    out.push(inputOpening(input.role));
    input.content.forEach((part, j) => {
      if (j > 0) out.push(COMMA);
      if (bytesOf === undefined) out.push(partJson(part));
      else pushInlined(out, part, bytesOf);
    });
    out.push(INPUT_END);
  });
}

export interface ReplyOptions {
  /** Images go out with their bytes (`prepare {images: "inline"}`), read through this when not kept. */
  inlineImages?: ImageBytes | undefined;
}

/**
 * JSON.stringify(result) as UTF-8, for a result whose keys are in the order the prepare handler
 * writes them (prepared_id, head, system, inputs, tools, compacted, observation). With
 * `inlineImages`, the bytes are those of the result with its inputs through inlineImages
 * (strategies/projection.ts).
 */
export function encodePrepareReply(result: PrepareResult, opts: ReplyOptions = {}): ByteChunks {
  const bytesOf = opts.inlineImages;
  const keys = Object.keys(result);
  if (keys.join(',') !== 'prepared_id,head,system,inputs,tools,compacted,observation') {
    return new ByteChunks([Buffer.from(JSON.stringify(bytesOf === undefined ? result : { ...result, inputs: inlineImages(result.inputs, bytesOf) }))]);
  }
  const out = new ChunkBuilder();
  out.push(Buffer.from(`{"prepared_id":${JSON.stringify(result.prepared_id)},"head":${JSON.stringify(result.head)},"system":`));
  out.push(systemPrompts.get(result.system, () => JSON.stringify(result.system)));
  out.push(Buffer.from(',"inputs":['));
  pushInputs(out, result.inputs, bytesOf);
  out.push(TOOLS_KEY);
  // The tools are the session's kept list while they stay the same (strategies/prepare.ts).
  out.push(keptBytes(result.tools));
  out.push(Buffer.from(`,"compacted":${JSON.stringify(result.compacted)},"observation":${JSON.stringify(result.observation)}}`));
  return out.finish();
}
