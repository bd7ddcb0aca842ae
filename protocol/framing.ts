// NDJSON framing: splits a byte stream into UTF-8 lines with a per-line byte cap (writing a line
// is JSON.stringify plus "\n"), and hands lines that are not valid UTF-8 on apart, undecoded; long
// lines may be handed on as bytes instead of decoded. It knows nothing of JSON-RPC; parsing lines and
// answering an overflow or a bad line are the peer's job (rpc-peer.ts).
import { isUtf8 } from 'node:buffer';

/** Default cap on one line, in bytes (the "\n" is not counted; a "\r" before it is). */
export const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024;

const NEWLINE = 0x0a;
const CR = 0x0d;

export interface LineDecoderOptions {
  /** Called with each complete valid UTF-8 line, decoded, without "\n" or a trailing "\r". */
  onLine: (line: string) => void;
  /**
   * When given, called instead of onLine with each valid line over `bytesLineAbove` bytes, as
   * bytes: decoding a long line whole costs more than parsing it from its bytes (json-bytes.ts).
   * The buffer may share memory with pushed chunks.
   */
  onBytesLine?: (line: Buffer) => void;
  /** Lines longer than this, in bytes, go to onBytesLine when it is given. Default 0. */
  bytesLineAbove?: number;
  /** Called once per line whose bytes exceed the cap, as soon as they do; that line is dropped. */
  onOverflow: (bytesSeen: number) => void;
  /**
   * Called instead of onLine with each complete line that is not valid UTF-8, as bytes (they may
   * share memory with pushed chunks). Decoding it anyway would replace the bad bytes with U+FFFD
   * and hand on text the sender never wrote; the receiver only reads enough to answer it.
   */
  onInvalidUtf8: (line: Buffer) => void;
  /** Cap on one line, in bytes. Default DEFAULT_MAX_LINE_BYTES. */
  maxLineBytes?: number;
}

/**
 * Incremental line splitter. A partial line is kept as a list of chunk slices plus a running
 * byte count, and only each new chunk is searched for "\n", so a long line arriving in many
 * small chunks costs linear time. Pushed buffers are sliced, not copied: do not reuse them.
 */
export class LineDecoder {
  readonly maxLineBytes: number;
  private readonly onLine: (line: string) => void;
  private readonly onOverflow: (bytesSeen: number) => void;
  private readonly onInvalidUtf8: (line: Buffer) => void;
  private readonly onBytesLine: ((line: Buffer) => void) | undefined;
  private readonly bytesLineAbove: number;
  private parts: Buffer[] = [];
  private length = 0;
  /** True while dropping the rest of an over-long line, up to its newline. */
  private discarding = false;

  constructor(opts: LineDecoderOptions) {
    this.onLine = opts.onLine;
    this.onOverflow = opts.onOverflow;
    this.onInvalidUtf8 = opts.onInvalidUtf8;
    this.maxLineBytes = opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this.onBytesLine = opts.onBytesLine;
    this.bytesLineAbove = opts.bytesLineAbove ?? 0;
  }

  /** Bytes of the partial line held so far (0 between lines and while discarding). */
  get bufferedBytes(): number {
    return this.length;
  }

  /** Drops the partial line held so far; the next byte starts a new line. */
  clear(): void {
    this.parts = [];
    this.length = 0;
    this.discarding = false;
  }

  push(chunk: Buffer): void {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(NEWLINE, start);
      const end = nl === -1 ? chunk.length : nl;
      if (!this.discarding && this.length + (end - start) > this.maxLineBytes) {
        const seen = this.length + (end - start);
        this.parts = [];
        this.length = 0;
        this.discarding = true;
        this.onOverflow(seen);
      }
      if (this.discarding) {
        if (nl === -1) return;
        this.discarding = false;
      } else if (nl === -1) {
        this.parts.push(chunk.subarray(start));
        this.length += chunk.length - start;
        return;
      } else {
        this.emit(chunk.subarray(start, nl));
      }
      start = nl + 1;
    }
  }

  private emit(tail: Buffer): void {
    const line = this.length === 0 ? tail : Buffer.concat([...this.parts, tail], this.length + tail.length);
    this.parts = [];
    this.length = 0;
    const stop = line.length > 0 && line[line.length - 1] === CR ? line.length - 1 : line.length;
    // Checked on the whole line, never per chunk: a character may be split across chunks.
    const bytes = line.subarray(0, stop);
    if (!isUtf8(bytes)) this.onInvalidUtf8(bytes);
    else if (this.onBytesLine !== undefined && stop > this.bytesLineAbove) this.onBytesLine(bytes);
    else this.onLine(line.toString('utf8', 0, stop));
  }
}
