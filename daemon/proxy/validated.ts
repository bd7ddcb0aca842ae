// A request body checked against its wire's schema with its history one element at a time.
// body-memo.ts hands out the same parsed objects for the history an agent sends again, so
// each element object keeps its validated copy: only what the history gained is validated, and
// the conversation a request yields is made of the same objects as the one before (reconcile's
// comparison with the previous request then stops at identity).
import type { z } from 'zod';

/** Where a body failed its schema: the path from the body's root, and why. */
export interface BodyIssue {
  path: PropertyKey[];
  message: string;
}

export type Checked<B> = { data: B } | { issue: BodyIssue };

function firstIssue(error: z.ZodError, prefix: PropertyKey[]): BodyIssue {
  const issue = error.issues[0];
  return { path: [...prefix, ...(issue?.path ?? [])], message: issue?.message ?? 'invalid' };
}

/**
 * The body as `envelope` (the wire's schema with its history member taken as unknown elements)
 * and each history element as `element`, validated once per element object. Returns the body
 * with its history replaced by the validated elements, in the envelope's key order.
 */
export class HistoryChecker<B extends Record<string, unknown>, E> {
  private readonly seen = new WeakMap<object, E>();

  constructor(
    private readonly envelope: z.ZodType<Record<string, unknown>>,
    private readonly key: string,
    private readonly element: z.ZodType<E>,
  ) {}

  check(json: unknown): Checked<B> {
    const env = this.envelope.safeParse(json);
    if (!env.success) return { issue: firstIssue(env.error, []) };
    const items = env.data[this.key];
    // The envelope and the elements together are the wire's whole schema: the body is a B.
    if (!Array.isArray(items)) return { data: env.data as B };
    const history: E[] = [];
    for (let i = 0; i < items.length; i++) {
      const raw: unknown = items[i];
      const known = typeof raw === 'object' && raw !== null ? this.seen.get(raw) : undefined;
      if (known !== undefined) {
        history.push(known);
        continue;
      }
      const r = this.element.safeParse(raw);
      if (!r.success) return { issue: firstIssue(r.error, [this.key, i]) };
      if (typeof raw === 'object' && raw !== null) this.seen.set(raw, r.data);
      history.push(r.data);
    }
    return { data: { ...env.data, [this.key]: history } as B };
  }
}
