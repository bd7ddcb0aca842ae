// A database wrapper that records the SQL of every statement execution, so a test can prove
// what a reader did (and did not) read, and which of them ran in autocommit mode (outside any
// transaction). Behaviour under test lives in the test files.
import type { Db } from '../../storage/db.ts';

export function recordingDb(db: Db): { db: Db; executed: string[]; autocommit: string[] } {
  const executed: string[] = [];
  const autocommit: string[] = [];
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
  return { db: proxied, executed, autocommit };
}
