// Session lifecycle methods: open, list, delete, fork and excursion return. Mutations of a
// session run on its kernel queue; the storage functions do the work in one transaction each,
// whose fsync is owed and paid off the event loop before the reply (storage/db.ts commitOwed).
import { commitOwed, durable } from '../../storage/db.ts';
import { inheritChoices } from '../../storage/log/extension-choices.ts';
import { inheritLastPrompt } from '../../storage/log/prepared-requests.ts';
import { deleteSession, findSession, listSessions, openSession, requireSession } from '../../storage/transcript/sessions.ts';
import { forkSession, returnFromExcursion } from '../../storage/transcript/write.ts';
import { forkStrategyState } from '../../strategies/fork-state.ts';
import type { Handler } from '../context.ts';

export const sessionOpen: Handler<'session.open'> = async (params, { daemon }) => {
  const opened = commitOwed(daemon.db, () => openSession(daemon.db, params));
  await durable(daemon.db);
  return { session: opened.session, created: opened.created };
};

export const sessionList: Handler<'session.list'> = (_params, { daemon }) => ({
  sessions: listSessions(daemon.db),
});

export const sessionDelete: Handler<'session.delete'> = (params, { daemon }) =>
  daemon.kernels.run(params.session, async () => {
    const deleted = commitOwed(daemon.db, () => deleteSession(daemon.db, params.session));
    await durable(daemon.db);
    daemon.kernels.forget(params.session);
    daemon.summarizeRoutes.forgetSession(params.session);
    return { deleted };
  }, 'all');

/**
 * The branch inherits the parent's extension choices and last prompt, and each strategy copies
 * what of its state the branch keeps, in the same transaction as the copy of its rows
 * (forkSession's own transaction nests as a savepoint), so no branch is ever visible with rows
 * but without its strategy.
 */
export const sessionFork: Handler<'session.fork'> = (params, { daemon }) =>
  daemon.kernels.run(params.session, async () => {
    const { db } = daemon;
    const forked = commitOwed(db, () => {
      const done = forkSession(db, params.session, {
        at: params.at,
        branch: params.branch,
        excursion: params.excursion,
      });
      const parent = requireSession(db, params.session).sid;
      // A branch keeps its strategy and can size its prompt before its first prepare.
      inheritChoices(db, parent, done.sid);
      inheritLastPrompt(db, parent, done.sid);
      forkStrategyState(db, { sid: parent }, { sid: done.sid }, Object.values(daemon.config().modules.strategies));
      return done;
    });
    await durable(db);
    daemon.rowsAdded();
    return { session: forked.session, rows: forked.rows, marker_seq: forked.marker_seq };
  }, 'transcript');

/** The outcome is written to the parent, so the parent's transcript lane serializes it. */
export const sessionReturn: Handler<'session.return'> = (params, { daemon }) => {
  const parent = findSession(daemon.db, params.branch)?.parent ?? params.branch;
  return daemon.kernels.run(parent, async () => {
    const done = commitOwed(daemon.db, () => returnFromExcursion(daemon.db, params.branch, params.outcome));
    await durable(daemon.db);
    daemon.rowsAdded();
    return done;
  }, 'transcript');
};
