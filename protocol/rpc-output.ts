// The peer's output (rpc-peer.ts): lines queued for the stream and written in order, a chunked
// line in one writev, and the bound on what waits for the other side to read. Replies pile up
// when the other side sends requests and never reads the answers: the socket buffer fills, then
// this queue. Past the bound the peer stops reading and starts no waiting request, so no new
// replies are made; output that stays over the bound for the grace period means the other side
// is not reading at all, and the connection is closed.
import type { Duplex } from 'node:stream';
import { ByteChunks } from './byte-chunks.ts';
import type { OutLine } from './rpc-message.ts';

/** Default bound on queued output per peer, in bytes. */
export const DEFAULT_MAX_QUEUED_OUTPUT_BYTES = 16 * 1024 * 1024;

export interface OutputOptions {
  /** The bound, in bytes; never below the stream's own buffer. */
  maxBytes?: number;
  /** How long output may stay over the bound before the stream is destroyed (ms). */
  slowReaderGraceMs?: number;
  /** Called once when the stream is destroyed for staying over the bound. */
  onSlowReader?: (queuedBytes: number) => void;
  /** After every flush, with the bound checked: the peer starts waiting requests, reads or ends. */
  afterFlush: () => void;
}

export class OutputQueue {
  private readonly lines: OutLine[] = [];
  /** UTF-8 bytes of the lines queued. */
  private lineBytes = 0;
  /** UTF-8 bytes of replies made and not yet queued (see RpcPeer's HeldReply). */
  private heldBytes = 0;
  private waitingDrain = false;
  /** Bytes handed to the stream so far. */
  private handed = 0;
  /** Runs while output is over the bound; destroys the stream when it fires. */
  private slowReaderTimer: NodeJS.Timeout | undefined;
  readonly maxBytes: number;

  constructor(
    private readonly stream: Duplex,
    private readonly opts: OutputOptions,
  ) {
    // Never below the stream's own buffer: past that a write returns false, so a 'drain' comes
    // to re-check the bound and resume reading.
    this.maxBytes = Math.max(stream.writableHighWaterMark, opts.maxBytes ?? DEFAULT_MAX_QUEUED_OUTPUT_BYTES);
  }

  /** Output not yet taken by the other side: replies made, this queue and the stream's buffer, in bytes. */
  get queuedBytes(): number {
    return this.heldBytes + this.lineBytes + this.stream.writableLength;
  }

  get over(): boolean {
    return this.queuedBytes > this.maxBytes;
  }

  /** Bytes the stream has taken and not yet written out. */
  get unwritten(): number {
    return this.stream.writableLength;
  }

  /** Bytes handed to the stream so far. */
  get handedOver(): number {
    return this.handed;
  }

  /** Everything queued is in the stream. */
  get empty(): boolean {
    return !this.waitingDrain && this.lines.length === 0;
  }

  /** A reply made and not yet queued counts against the bound from now on. */
  hold(bytes: number): void {
    this.heldBytes += bytes;
  }

  release(bytes: number): void {
    this.heldBytes -= bytes;
  }

  push(line: OutLine): void {
    this.lines.push(line);
    this.lineBytes += line.length;
    this.flush();
  }

  flush(): void {
    if (this.stream.destroyed) return;
    while (!this.waitingDrain && this.lines.length > 0) {
      const line = this.lines.shift()!;
      this.lineBytes -= line.length;
      if (!this.write(line)) {
        this.waitingDrain = true;
        this.stream.once('drain', () => {
          this.waitingDrain = false;
          this.flush();
        });
      }
    }
    this.watch();
    this.opts.afterFlush();
  }

  /** The stream closed: no timer outlives it. */
  stop(): void {
    clearTimeout(this.slowReaderTimer);
  }

  /** One line into the stream; a chunked one corked, so its pieces go in one writev. False when the stream is full. */
  private write(line: OutLine): boolean {
    this.handed += line.length;
    if (!(line instanceof ByteChunks)) return this.stream.write(line);
    this.stream.cork();
    let room = true;
    for (const c of line.chunks) room = this.stream.write(c);
    this.stream.uncork();
    return room;
  }

  /** Starts the slow-reader timer when output goes over the bound, and stops it when it is back under. */
  private watch(): void {
    const over = this.over;
    if (over && this.slowReaderTimer === undefined && !this.stream.destroyed) {
      this.slowReaderTimer = setTimeout(() => {
        this.slowReaderTimer = undefined;
        if (!this.over) return;
        this.opts.onSlowReader?.(this.queuedBytes);
        this.stream.destroy();
      }, this.opts.slowReaderGraceMs ?? 30_000);
      this.slowReaderTimer.unref();
    } else if (!over && this.slowReaderTimer !== undefined) {
      clearTimeout(this.slowReaderTimer);
      this.slowReaderTimer = undefined;
    }
  }
}
