// Nesting depth of JSON values (tool-call arguments, tool schemas): the bound checked where such
// values enter, and a depth-safe copy for values stored before the bound existed. Both walk with
// an explicit stack, never recursion, so no depth can overflow the call stack here. JSON.stringify
// and recursive walks elsewhere are safe on anything that passed through `clampJsonDepth`.

/** Deepest nesting of objects and arrays a JSON value may have; the value itself is level 1. */
export const MAX_JSON_DEPTH = 64;

/** What stands in for an object or array nested deeper than the limit in a clamped copy. */
export function depthMarker(limit: number = MAX_JSON_DEPTH): string {
  return `[nested deeper than ${limit} levels]`;
}

type Container = Record<string, unknown> | unknown[];

function isContainer(v: unknown): v is Container {
  return typeof v === 'object' && v !== null;
}

/** Own enumerable members of a container, as JSON.stringify visits them (`__proto__` included). */
function members(v: Container): Array<[string | number, unknown]> {
  return Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
}

/**
 * Whether `value` nests at most `limit` levels: tooDeepPath's question without the path, which
 * every request's tool schemas and every appended tool call ask. Values only (Object.values
 * reads an own `__proto__` member as JSON.parse made it), no [key, value] pair per member and
 * no frame per container: the walk with paths cost a sizeable share of a nothing-due prepare.
 */
function nestsWithin(value: Container, limit: number): boolean {
  const values: Container[] = [value];
  const depths: number[] = [1];
  for (let v = values.pop(); v !== undefined; v = values.pop()) {
    const depth = depths.pop()!;
    if (depth > limit) return false;
    const members: readonly unknown[] = Array.isArray(v) ? v : Object.values(v);
    for (const child of members) {
      if (isContainer(child)) {
        values.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return true;
}

/**
 * The path (keys and indexes from the value's root) of the first object or array nested deeper
 * than `limit` levels, or null when there is none. Visits each member at most once and never
 * descends past level limit + 1, so the path is at most limit keys long.
 */
export function tooDeepPath(value: unknown, limit: number = MAX_JSON_DEPTH): Array<string | number> | null {
  if (!isContainer(value) || nestsWithin(value, limit)) return null;
  interface Frame {
    value: Container;
    depth: number;
    key: string | number;
    parent: Frame | null;
  }
  const stack: Frame[] = [{ value, depth: 1, key: '', parent: null }];
  for (let frame = stack.pop(); frame !== undefined; frame = stack.pop()) {
    if (frame.depth > limit) {
      const path: Array<string | number> = [];
      for (let f: Frame | null = frame; f !== null && f.parent !== null; f = f.parent) path.push(f.key);
      return path.reverse();
    }
    for (const [key, child] of members(frame.value)) {
      if (isContainer(child)) stack.push({ value: child, depth: frame.depth + 1, key, parent: frame });
    }
  }
  return null;
}

/**
 * `value` itself when it nests at most `limit` levels; otherwise a copy in which every object or
 * array at level limit + 1 is replaced by `depthMarker(limit)`. Keys, their order and
 * `__proto__` keys are kept (members are defined, never assigned). Pure.
 */
export function clampJsonDepth<T>(value: T, limit: number = MAX_JSON_DEPTH): T {
  if (tooDeepPath(value, limit) === null) return value;
  const marker = depthMarker(limit);
  const emptyLike = (v: Container): Container => (Array.isArray(v) ? [] : {});
  const root = emptyLike(value as Container);
  const stack: Array<{ from: Container; to: Container; depth: number }> = [{ from: value as Container, to: root, depth: 1 }];
  for (let frame = stack.pop(); frame !== undefined; frame = stack.pop()) {
    for (const [key, child] of members(frame.from)) {
      let copy: unknown = child;
      if (isContainer(child)) {
        if (frame.depth + 1 > limit) copy = marker;
        else {
          copy = emptyLike(child);
          stack.push({ from: child, to: copy as Container, depth: frame.depth + 1 });
        }
      }
      if (Array.isArray(frame.to)) frame.to.push(copy);
      else Object.defineProperty(frame.to, key, { value: copy, writable: true, enumerable: true, configurable: true });
    }
  }
  return root as T;
}

/** JSON.stringify of `value` with over-deep parts as markers: never throws on depth. */
export function stringifyJson(value: unknown): string {
  return JSON.stringify(clampJsonDepth(value));
}
