// A bound across connections on the bytes of lines still arriving (partial lines). Each line is
// capped on its own (framing.ts), but many connections each holding a long unfinished line add
// up; peers that share one budget report their partial bytes after every chunk. What to do with
// a connection that would go over it is the peer's choice (rpc-peer.ts).

export class PartialLineBudget {
  /** Bytes of partial lines held by all holders together. */
  private held = 0;

  /** @param maxBytes bound on all partial lines together, in bytes */
  constructor(readonly maxBytes: number) {}

  get heldBytes(): number {
    return this.held;
  }

  /**
   * Moves one holder's share from `before` to `after` bytes. A growth that would take the total
   * over maxBytes is refused (false) and changes nothing; shrinking always succeeds.
   */
  update(before: number, after: number): boolean {
    const next = this.held - before + after;
    if (after > before && next > this.maxBytes) return false;
    this.held = next;
    return true;
  }
}
