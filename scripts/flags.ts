// Command-line flags of the scripts (bench, stress): `--flag value` and `--flag=value`, read in
// order. What each flag means stays with its script; this only splits and checks.

export interface Flag {
  /** The flag as typed, without an inline `=value`. */
  name: string;
  /** The whole argument, for error messages. */
  raw: string;
  /** The flag's value: inline after `=`, else the next argument; fails with the usage when missing. */
  value: () => string;
}

export function* eachFlag(argv: readonly string[], usage: string): Generator<Flag> {
  for (let i = 0; i < argv.length; i++) {
    const raw = argv[i]!;
    const eq = raw.indexOf('=');
    const name = eq < 0 ? raw : raw.slice(0, eq);
    const inline = eq < 0 ? undefined : raw.slice(eq + 1);
    yield {
      name,
      raw,
      value: () => {
        const v = inline ?? argv[++i];
        if (v === undefined) throw new Error(`${name} needs a value\n${usage}`);
        return v;
      },
    };
  }
}

/** A comma list of names, each one of `known` (`what` names them in the error). */
export function namesFrom<T extends string>(list: string, known: readonly T[], what: string): T[] {
  const names = list.split(',').filter((s) => s !== '');
  for (const n of names) if (!(known as readonly string[]).includes(n)) throw new Error(`unknown ${what} "${n}" (known: ${known.join(', ')})`);
  return names as T[];
}
