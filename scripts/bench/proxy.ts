// Section proxy: what the provider-compatible proxy adds to an agent's request, on each wire
// (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses), at a history of about 100k
// tokens with nothing due. One scripted upstream (proxy-peers.ts) answers three paths to it:
// - direct: the client calls the upstream itself (the anchor for time);
// - bare: through a bare pass-through proxy that parses and re-serializes the body (the anchor
//   for CPU: any proxy that touches the body pays that much);
// - pipe: through a proxy that streams the body on unread (the floor for time: the extra hop);
// - proxy: through the built daemon's proxy (bin/albedod.js, as `npm start` runs it).
// The client sends what an agent sends: the whole history each time, the previous answer sent
// back and one new prompt, over keep-alive connections. Measured, in alternating blocks of the
// same run: time to the first streamed byte, the proxy's CPU a request against the bare
// proxy's, a ~1 MiB streamed answer end to end, and the daemon's resident set over 1,000
// requests. The run checks what it measured was the nothing-due path: no compaction, no fork.
import http from 'node:http';
import type { Corpus } from './corpus.ts';
import { buildDist } from './build-dist.ts';
import { rssOf } from './memory.ts';
import { PROXY_WIRES, WireConversation, type ProxyWire } from './proxy-conversation.ts';
import { BIG_ANSWER_CHARS, startBareProxy, startBenchUpstream, startPipeProxy, type Peer } from './proxy-peers.ts';
import { startReplayDaemon, type ReplayDaemon } from '../replay/daemon.ts';
import { fmtBytes, fmtMs, nowMs, processCpuMs, stats, type Stats } from './timing.ts';

/** The history each conversation starts with, in characters of text (~100k tokens). */
const HISTORY_CHARS = 400_000;
/** The rolling window: far above the history, so nothing is due for the whole section. */
const WINDOW_TOKENS = 400_000;

const PROXY_TARGETS = {
  /** Proxy's median time to first byte within this times direct's, plus `ttfbSlackMs`. */
  ttfbRatio: 1.2,
  ttfbSlackMs: 5,
  /** Daemon CPU a request within this times the bare pass-through proxy's. */
  cpuRatio: 2,
  /** A ~1 MiB streamed answer, end to end, within this times direct. */
  bigRatio: 1.1,
  /**
   * The resident set's lowest sample over the last half of the 1,000 requests within this of
   * its lowest over the first half (the first sample left out): the baseline the collector
   * comes back to does not grow. Single samples swing by a collection's worth either way.
   */
  rssGrowth: 1.1,
} as const;

export interface ProxyWireResult {
  wire: ProxyWire;
  model: string;
  /** The request body at the first timed request, and the history's estimate (bytes / 4). */
  body_bytes: number;
  history_tokens: number;
  /** Time to the first byte of the answer, each path. */
  ttfb: { proxy: Stats; direct: Stats; bare: Stats; pipe: Stats };
  /** The whole answer (short), each path. */
  total: { proxy: Stats; direct: Stats };
  /** CPU a request: the daemon's over the proxied requests, the bare proxy's over its own. */
  /**
   * CPU a request over all blocks, and `ratio`, the median over the blocks of the daemon's CPU
   * over the bare proxy's in the same block (a burst of load on the shared machine then moves
   * one block, not the verdict).
   */
  cpu_ms: { proxy: number; bare: number; ratio: number; block_ratios: number[] };
  /** The ~1 MiB streamed answer, end to end; `bare` and `pipe` through those proxies. */
  big: { answer_bytes: number; proxy: Stats; direct: Stats; bare: Stats; pipe: Stats; ratio: number };
  /** The daemon's resident set every 100 requests over `requests` proxied requests. */
  memory: { requests: number; rss_bytes: number[] };
  /** What the daemon said at the end: the nothing-due path held. */
  check: { compactions: number; forks: number; sessions: number; provider_input_tokens: number | null };
}

export interface ProxyResult {
  upstream_note: string;
  wires: ProxyWireResult[];
}

interface Sent {
  ttfb: number;
  total: number;
  bytes: number;
}

