// A message's bytes as a list of buffers that the transport writes as they are (one writev),
// never joined. A prepare reply with inline images is a megabyte or more, nearly all of it image
// bytes the daemon keeps between replies; joining them into one buffer (and again with the
// JSON-RPC envelope) costs a fresh large allocation and a copy of the whole reply each time.
// Small pieces are still joined as they come: copying a few kilobytes is cheaper than a write
// request per piece.

/** Pieces at least this long stay pieces of their own; shorter runs are joined. */
const KEEP_WHOLE_BYTES = 16 * 1024;

export class ByteChunks {
  /** The total number of bytes, as a Buffer's `length`. */
  readonly length: number;

  constructor(readonly chunks: readonly Buffer[]) {
    let n = 0;
    for (const c of chunks) n += c.length;
    this.length = n;
  }

  /** Byte equality; a piece shared by both sides at the same place is not compared again. */
  equals(other: ByteChunks): boolean {
    if (this.length !== other.length) return false;
    const a = this.chunks;
    const b = other.chunks;
    if (a.length === b.length && a.every((c, i) => c.length === b[i]!.length)) return a.every((c, i) => c === b[i] || c.equals(b[i]!));
    return this.toBuffer().equals(other.toBuffer());
  }

  /** The bytes joined (tests, and the rare reply inside a batch). */
  toBuffer(): Buffer {
    return this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.length);
  }

  toString(encoding: 'utf8' = 'utf8'): string {
    return this.toBuffer().toString(encoding);
  }
}

/** Builds ByteChunks from pieces in order, joining runs of short ones. */
export class ChunkBuilder {
  private readonly chunks: Buffer[] = [];
  private run: Buffer[] = [];
  private runBytes = 0;

  push(piece: Buffer): void {
    if (piece.length < KEEP_WHOLE_BYTES) {
      this.run.push(piece);
      this.runBytes += piece.length;
      return;
    }
    this.closeRun();
    this.chunks.push(piece);
  }

  finish(): ByteChunks {
    this.closeRun();
    return new ByteChunks(this.chunks);
  }

  private closeRun(): void {
    if (this.run.length > 0) this.chunks.push(this.run.length === 1 ? this.run[0]! : Buffer.concat(this.run, this.runBytes));
    this.run = [];
    this.runBytes = 0;
  }
}
