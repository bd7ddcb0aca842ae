// The peer's input (rpc-peer.ts): stream chunks cut into lines and parsed, each line handed on
// as one JSON value with the raw tokens of its ids, and this connection's share of the bound on
// unfinished lines that all connections share. A line too long to decode whole is parsed from
// its bytes; a line that is not valid UTF-8 is parsed around the bad bytes, so each message in
// it can be answered under its own id. What a value means is the peer's business.
import { DEFAULT_MAX_LINE_BYTES, LineDecoder } from './framing.ts';
import { parseMarked } from './invalid-utf8.ts';
import { JSON_BYTES_THRESHOLD, parseJsonBytesWithTokens, type ParsedJsonBytes } from './json-bytes.ts';
import { topLevelMemberTokens } from './json-tokens.ts';
import type { PartialLineBudget } from './line-budget.ts';
import { hasNumberId } from './rpc-message.ts';

export interface InputOptions {
  /** Cap on one line, in bytes. Default DEFAULT_MAX_LINE_BYTES. */
  maxLineBytes?: number;
  /** Shared with other peers: a bound on all their unfinished lines together. */
  partialLineBudget?: PartialLineBudget;
  /** Whether lines are still wanted; asked before each one (the peer may close mid-chunk). */
  reading: () => boolean;
  /**
   * One parsed line; `idTokens` as topLevelMemberTokens gives them (found for number ids only).
   * `marker`, for a line that was not valid UTF-8, is what stands in its text for the bad bytes.
   */
  onValue: (value: unknown, idTokens: Array<string | undefined>, marker?: string) => void;
  /** A line that is not JSON. */
  onParseError: () => void;
  /** A line over `limit` bytes: the rest of it is dropped. */
  onTooLong: (limit: number) => void;
  /** This chunk took all connections' unfinished lines over the shared bound (`maxBytes`); what it held is dropped. */
  onOverBudget: (maxBytes: number) => void;
}

export class InputReader {
  private readonly decoder: LineDecoder;
  /** Our share of opts.partialLineBudget, in bytes. */
  private share = 0;
  private receivedBytes = 0;

  constructor(private readonly opts: InputOptions) {
    const limit = opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this.decoder = new LineDecoder({
      maxLineBytes: limit,
      onLine: (line) => this.onLine(line),
      // A line decoded whole past this would be a fresh large-object string (json-bytes.ts).
      bytesLineAbove: JSON_BYTES_THRESHOLD,
      onBytesLine: (line) => this.onBytesLine(line),
      onInvalidUtf8: (line) => this.onInvalidUtf8Line(line),
      onOverflow: () => {
        if (opts.reading()) opts.onTooLong(limit);
      },
    });
  }

  /** Cuts a chunk into lines and hands each on, then settles this connection's share of the bound. */
  push(chunk: Buffer): void {
    this.receivedBytes += chunk.length;
    this.decoder.push(chunk);
    this.account();
  }

  /** Bytes of a line begun and not yet ended. */
  get partialBytes(): number {
    return this.decoder.bufferedBytes;
  }

  /** Bytes pushed so far. */
  get received(): number {
    return this.receivedBytes;
  }

  /**
   * Keeps our share of the shared budget equal to what the decoder holds; once lines are no
   * longer wanted, drops them and gives the share back (the peer calls it again at close).
   */
  account(): void {
    const budget = this.opts.partialLineBudget;
    if (budget === undefined) return;
    if (!this.opts.reading()) this.decoder.clear();
    const held = this.decoder.bufferedBytes;
    if (budget.update(this.share, held)) {
      this.share = held;
      return;
    }
    this.decoder.clear();
    budget.update(this.share, 0);
    this.share = 0;
    this.opts.onOverBudget(budget.maxBytes);
  }

  private onLine(line: string): void {
    if (!this.opts.reading() || line === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      this.opts.onParseError();
      return;
    }
    // The raw id tokens cost a scan of the line, so only lines with a number id pay it.
    this.opts.onValue(value, hasNumberId(value) ? topLevelMemberTokens(line, 'id') : []);
  }

  /** A line too long to decode whole: parsed from its bytes, its id tokens found by the same scan. */
  private onBytesLine(line: Buffer): void {
    if (!this.opts.reading()) return;
    let parsed: ParsedJsonBytes;
    try {
      parsed = parseJsonBytesWithTokens(line, 'id');
    } catch {
      this.opts.onParseError();
      return;
    }
    this.opts.onValue(parsed.value, parsed.tokens);
  }

  /**
   * A line that is not valid UTF-8. Its text is never used; but when it is JSON apart from those
   * bytes, each message in it is answered under its own id with the member that holds them, so
   * a client with several requests in flight learns which one failed. Otherwise a parse error.
   */
  private onInvalidUtf8Line(line: Buffer): void {
    if (!this.opts.reading()) return;
    const marked = parseMarked(line);
    if (marked === undefined) {
      this.opts.onParseError();
      return;
    }
    this.opts.onValue(marked.value, hasNumberId(marked.value) ? topLevelMemberTokens(marked.text, 'id') : [], marked.marker);
  }
}
