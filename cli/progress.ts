// A one-line progress bar on stderr for long verbs (`albedo import` of a large file): drawn only
// on a terminal, never for --json, redrawn in place with a carriage return, and erased when the
// work ends so the verb's own output follows on a clean line.

/** Files smaller than this import without a bar (they take well under a second). */
export const PROGRESS_MIN_BYTES = 4 * 1024 * 1024;
/** Redraws at most this often, in ms (the last state is always drawn). */
const REDRAW_MS = 100;

export interface ProgressStream {
  write(s: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/**
 * Whether to draw a bar for work over `bytes`. ALBEDO_PROGRESS=always draws one whatever the
 * stream and size (for tests, and for terminals reached through a pipe), =never draws none;
 * otherwise only on a terminal and for files of PROGRESS_MIN_BYTES or more. --json never has one.
 */
export function progressWanted(stream: ProgressStream, env: NodeJS.ProcessEnv, opts: { json: boolean; bytes: number }): boolean {
  if (opts.json) return false;
  const mode = env.ALBEDO_PROGRESS ?? '';
  if (mode === 'always') return true;
  if (mode === 'never') return false;
  return stream.isTTY === true && env.TERM !== 'dumb' && opts.bytes >= PROGRESS_MIN_BYTES;
}

function mb(bytes: number): string {
  return (bytes / (1024 * 1024)).toFixed(1);
}

export class ProgressBar {
  private lastDraw = -Infinity;
  private drawn = false;

  /** `now` (ms) is injectable for tests. */
  constructor(
    private readonly stream: ProgressStream,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** One line: label, bar, percent, MB done of MB total, and a detail (rows stored). */
  static line(label: string, done: number, total: number, detail: string, columns: number): string {
    const share = total <= 0 ? 1 : Math.min(1, Math.max(0, done / total));
    const pct = `${Math.floor(share * 100)}%`.padStart(4);
    const tail = ` ${pct} ${mb(done)}/${mb(total)} MB${detail === '' ? '' : ` ${detail}`}`;
    const width = Math.max(10, Math.min(40, columns - label.length - tail.length - 4));
    const full = Math.round(share * width);
    return `${label} [${'#'.repeat(full)}${'.'.repeat(width - full)}]${tail}`;
  }

  /** Draws `done` of `total` bytes unless a state was drawn under REDRAW_MS ago; `force` draws anyway. */
  update(label: string, done: number, total: number, detail = '', force = false): void {
    const t = this.now();
    if (!force && t - this.lastDraw < REDRAW_MS) return;
    this.lastDraw = t;
    const columns = typeof this.stream.columns === 'number' && this.stream.columns > 0 ? this.stream.columns : 80;
    // \r back to the line's start, the line cut to the terminal, then erase what an older, longer line left.
    this.stream.write(`\r${ProgressBar.line(label, done, total, detail, columns).slice(0, columns - 1)}\u001b[K`);
    this.drawn = true;
  }

  /** Erases the bar; the line is free for what the verb prints next. Idempotent. */
  end(): void {
    if (this.drawn) this.stream.write('\r\u001b[K');
    this.drawn = false;
  }
}
