// Part of section `frames`: what an unchanged archive costs a request. Two sessions get the same
// rows; one is compacted by rolling, the other by snapcompact (both forced, so their tails are
// cut by the same rule), then prepares with nothing due are timed in alternation. The second
// snapcompact prepare must render no frame (the cache has them all) and cost within 1.2x of
// rolling's. Then the same, with each prepare's reply encoded as the daemon sends it to a client
// that asked for inline images (the frames' PNG bytes in base64), also judged within 1.2x.
import fs from 'node:fs';
import path from 'node:path';
import { ExtensionsFile, type ConfigSnapshot } from '../../daemon/config.ts';
import { BUILTIN_SET } from '../../strategies/index.ts';
import { engineSetup } from '../../daemon/engine-setup.ts';
import { encodePrepareReply } from '../../daemon/prepare-reply.ts';
import { openDb } from '../../storage/db.ts';
import { getPayload } from '../../storage/images/payloads.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { loadCatalog } from '../../strategies/catalog/models.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';
import { prepareRequest, type PrepareArgs } from '../../strategies/prepare.ts';
import type { Corpus } from './corpus.ts';
import { agentPrompt } from './prepare.ts';
import { RowStream } from './rows.ts';
import { nowMs, stats, type Stats } from './timing.ts';

export const SNAP_PREPARE_TARGET = 1.2;
const WINDOW = 200_000;
const MODEL = 'claude-sonnet-4-5';

export interface SnapPrepare {
  rows: number;
  frames_shown: number;
  frames_rendered_second: number;
  snapcompact: Stats;
  rolling: Stats;
  ratio: number;
  /** Prepare plus its reply encoded with inline images, both sides. */
  inline_reply?: { snapcompact: Stats; rolling: Stats; ratio: number; reply_bytes: { snapcompact: number; rolling: number } };
}

function config(strategy: string): ConfigSnapshot {
  return {
    modules: BUILTIN_SET,
    extensions: ExtensionsFile.parse({ [strategy]: { contextWindowTokens: WINDOW, tailPercent: 5 }, extensions: { enable: [strategy] }, summarizer: { provider: 'extractive' } }),
    models: loadCatalog(),
    version: 1,
  };
}

export async function benchSnapPrepare(tmp: string, corpus: Corpus, rows: number, log: (s: string) => void, runs = 31): Promise<SnapPrepare> {
  const dir = fs.mkdtempSync(path.join(tmp, 'snap-prepare-'));
  const db = openDb(path.join(dir, 'albedo.db'));
  try {
    const make = async (name: string, strategy: string) => {
      const s = openSession(db, { session: name });
      const stream = new RowStream(corpus, { keyPrefix: name, idTag: name });
      let head = 0;
      for (let done = 0; done < rows; done += 1000) head = (await appendRows(db, name, stream.take(Math.min(1000, rows - done)))).head;
      const setup = engineSetup({ db, config: config(strategy), configErrors: [], sid: s.sid, modelId: MODEL, conn: undefined, env: {} });
      const { instructions, tools } = agentPrompt();
      const cache = new KernelCache();
      const args = (force: boolean): PrepareArgs => ({ db, session: { sid: s.sid, name }, head, instructions, tools, force, focus: undefined, cache, signal: undefined });
      const first = await prepareRequest(setup, args(true));
      if (!first.compacted) throw new Error(`${strategy} did not compact the bench session: ${first.reason ?? ''}`);
      return { setup, args, first };
    };
    const snap = await make('snap', 'snapcompact');
    const roll = await make('roll', 'rolling');
    const framesStored = () => db.prepare<[], number>('SELECT count(*) FROM snapcompact_frames').pluck().get() ?? 0;
    const before = framesStored();
    const second = await prepareRequest(snap.setup, snap.args(false));
    const rendered = framesStored() - before;
    await prepareRequest(roll.setup, roll.args(false));
    const inlineImages = (hash: string) => getPayload(db, hash)?.data;
    const bytes = { snapcompact: 0, rolling: 0 };
    const time = async (x: typeof snap, reply?: 'snapcompact' | 'rolling') => {
      const t0 = nowMs();
      const p = await prepareRequest(x.setup, x.args(false));
      if (reply !== undefined) {
        const result = { prepared_id: 'bench', head: x.args(false).head, system: p.system, inputs: p.inputs, tools: p.tools, compacted: p.compacted, observation: p.observation };
        bytes[reply] = encodePrepareReply(result, { inlineImages }).length;
      }
      return nowMs() - t0;
    };
    const a: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < runs; i++) {
      a.push(await time(snap));
      b.push(await time(roll));
    }
    const ra: number[] = [];
    const rb: number[] = [];
    for (let i = 0; i < runs; i++) {
      ra.push(await time(snap, 'snapcompact'));
      rb.push(await time(roll, 'rolling'));
    }
    const shown = second.inputs.filter((i) => i.content.some((p) => p.type === 'image')).length;
    const inline_reply = { snapcompact: stats(ra), rolling: stats(rb), ratio: stats(ra).median_ms / stats(rb).median_ms, reply_bytes: bytes };
    const out = { rows, frames_shown: shown, frames_rendered_second: rendered, snapcompact: stats(a), rolling: stats(b), ratio: stats(a).median_ms / stats(b).median_ms, inline_reply };
    log(`  snapcompact prepare with an unchanged archive (${shown} frames, ${rendered} rendered): ${out.snapcompact.median_ms.toFixed(2)} ms vs rolling ${out.rolling.median_ms.toFixed(2)} ms = ${out.ratio.toFixed(2)}x`);
    log(
      `  the same with the reply encoded, images inline (${(bytes.snapcompact / 2 ** 20).toFixed(2)} MiB vs ${(bytes.rolling / 2 ** 20).toFixed(2)} MiB): ${inline_reply.snapcompact.median_ms.toFixed(2)} ms vs rolling ${
        inline_reply.rolling.median_ms.toFixed(2)
      } ms = ${inline_reply.ratio.toFixed(2)}x`,
    );
    return out;
  } finally {
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function judgeSnapPrepare(r: SnapPrepare | undefined): Array<{ target: string; measured: string; pass: boolean }> {
  if (r === undefined) return [];
  return [
    { target: 'frames: a second prepare with an unchanged archive renders no frame', measured: `${r.frames_rendered_second} rendered (${r.frames_shown} shown)`, pass: r.frames_rendered_second === 0 && r.frames_shown > 0 },
    {
      target: `frames: that prepare within ${SNAP_PREPARE_TARGET}x of a rolling prepare of the same tail`,
      measured: `${r.ratio.toFixed(2)}x (${r.snapcompact.median_ms.toFixed(2)} / ${r.rolling.median_ms.toFixed(2)} ms)`,
      pass: r.ratio <= SNAP_PREPARE_TARGET,
    },
    ...(r.inline_reply === undefined
      ? []
      : [
        {
          target: `frames: that prepare with its inline-image reply encoded within ${SNAP_PREPARE_TARGET}x of rolling's`,
          measured: `${r.inline_reply.ratio.toFixed(2)}x (${r.inline_reply.snapcompact.median_ms.toFixed(2)} / ${r.inline_reply.rolling.median_ms.toFixed(2)} ms)`,
          pass: r.inline_reply.ratio <= SNAP_PREPARE_TARGET,
        },
      ]),
  ];
}
