// What every verb shares: where output goes, whether it is coloured, and how a failure becomes
// a message and an exit code. Verbs return a Report (the JSON value and its terminal text);
// only this module decides which of the two is printed.

/** Exit codes: the daemon answered no (or is unreachable), or the command line was wrong. */
export const EXIT_OK = 0;
export const EXIT_REFUSED = 1;
export const EXIT_USAGE = 2;

export interface Io {
  stdout: { write(s: string): unknown; isTTY?: boolean; columns?: number };
  stderr: { write(s: string): unknown; isTTY?: boolean; columns?: number };
  env: NodeJS.ProcessEnv;
}

/** A failure the user can act on: what went wrong and, when we know it, how to fix it. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT_REFUSED,
    readonly hint?: string,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export class UsageError extends CliError {
  constructor(message: string, hint?: string) {
    super(message, EXIT_USAGE, hint);
    this.name = 'UsageError';
  }
}

/** What a verb produced: the JSON value for --json, the text for a terminal, its exit code. */
export interface Report {
  json: unknown;
  text: string;
  exitCode?: number;
}

const CODES = {
  bold: [1, 22],
  dim: [2, 22],
  red: [31, 39],
  green: [32, 39],
  yellow: [33, 39],
  blue: [34, 39],
  magenta: [35, 39],
  cyan: [36, 39],
  grey: [90, 39],
} as const;
export type StyleName = keyof typeof CODES;
export type Style = Record<StyleName, (s: string) => string>;

/** ANSI styles, or identity functions when colour is off. */
export function makeStyle(on: boolean): Style {
  const out = {} as Style;
  for (const [name, [open, close]] of Object.entries(CODES) as Array<[StyleName, readonly [number, number]]>) {
    out[name] = on ? (s) => `\u001b[${open}m${s}\u001b[${close}m` : (s) => s;
  }
  return out;
}

/**
 * Colour only for a terminal, and never when NO_COLOR is set to anything non-empty (no-color.org).
 * FORCE_COLOR=1 turns it on without a terminal, for pagers that pass colour through.
 */
export function colourWanted(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '' && env.FORCE_COLOR !== '0') return true;
  return stream.isTTY === true && env.TERM !== 'dumb';
}

export class Output {
  readonly style: Style;
  readonly errStyle: Style;

  constructor(
    readonly io: Io,
    readonly json: boolean,
  ) {
    this.style = makeStyle(!json && colourWanted(io.stdout, io.env));
    this.errStyle = makeStyle(colourWanted(io.stderr, io.env));
  }

  /** Terminal width for bars and tables; 80 when not a terminal. */
  get columns(): number {
    return this.io.stdout.isTTY === true && typeof this.io.stdout.columns === 'number' ? this.io.stdout.columns : 80;
  }

  report(r: Report): number {
    this.io.stdout.write(this.json ? `${JSON.stringify(r.json, null, 2)}\n` : r.text === '' ? '' : `${r.text}\n`);
    return r.exitCode ?? EXIT_OK;
  }

  /** Progress and side notes: stderr, so stdout stays the command's output. */
  note(s: string): void {
    this.io.stderr.write(`${s}\n`);
  }

  error(err: CliError): number {
    const s = this.errStyle;
    if (this.json) {
      this.io.stderr.write(`${JSON.stringify({ error: { message: err.message, exit_code: err.exitCode, hint: err.hint ?? null } })}\n`);
    } else {
      this.io.stderr.write(`${s.red('albedo:')} ${err.message}\n${err.hint === undefined ? '' : `${s.dim(err.hint)}\n`}`);
    }
    return err.exitCode;
  }
}

/**
 * 12,345. By hand rather than toLocaleString: its first call loads ICU's locale data, a
 * noticeable part of a CLI run that should take little more than Node's own start.
 */
export function n(x: number): string {
  const [int = '', frac] = String(Math.abs(x)).split('.');
  const grouped = int.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${x < 0 ? '-' : ''}${grouped}${frac === undefined ? '' : `.${frac}`}`;
}

/** "3 min ago", for timestamps in ms since the epoch. */
/** A byte count the way people read it: 512 B, 3.4 KB, 12.0 MB (powers of 1024). */
export function bytes(x: number): string {
  if (x < 1024) return `${x} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = x / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

export function ago(at: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - at) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86_400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86_400)} d ago`;
}