/** One POST; times the first byte of the answer and its end. Refuses a non-200. */
function send(url: URL, headers: Record<string, string>, body: Buffer, agent: http.Agent): Promise<Sent> {
  return new Promise((resolve, reject) => {
    const t0 = nowMs();
    let ttfb = -1;
    let bytes = 0;
    const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', ...headers, 'content-length': String(body.length) } }, (res) => {
      res.on('data', (c: Buffer) => {
        if (ttfb < 0) ttfb = nowMs() - t0;
        bytes += c.length;
      });
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`${url.pathname}: ${res.statusCode}`));
        else resolve({ ttfb, total: nowMs() - t0, bytes });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The four ways to the upstream for one wire. */
interface Paths {
  proxy: URL;
  bare: URL;
  pipe: URL;
  direct: URL;
}

/** The upstream and the two anchor proxies in front of it. */
interface Anchors {
  upstream: Peer;
  bare: Peer;
  pipe: Peer;
}

function pathsFor(wire: ProxyWire, conv: WireConversation, peers: Anchors, base: { anthropic: string; openai: string }): Paths {
  const up = wire === 'anthropic' ? conv.path : `/v1${conv.path}`;
  return {
    proxy: new URL(`${wire === 'anthropic' ? base.anthropic : base.openai}${conv.path}`),
    bare: new URL(`${peers.bare.url}${up}`),
    pipe: new URL(`${peers.pipe.url}${up}`),
    direct: new URL(`${peers.upstream.url}${up}`),
  };
}

/** CPU time of a process, or a clear error: the section needs /proc. */
function cpuMs(pid: number): number {
  const v = processCpuMs(pid);
  if (v === undefined) throw new Error(`cannot read /proc/${pid}/stat`);
  return v;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Waits until the process spends at most 2% of a core for a whole second (its idle-time work,
 * indexing and merging what the warm-up stored, is done), 60 s at most; answers how long it took.
 */
async function settle(pid: number): Promise<number> {
  const t0 = nowMs();
  while (nowMs() - t0 < 60_000) {
    const c0 = cpuMs(pid);
    await sleep(1_000);
    if (cpuMs(pid) - c0 <= 20) break;
  }
  return nowMs() - t0;
}

async function benchWire(
  wire: ProxyWire,
  d: ReplayDaemon,
  peers: Anchors,
  base: { anthropic: string; openai: string },
  corpus: Corpus,
  opts: { blocks: number; perBlock: number; memoryRequests: number; bigRuns: number },
  log: (s: string) => void,
): Promise<ProxyWireResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const conv = new WireConversation(wire, corpus, HISTORY_CHARS, `${wire}-main`);
    const paths = pathsFor(wire, conv, peers, base);
    const { bare } = peers;
    const viaProxy = async (): Promise<Sent> => {
      const r = await send(paths.proxy, conv.headers, conv.body(), agent);
      conv.advance();
      return r;
    };
    // The first request stores the whole history; a few more warm the session's kernel.
    const t0 = nowMs();
    await viaProxy();
    log(`  proxy ${wire}: first request (the whole history stored) ${fmtMs(nowMs() - t0)}, body ${fmtBytes(conv.last.length)}`);
    for (let i = 0; i < 5; i++) await viaProxy();
    // The stored history's indexing and merging are the first request's, not the timed ones'.
    const quietAfter = await settle(d.pid);
    log(`  proxy ${wire}: the daemon was quiet ${fmtMs(quietAfter)} after the warm-up`);
    const bodyBytes = conv.body().length;

    const ttfb = { proxy: [] as number[], direct: [] as number[], bare: [] as number[], pipe: [] as number[] };
    const total = { proxy: [] as number[], direct: [] as number[] };
    const cpu = { proxy: [] as number[], bare: [] as number[] };
    for (let i = 0; i < 3; i++) {
      await send(paths.direct, conv.headers, conv.last, agent);
      await send(paths.bare, conv.headers, conv.last, agent);
      await send(paths.pipe, conv.headers, conv.last, agent);
    }
    for (let b = 0; b < opts.blocks; b++) {
      // The daemon's CPU is read from the start of its block to the start of the next one,
      // so that work a request leaves for idle time is counted with it.
      const c0 = cpuMs(d.pid);
      for (let i = 0; i < opts.perBlock; i++) {
        const r = await viaProxy();
        ttfb.proxy.push(r.ttfb);
        total.proxy.push(r.total);
      }
      const body = conv.body();
      const b0 = cpuMs(bare.pid);
      for (let i = 0; i < opts.perBlock; i++) ttfb.bare.push((await send(paths.bare, conv.headers, body, agent)).ttfb);
      cpu.bare.push(cpuMs(bare.pid) - b0);
      for (let i = 0; i < opts.perBlock; i++) ttfb.pipe.push((await send(paths.pipe, conv.headers, body, agent)).ttfb);
      for (let i = 0; i < opts.perBlock; i++) {
        const r = await send(paths.direct, conv.headers, body, agent);
        ttfb.direct.push(r.ttfb);
        total.direct.push(r.total);
      }
      cpu.proxy.push(cpuMs(d.pid) - c0);
    }
    const n = opts.blocks * opts.perBlock;
    const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);
    const blockRatios = cpu.proxy.map((p, i) => p / cpu.bare[i]!);
    const cpuMsPer = { proxy: sum(cpu.proxy) / n, bare: sum(cpu.bare) / n, ratio: stats(blockRatios).median_ms, block_ratios: blockRatios };
    log(
      `  proxy ${wire}: first byte ${fmtMs(stats(ttfb.proxy).median_ms)} vs direct ${fmtMs(stats(ttfb.direct).median_ms)}; CPU a request ${cpuMsPer.proxy.toFixed(2)} vs bare ${cpuMsPer.bare.toFixed(2)} ms (median block ratio ${
        cpuMsPer.ratio.toFixed(2)
      }x)`,
    );

    // Memory: the same conversation goes on for `memoryRequests` more requests.
    const rss: number[] = [];
    for (let i = 1; i <= opts.memoryRequests; i++) {
      await viaProxy();
      if (i % 100 === 0) rss.push(rssOf(d.pid) ?? 0);
    }
    log(`  proxy ${wire}: RSS every 100 requests ${rss.map((x) => (x / 2 ** 20).toFixed(0)).join(' ')} MiB`);

    // The big answer: each run in a conversation of its own (its answer is recorded, and the
    // agent would send it back), first stored with a short answer, then the big one timed,
    // then the same body direct and through the bare proxy; the order alternates.
    const big = { proxy: [] as number[], direct: [] as number[], bare: [] as number[], pipe: [] as number[] };
    let answerBytes = 0;
    for (let i = 0; i < opts.bigRuns; i++) {
      const c = new WireConversation(wire, corpus, HISTORY_CHARS, `${wire}-big${i}`);
      await send(paths.proxy, c.headers, c.body(), agent);
      c.advance();
      const body = c.body();
      const headers = { ...c.headers, 'x-bench-answer': 'big' };
      const anchors = async (): Promise<void> => {
        const r = await send(paths.direct, headers, body, agent);
        big.direct.push(r.total);
        answerBytes = r.bytes;
        big.bare.push((await send(paths.bare, headers, body, agent)).total);
        big.pipe.push((await send(paths.pipe, headers, body, agent)).total);
      };
      if (i % 2 === 1) await anchors();
      big.proxy.push((await send(paths.proxy, headers, body, agent)).total);
      if (i % 2 === 0) await anchors();
    }
    const bigStats = { proxy: stats(big.proxy), direct: stats(big.direct), bare: stats(big.bare), pipe: stats(big.pipe) };
    log(`  proxy ${wire}: ${fmtBytes(answerBytes)} answer ${fmtMs(bigStats.proxy.median_ms)} vs direct ${fmtMs(bigStats.direct.median_ms)}`);

    const check = await checkNothingDue(d);
    return {
      wire,
      model: conv.model,
      body_bytes: bodyBytes,
      history_tokens: Math.round(bodyBytes / 4),
      ttfb: { proxy: stats(ttfb.proxy), direct: stats(ttfb.direct), bare: stats(ttfb.bare), pipe: stats(ttfb.pipe) },
      total: { proxy: stats(total.proxy), direct: stats(total.direct) },
      cpu_ms: cpuMsPer,
      big: { answer_bytes: answerBytes, ...bigStats, ratio: bigStats.proxy.median_ms / bigStats.direct.median_ms },
      memory: { requests: opts.memoryRequests, rss_bytes: rss },
      check,
    };
  } finally {
    agent.destroy();
  }
}

