// The prepare reply as UTF-8 JSON, assembled from pieces encoded once. A prepared request is
// mostly the history its predecessor also carried, and the projection hands out the same part
// objects for the same rows (strategies/projection.ts keeps them per row in the kernel), so each
// part's bytes are kept beside it and only new parts, the system prompt, the tools and the
// observation are serialized per reply. Stringifying and UTF-8-encoding the whole request again
// was most of a warm prepare's own time (a 100 KB request: ~1.3 ms and ~0.9 ms of ~1.7 ms).
//
// Parts are never changed once projected (everything downstream copies what it alters), which
// is what makes their bytes safe to keep; the output is byte-identical to JSON.stringify of
// the result, which the tests check.
import type { Result } from '../protocol/methods.ts';

type PrepareResult = Result<'prepare'>;

/** Each part's JSON bytes, for as long as the part object lives. */
const partBytes = new WeakMap<object, Buffer>();

/**
 * Long texts built afresh for every request (the running summary, the notes, the system prompt
 * are read from storage each time, so their objects are new but their text is not), by content:
 * the lookup hashes the string once and compares it on a hit, far cheaper than escaping and
 * encoding it again. Bounded in bytes, oldest first out.
 */
const LONG_TEXT_CHARS = 1024;

/** One kind of JSON per cache (a text part's, a bare string's), keyed by the text it holds. */
class TextJsonCache {
  private readonly entries = new Map<string, Buffer>();
  private bytes = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly json: (text: string) => string,
  ) {}

  get(text: string): Buffer {
    let b = this.entries.get(text);
    if (b !== undefined) return b;
    b = Buffer.from(this.json(text));
    this.entries.set(text, b);
    this.bytes += b.length + 2 * text.length;
    for (const [k, v] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(k);
      this.bytes -= v.length + 2 * k.length;
    }
    return b;
  }
}

const textParts = new TextJsonCache(2 * 2 ** 20, (text) => JSON.stringify({ type: 'text', text }));
const systemPrompts = new TextJsonCache(2 ** 20, (text) => JSON.stringify(text));

function isLongText(part: object): part is { type: 'text'; text: string } {
  const p = part as { type?: unknown; text?: unknown };
  if (p.type !== 'text' || typeof p.text !== 'string' || p.text.length < LONG_TEXT_CHARS) return false;
  const keys = Object.keys(part);
  return keys.length === 2 && keys[0] === 'type' && keys[1] === 'text';
}

function partJson(part: object): Buffer {
  let b = partBytes.get(part);
  if (b === undefined) {
    // Small pieces share Node's pool slabs; the parts of a kernel's history are dropped together.
    b = isLongText(part) ? textParts.get(part.text) : Buffer.from(JSON.stringify(part));
    partBytes.set(part, b);
  }
  return b;
}

const COMMA = Buffer.from(',');
const INPUT_END = Buffer.from(']}');

function pushInputs(out: Buffer[], inputs: PrepareResult['inputs']): void {
  inputs.forEach((input, i) => {
    if (i > 0) out.push(COMMA);
    // Only the shape the projection makes ({role, content}, in that order) is assembled here;
    // anything else is serialized whole, so the bytes always equal JSON.stringify's.
    const keys = Object.keys(input);
    if (keys.length !== 2 || keys[0] !== 'role' || keys[1] !== 'content') {
      out.push(Buffer.from(JSON.stringify(input)));
      return;
    }
    out.push(Buffer.from(`{"role":${JSON.stringify(input.role)},"content":[`));
    input.content.forEach((part, j) => {
      if (j > 0) out.push(COMMA);
      out.push(partJson(part));
    });
    out.push(INPUT_END);
  });
}

/**
 * JSON.stringify(result) as UTF-8, for a result whose keys are in the order the prepare handler
 * writes them (prepared_id, head, system, inputs, tools, compacted, observation).
 */
export function encodePrepareReply(result: PrepareResult): Buffer {
  const keys = Object.keys(result);
  if (keys.join(',') !== 'prepared_id,head,system,inputs,tools,compacted,observation') return Buffer.from(JSON.stringify(result));
  const out: Buffer[] = [
    Buffer.from(`{"prepared_id":${JSON.stringify(result.prepared_id)},"head":${JSON.stringify(result.head)},"system":`),
    systemPrompts.get(result.system),
    Buffer.from(',"inputs":['),
  ];
  pushInputs(out, result.inputs);
  out.push(Buffer.from(`],"tools":${JSON.stringify(result.tools)},"compacted":${JSON.stringify(result.compacted)},"observation":${JSON.stringify(result.observation)}}`));
  return Buffer.concat(out);
}
