// The lcm-memory tools as RPC methods: views of a session's lcm summary tree and the rows under
// it (storage/state/lcm-read.ts), which change nothing but lcm_grep's index of summaries (it indexes
// those of its session that idle time has not indexed yet). They run in the session's transcript lane, like
// transcript_read, so a page never mixes the states before and after a settle that moves rows
// and node ranges together, and none of them waits behind a prepare's model call.
import { describeNode, expandNode, grepTree, listNodes } from '../../storage/state/lcm-read.ts';
import type { Handler } from '../context.ts';

export const lcmList: Handler<'lcm_list'> = (params, { daemon }) => daemon.kernels.run(params.session, () => listNodes(daemon.db, params), 'transcript');

export const lcmGrep: Handler<'lcm_grep'> = (params, { daemon }) => daemon.kernels.run(params.session, () => grepTree(daemon.db, params, daemon.search.searches), 'transcript');

export const lcmDescribe: Handler<'lcm_describe'> = (params, { daemon }) => daemon.kernels.run(params.session, () => describeNode(daemon.db, params), 'transcript');

export const lcmExpand: Handler<'lcm_expand'> = (params, { daemon }) => daemon.kernels.run(params.session, () => expandNode(daemon.db, params), 'transcript');