/** The wire's sessions, as the daemon lists them: none compacted, none forked, each with the upstream's usage. */
async function checkNothingDue(d: ReplayDaemon): Promise<ProxyWireResult['check']> {
  const { sessions } = await d.client.call('session.list', {});
  let compactions = 0;
  let providerInput: number | null = null;
  for (const s of sessions) {
    const { observation } = await d.client.call('context', { session: s.session });
    if (observation.last_compaction !== null) compactions++;
    providerInput = Math.max(providerInput ?? 0, observation.provider_input_tokens ?? 0);
  }
  return { compactions, forks: sessions.filter((s) => s.parent !== null).length, sessions: sessions.length, provider_input_tokens: providerInput };
}

export async function benchProxy(tmp: string, corpus: Corpus, opts: { quick: boolean }, log: (s: string) => void): Promise<ProxyResult> {
  buildDist(log);
  const upstream = await startBenchUpstream();
  const bare = await startBareProxy(upstream.url);
  const pipe = await startPipeProxy(upstream.url);
  const wires: ProxyWireResult[] = [];
  try {
    for (const wire of PROXY_WIRES) {
      // A daemon per wire: each wire's numbers are its own, its sessions the only ones checked.
      const d = await startReplayDaemon({ window: WINDOW_TOKENS, tmp, built: true, env: { ALBEDO_ANTHROPIC_UPSTREAM: upstream.url, ALBEDO_OPENAI_UPSTREAM: `${upstream.url}/v1` } });
      try {
        const { proxy } = await d.client.call('daemon.status', {});
        if (!proxy.listening || proxy.anthropic_base_url === null || proxy.openai_base_url === null) throw new Error(`the daemon's proxy is not listening: ${proxy.error}`);
        const base = { anthropic: proxy.anthropic_base_url, openai: proxy.openai_base_url };
        wires.push(
          await benchWire(wire, d, { upstream, bare, pipe }, base, corpus, opts.quick ? { blocks: 4, perBlock: 10, memoryRequests: 300, bigRuns: 4 } : { blocks: 12, perBlock: 20, memoryRequests: 1000, bigRuns: 10 }, log),
        );
      } finally {
        await d.stop();
      }
    }
  } finally {
    await bare.stop();
    await pipe.stop();
    await upstream.stop();
  }
  return { upstream_note: `scripted upstream (proxy-peers.ts): short answers, and ${fmtBytes(BIG_ANSWER_CHARS)} of text in 1 KiB deltas for the big one`, wires };
}

