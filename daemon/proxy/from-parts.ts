// The wire shapes a proxied request's history goes out in, made once from the projection's
// parts. The projection hands out the same part objects for the same rows on every request
// (strategies/projection.ts), and parts never change; so a wire block or message made from a
// list of parts is the same for as long as those parts are, and it is kept beside the first of
// them. Kept shapes are marked with keepJson, so that the outgoing body's encoder reuses their
// bytes too (protocol/kept-json.ts): only what the history gained is built and encoded again.
import { keepJson } from '../../protocol/kept-json.ts';

/** No value: a part list that makes nothing on this wire (a reasoning part another provider wrote). */
const NOTHING = Symbol('nothing');

interface Entry<R> {
  parts: readonly object[];
  value: R | typeof NOTHING;
}

/**
 * Values made from part lists by one builder, kept per list of part objects. Whatever uses a
 * kept value must copy it to change it: the value and everything in it are shared between
 * requests, and their JSON bytes are kept.
 */
export class FromParts<R extends object> {
  private readonly byFirst = new WeakMap<object, Entry<R>>();

  /**
   * The value `build` makes of `parts`, made once for these very objects. `build` calls
   * `volatile` when its value depends on more than the parts (an image whose payload is gone):
   * that value is not kept.
   */
  get(parts: readonly object[], build: (volatile: () => void) => R | null): R | null {
    const first = parts[0];
    if (first === undefined) return build(() => undefined);
    const e = this.byFirst.get(first);
    if (e !== undefined && e.parts.length === parts.length && e.parts.every((p, i) => p === parts[i])) return e.value === NOTHING ? null : e.value;
    let keep = true;
    const value = build(() => {
      keep = false;
    });
    if (keep) this.byFirst.set(first, { parts: parts.length === 1 ? [first] : [...parts], value: value === null ? NOTHING : keepJson(value) });
    return value;
  }
}
