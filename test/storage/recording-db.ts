// A database wrapper that records the SQL of every statement execution and the rows each
// statement handed back, so a test can prove what a reader did (and did not) read, and which of
// them ran in autocommit mode (outside any transaction). Behaviour under test lives in the test
// files.
import type { Db } from '../../storage/db.ts';

export function recordingDb(db: Db): { db: Db; executed: string[]; autocommit: string[]; returned: Map<string, number> } {
  const executed: string[] = [];
  const autocommit: string[] = [];
  /** Rows each statement handed back through `all` and `iterate`, by its SQL. */
  const returned = new Map<string, number>();
  const count = (sql: string, n: number): void => void returned.set(sql, (returned.get(sql) ?? 0) + n);
  const wrapStatement = (stmt: object & { source: string }): object => {
    const proxy: object = new Proxy(stmt, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          if (prop === 'all' || prop === 'get' || prop === 'iterate' || prop === 'run') {
            executed.push(target.source);
            if (!db.inTransaction) autocommit.push(target.source);
          }
          const r: unknown = (value as (...a: unknown[]) => unknown).apply(target, args);
          if (prop === 'all' && Array.isArray(r)) count(target.source, r.length);
          if (prop === 'iterate') {
            return (function* counted() {
              for (const row of r as Iterable<unknown>) {
                count(target.source, 1);
                yield row;
              }
            })();
          }
          // Builder methods (pluck, raw, ...) return the statement: keep handing out the proxy.
          return r === target ? proxy : r;
        };
      },
    });
    return proxy;
  };
  const proxied = new Proxy(db, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (prop === 'prepare') return (sql: string) => wrapStatement(target.prepare(sql));
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { db: proxied, executed, autocommit, returned };
}

/**
 * The `synchronous` level (0 OFF, 1 NORMAL, 2 FULL) each write statement whose SQL mentions
 * `table` ran at, from now on: what a test of a write made without an fsync looks at. Only
 * statements prepared after the call are seen (a fresh connection's statement memos).
 */
export function recordWriteLevels(db: Db, table: string): number[] {
  const levels: number[] = [];
  const prepare = db.prepare.bind(db);
  db.prepare = ((source: string) => {
    const st = prepare(source);
    if (!source.includes(table) || st.reader) return st;
    const run = st.run.bind(st);
    st.run = (...args: unknown[]) => {
      levels.push(db.pragma('synchronous', { simple: true }) as number);
      return run(...args);
    };
    return st;
  }) as typeof db.prepare;
  return levels;
}