/** The lowest sample of the last half over the lowest of the first half, the first sample left out. */
function rssGrowth(rss: readonly number[]): number {
  const rest = rss.slice(1);
  if (rest.length < 2) return NaN;
  const half = Math.floor(rest.length / 2);
  return Math.min(...rest.slice(half)) / Math.min(...rest.slice(0, half));
}

export function judgeProxy(r: ProxyResult): Array<{ target: string; measured: string; pass: boolean; note?: string }> {
  const t = PROXY_TARGETS;
  return r.wires.flatMap((w) => {
    const bound = t.ttfbRatio * w.ttfb.direct.median_ms + t.ttfbSlackMs;
    const growth = rssGrowth(w.memory.rss_bytes);
    const mib = (x: number): string => `${(x / 2 ** 20).toFixed(0)}`;
    return [
      {
        target: `proxy ${w.wire}: first streamed byte within ${t.ttfbRatio}x direct + ${t.ttfbSlackMs} ms at ~${Math.round(w.history_tokens / 1000)}k tokens`,
        measured: `median ${fmtMs(w.ttfb.proxy.median_ms)} vs direct ${fmtMs(w.ttfb.direct.median_ms)} (bound ${fmtMs(bound)})`,
        pass: w.ttfb.proxy.median_ms <= bound,
        note: `floors: the extra hop alone (a pipe proxy that never reads the body) ${fmtMs(w.ttfb.pipe.median_ms)}; reading and re-serializing the body (the bare proxy) ${fmtMs(w.ttfb.bare.median_ms)}`,
      },
      {
        target: `proxy ${w.wire}: CPU a request within ${t.cpuRatio}x a bare pass-through proxy's`,
        measured: `${w.cpu_ms.proxy.toFixed(2)} vs ${w.cpu_ms.bare.toFixed(2)} ms a request; median of ${w.cpu_ms.block_ratios.length} blocks ${w.cpu_ms.ratio.toFixed(2)}x (blocks ${
          [...w.cpu_ms.block_ratios].sort((a, b) => a - b).map((x) => x.toFixed(2)).join(' ')
        })`,
        pass: w.cpu_ms.ratio <= t.cpuRatio,
      },
      {
        target: `proxy ${w.wire}: a ${fmtBytes(w.big.answer_bytes)} streamed answer within ${t.bigRatio}x direct`,
        measured: `median ${fmtMs(w.big.proxy.median_ms)} vs ${fmtMs(w.big.direct.median_ms)} (${w.big.ratio.toFixed(2)}x)`,
        pass: w.big.ratio <= t.bigRatio,
        note: `floors: the extra hop alone (the pipe proxy) ${fmtMs(w.big.pipe.median_ms)} (${(w.big.pipe.median_ms / w.big.direct.median_ms).toFixed(2)}x); the bare proxy ${fmtMs(w.big.bare.median_ms)} (${
          (w.big.bare.median_ms / w.big.direct.median_ms).toFixed(2)
        }x)`,
      },
      {
        target: `proxy ${w.wire}: daemon RSS flat over ${w.memory.requests} requests (lowest of the last half within ${t.rssGrowth}x of the lowest of the first)`,
        measured: `${w.memory.rss_bytes.map(mib).join(' ')} MiB (${growth.toFixed(2)}x)`,
        pass: growth <= t.rssGrowth,
      },
      {
        target: `proxy ${w.wire}: the measured path was nothing-due (no compaction, no fork, usage reached /context)`,
        measured: `${w.check.compactions} compactions, ${w.check.forks} forks over ${w.check.sessions} sessions; provider input ${w.check.provider_input_tokens ?? 'none'}`,
        pass: w.check.compactions === 0 && w.check.forks === 0 && (w.check.provider_input_tokens ?? 0) > 0,
      },
    ];
  });
}

