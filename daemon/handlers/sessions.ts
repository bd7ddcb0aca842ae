// Session lifecycle methods: open, list, delete, fork and excursion return. Mutations of a
// session run on its kernel queue; the storage functions do the work in one transaction each.
import { deleteSession, findSession, listSessions, openSession } from '../../storage/sessions.ts';
import { forkSession, returnFromExcursion } from '../../storage/transcript.ts';
import type { Handler } from '../context.ts';

export const sessionOpen: Handler<'session.open'> = (params, { daemon }) => {
  const opened = openSession(daemon.db, params);
  return { session: opened.session, created: opened.created };
};

export const sessionList: Handler<'session.list'> = (_params, { daemon }) => ({
  sessions: listSessions(daemon.db),
});

export const sessionDelete: Handler<'session.delete'> = (params, { daemon }) =>
  daemon.kernels.run(params.session, () => {
    const deleted = deleteSession(daemon.db, params.session);
    daemon.kernels.forget(params.session);
    return { deleted };
  });

export const sessionFork: Handler<'session.fork'> = (params, { daemon }) =>
  daemon.kernels.run(params.session, () => {
    const forked = forkSession(daemon.db, params.session, {
      at: params.at,
      branch: params.branch,
      excursion: params.excursion,
    });
    daemon.scheduleIndexing();
    return { session: forked.session, rows: forked.rows, marker_seq: forked.marker_seq };
  });

/** The outcome is written to the parent, so the parent's queue serializes it. */
export const sessionReturn: Handler<'session.return'> = (params, { daemon }) => {
  const parent = findSession(daemon.db, params.branch)?.parent ?? params.branch;
  return daemon.kernels.run(parent, () => {
    const done = returnFromExcursion(daemon.db, params.branch, params.outcome);
    daemon.scheduleIndexing();
    return done;
  });
};
