// Fitting oversized images over the real socket: a 9000x9000 upload to a Claude model, limits
// the client declares, chains of fits, a hash shown by several rows, the cache of fits shared
// by sessions, and a fit that cannot succeed. Everything is checked on what a client sees:
// the prepared inputs, payload.get, the stored rows and the daemon's log.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import type { AlbedoClient } from '../../protocol/client.ts';
import type { Result } from '../../protocol/methods.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { imageTokens } from '../../strategies/estimate.ts';
import { imageIn, pngBytes, user } from '../storage/factories.ts';
import { allRows, loggedLine, startDaemon, type DaemonHandle } from './harness.ts';

type Prepared = Result<'prepare'>;
type Image = { hash: string; media_type: string; width: number; height: number };

const CLAUDE = 'claude-sonnet-4-5';

/** Every image part of a prepared request, in order (tool results included). */
function imagesOf(p: Prepared): Image[] {
  const out: Image[] = [];
  for (const input of p.inputs) {
    for (const part of input.content) {
      if (part.type === 'image') out.push(part);
      if (part.type === 'tool_result') { for (const q of part.content) if (q.type === 'image') out.push(q); }
    }
  }
  return out;
}

function fitNotices(rows: StoredRow[]): Array<{ from_hash: string; to: Image; reason: string }> {
  return rows.flatMap((r) => (r.body.kind === 'notice' && r.body.body.notice === 'image_fit' ? [r.body.body] : []));
}

function uploadedHash(rows: StoredRow[]): string {
  const first = rows[0]?.body;
  const part = first?.kind === 'user' ? first.content.find((p) => p.type === 'image') : undefined;
  assert.ok(part?.type === 'image');
  return part.hash;
}

