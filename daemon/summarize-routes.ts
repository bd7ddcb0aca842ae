// Which connection writes a session's `client` summaries: the agent connection that last
// prepared the session and declared `summarize`. A /compact from any other connection (a CLI)
// borrows it while it is open. Choosing the backend is engine.ts's; sending the request the peer's.
import type { ConnectionState } from './context.ts';

export class SummarizeRoutes {
  private readonly bySession = new Map<string, ConnectionState>();

  /** A `prepare` for `session` from `conn`: remembered when `conn` answers summarize, else ignored. */
  notePrepare(session: string, conn: ConnectionState): void {
    if (conn.canSummarize) this.bySession.set(session, conn);
  }

  /**
   * The connection to ask for `session`'s client summaries on behalf of `caller`: the caller
   * itself when it answers summarize, else the remembered agent connection while its stream is
   * open, else none.
   */
  route(session: string, caller: ConnectionState): ConnectionState | undefined {
    if (caller.canSummarize) return caller;
    const agent = this.bySession.get(session);
    return agent !== undefined && agent.peer?.state === 'open' ? agent : undefined;
  }

  /** Forgets every session `conn` was remembered for; called when it closes. */
  forgetConnection(conn: ConnectionState): void {
    for (const [session, c] of this.bySession) if (c === conn) this.bySession.delete(session);
  }

  /** Forgets a deleted session. */
  forgetSession(session: string): void {
    this.bySession.delete(session);
  }
}