export function renderProxy(r: ProxyResult): string {
  const lines = [`\nproxy (built daemon; ${r.upstream_note})`];
  const row = (what: string, s: Stats): string => `    ${what.padEnd(30)} median ${fmtMs(s.median_ms).padStart(9)}  min ${fmtMs(s.min_ms).padStart(9)}  max ${fmtMs(s.max_ms).padStart(9)}  (${s.runs})`;
  for (const w of r.wires) {
    lines.push(`  ${w.wire} (${w.model}), body ${fmtBytes(w.body_bytes)} (~${Math.round(w.history_tokens / 1000)}k tokens)`);
    lines.push(row('first byte, proxy', w.ttfb.proxy), row('first byte, bare proxy', w.ttfb.bare), row('first byte, pipe proxy', w.ttfb.pipe), row('first byte, direct', w.ttfb.direct));
    lines.push(row('whole answer, proxy', w.total.proxy), row('whole answer, direct', w.total.direct));
    lines.push(`    CPU a request: daemon ${w.cpu_ms.proxy.toFixed(2)} ms, bare proxy ${w.cpu_ms.bare.toFixed(2)} ms (median block ratio ${w.cpu_ms.ratio.toFixed(2)}x)`);
    lines.push(
      row(`${fmtBytes(w.big.answer_bytes)} answer, proxy`, w.big.proxy),
      row(`${fmtBytes(w.big.answer_bytes)} answer, bare proxy`, w.big.bare),
      row(`${fmtBytes(w.big.answer_bytes)} answer, pipe proxy`, w.big.pipe),
      row(`${fmtBytes(w.big.answer_bytes)} answer, direct`, w.big.direct),
    );
    lines.push(`    RSS every 100 requests: ${w.memory.rss_bytes.map((x) => (x / 2 ** 20).toFixed(0)).join(' ')} MiB`);
  }
  return lines.join('\n');
}