function count(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

describe('image fitting over the socket', () => {
  let d: DaemonHandle;
  let c: AlbedoClient;
  let huge: Buffer;

  before(async () => {
    d = await startDaemon();
    c = await d.connect();
    huge = await pngBytes(9000, 9000);
  });
  after(async () => {
    await d.stop();
  });

  test('a 9000x9000 PNG to a Claude model goes out fitted to 8000 px everywhere it shows, once', async () => {
    await c.call('session.open', { session: 'big' });
    await c.call('transcript.append', { session: 'big', rows: [user('look at this', { images: [imageIn(huge, 'image/png')] })] });
    const original = uploadedHash(await allRows(c, 'big'));
    // The same image again, by hash, two turns later: one fit replaces both.
    await c.call('transcript.append', {
      session: 'big',
      rows: [
        { kind: 'assistant', content: [{ type: 'text', text: 'a big red square' }] },
        { kind: 'user', content: [{ type: 'text', text: 'and again' }, { type: 'image', hash: original }] },
      ],
    });

    const first = await c.call('prepare', { session: 'big', model: CLAUDE, instructions: 'agent' });
    const shown = imagesOf(first);
    assert.equal(shown.length, 2);
    for (const img of shown) {
      assert.notEqual(img.hash, original);
      assert.deepEqual({ w: img.width, h: img.height, type: img.media_type }, { w: 8000, h: 8000, type: 'image/png' });
    }
    assert.equal(shown[0]!.hash, shown[1]!.hash);

    // The fitted payload is a real PNG of the dimensions the request claims.
    const fitted = await c.call('payload.get', { hash: shown[0]!.hash });
    const meta = await sharp(Buffer.from(fitted.data, 'base64')).metadata();
    assert.deepEqual([meta.format, meta.width, meta.height], ['png', 8000, 8000]);

    const rows = await allRows(c, 'big');
    const notices = fitNotices(rows);
    assert.equal(notices.length, 1, 'one notice covers both rows');
    assert.equal(notices[0]!.from_hash, original);
    assert.equal(notices[0]!.to.hash, shown[0]!.hash);
    assert.match(notices[0]!.reason, /^9000x9000, \d+ bytes: over the 8000 px edge limit of claude-sonnet-4-5 \(anthropic\)$/);

    // The transcript keeps the upload: lossless, payload.get still serves it byte for byte.
    assert.equal(uploadedHash(rows), original);
    const kept = await c.call('payload.get', { hash: original });
    assert.ok(Buffer.from(kept.data, 'base64').equals(huge));

    // A second prepare fits nothing and sends the same images.
    const second = await c.call('prepare', { session: 'big', model: CLAUDE, instructions: 'agent' });
    assert.deepEqual(imagesOf(second), shown);
    assert.equal(fitNotices(await allRows(c, 'big')).length, 1);
    const log = await loggedLine(d, `"from":"${original}"`);
    assert.equal(count(log, `"from":"${original}"`), 1, 'one fit logged');
  });

  test('another session with the same upload reuses the cached fit', async () => {
    await c.call('session.open', { session: 'big-2' });
    await c.call('transcript.append', { session: 'big-2', rows: [user('same picture', { images: [imageIn(huge, 'image/png')] })] });
    const p = await c.call('prepare', { session: 'big-2', model: 'claude-opus-4-5', instructions: 'agent' });
    const [img] = imagesOf(p);
    const [notice] = fitNotices(await allRows(c, 'big-2'));
    assert.equal(img?.hash, notice?.to.hash);
    assert.equal(img?.width, 8000);
    assert.match(await loggedLine(d, 'image fitted (cached fit reused)'), /"session":"big-2"[^\n]*cached fit reused/);
  });

  test('declared limits win over the defaults; a shrinking limit chains onto the earlier fit; the estimate counts fitted sizes', async () => {
    const png = await pngBytes(3000, 2000);
    await c.call('session.open', { session: 'up' });
    await c.call('transcript.append', { session: 'up', rows: [user('a screenshot', { images: [imageIn(png, 'image/png')] })] });
    const A = uploadedHash(await allRows(c, 'up'));
    const prep = (upstream?: Record<string, number>) => c.call('prepare', { session: 'up', model: CLAUDE, instructions: 'agent', ...(upstream === undefined ? {} : { upstream }) });

    // Within Claude's limits: sent as uploaded.
    const plain = await prep();
    assert.deepEqual(imagesOf(plain).map((i) => i.hash), [A]);
    assert.equal(fitNotices(await allRows(c, 'up')).length, 0);

    // The upstream accepts 1000 px at most: A -> B.
    const edge = await prep({ max_image_accepted_edge_px: 1000 });
    const [B] = imagesOf(edge);
    assert.deepEqual([B?.width, B?.height], [1000, 666]);
    const first = fitNotices(await allRows(c, 'up'));
    assert.equal(first.length, 1);
    assert.match(first[0]!.reason, /over the 1000 px edge limit of the upstream/);
    // The image costs its fitted size (the native edge 1568 applies to both).
    assert.equal(
      plain.observation.estimated_input_tokens - edge.observation.estimated_input_tokens,
      imageTokens(3000, 2000, 1568) - imageTokens(1000, 666, 1568),
    );

    // Then it accepts 100,000 pixels: B -> C, and the upload reads C.
    const px = await prep({ max_image_accepted_edge_px: 1000, max_image_pixels: 100_000 });
    const [C] = imagesOf(px);
    assert.ok(C !== undefined && C.width * C.height <= 100_000 && C.width * C.height > 90_000, `${C?.width}x${C?.height}`);
    assert.ok(Math.abs(C.width / C.height - 1.5) < 0.01, 'aspect kept');
    const both = fitNotices(await allRows(c, 'up'));
    assert.equal(both.length, 2);
    assert.deepEqual([both[1]!.from_hash, both[1]!.to.hash], [B!.hash, C.hash]);
    assert.match(both[1]!.reason, /over the 100000 pixel limit of the upstream/);

    // C satisfies the looser limits too: going back to them fits nothing.
    assert.deepEqual(imagesOf(await prep({ max_image_accepted_edge_px: 1000 })).map((i) => i.hash), [C.hash]);
    assert.equal(fitNotices(await allRows(c, 'up')).length, 2);
  });

  test('a later upload of a fitted image is fitted again, by the cached fit, earlier rows keep theirs', async () => {
    const png = await pngBytes(2400, 1200);
    await c.call('session.open', { session: 'again' });
    const upstream = { max_image_accepted_edge_px: 600 };
    await c.call('transcript.append', { session: 'again', rows: [user('one', { images: [imageIn(png, 'image/png')] })] });
    const [fit1] = imagesOf(await c.call('prepare', { session: 'again', model: CLAUDE, instructions: 'agent', upstream }));
    await c.call('transcript.append', { session: 'again', rows: [user('two', { images: [imageIn(png, 'image/png')] })] });
    const p = await c.call('prepare', { session: 'again', model: CLAUDE, instructions: 'agent', upstream });
    assert.deepEqual(imagesOf(p).map((i) => [i.hash, i.width, i.height]), [
      [fit1!.hash, 600, 300],
      [fit1!.hash, 600, 300],
    ]);
    assert.equal(fitNotices(await allRows(c, 'again')).length, 2);
  });

  test('a fit that cannot meet the limits sends the upload, says so on every request, logs once', async () => {
    const png = await pngBytes(300, 200);
    await c.call('session.open', { session: 'stuck' });
    await c.call('transcript.append', { session: 'stuck', rows: [user('tiny limit', { images: [imageIn(png, 'image/png')] })] });
    const A = uploadedHash(await allRows(c, 'stuck'));
    const prep = () => c.call('prepare', { session: 'stuck', model: CLAUDE, instructions: 'agent', upstream: { max_image_bytes: 10 } });
    for (let i = 0; i < 2; i++) {
      const p = await prep();
      assert.deepEqual(imagesOf(p).map((img) => img.hash), [A]);
      assert.ok(p.observation.notes.some((n) => n.startsWith(`image ${A.slice(0, 8)} (300x200,`) && n.includes('could not be fitted')), p.observation.notes.join('\n'));
    }
    assert.equal(fitNotices(await allRows(c, 'stuck')).length, 0);
    const failures = (await loggedLine(d, 'image fit failed')).split('\n').filter((l) => l.includes('image fit failed') && l.includes(A));
    assert.equal(failures.length, 1);
    assert.match(failures[0]!, /"session":"stuck"/);
    assert.match(failures[0]!, /"method":"prepare"/);
  });
});
