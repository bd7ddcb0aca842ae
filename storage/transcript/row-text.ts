// The plain text of a stored row: what search matches and what transcript reads render.
// Images appear as a short marker (never their bytes); encrypted reasoning is left out.
//
// Since migration 16 the text is not stored: it is derived from the body whenever it is read
// (ROW_TEXT_SQL, or rowText on a decoded body). So rowText's output *is* the stored text of every
// row: changing what it renders for some body changes what old rows read, grep and fingerprint
// as. Such a change needs a migration that keeps the old texts (legacy_text below) or rebuilds
// the search index. Rows whose text at migration 16 differed from the derivation (written
// before the nesting bound, or by a daemon whose rowText rendered differently) keep it in
// transcript.legacy_text, which wins over the derivation.
import { z } from 'zod';
import { MAX_JSON_DEPTH, stringifyJson } from '../../protocol/json-depth.ts';
import { StoredBody } from '../../protocol/rows.ts';
import { bodySql } from './row-body.ts';

/** What stands in for an image whose payload compaction elided, in row text and in requests. */
export const ELIDED_IMAGE_TEXT = '[image elided and is no longer available]';

/** What an opaque part (rows.ts OpaquePart) shows wherever its wire's bytes cannot go. */
export function opaqueMarker(label: string): string {
  return `[${label}: kept as sent, not shown here]`;
}

/** Marker text an image leaves in the row text. */
export function imageMarker(hash: string, width: number, height: number, elided = false): string {
  const base = `[image ${hash.slice(0, 8)} ${width}x${height}]`;
  return elided ? `${base} ${ELIDED_IMAGE_TEXT}` : base;
}

/**
 * Matches every marker `imageMarker` writes, elided or not, so readers of row text (the
 * extractive summarizer) can skip them. Global: use with `replace`, not `test`.
 */
export const IMAGE_MARKER_PATTERN = new RegExp(
  String.raw`\[image [0-9a-f]{8} \d+x\d+\](?: ${ELIDED_IMAGE_TEXT.replace(/[[\]]/g, '\\$&')})?`,
  'g',
);

/** Arguments as JSON; parts nested past the depth limit (only rows stored before it) read as a marker. */
function jsonArgs(args: Record<string, unknown>): string {
  return stringifyJson(args);
}

/** Text of a row body, lines joined with "\n". Deterministic: stored and re-derivable. */
export function rowText(body: StoredBody): string {
  const out: string[] = [];
  switch (body.kind) {
    case 'user':
    case 'tool_result':
      for (const p of body.content) {
        out.push(p.type === 'text' ? p.text : p.type === 'opaque' ? opaqueMarker(p.label) : imageMarker(p.hash, p.width, p.height, p.elided === true));
      }
      break;
    case 'assistant':
      for (const p of body.content) {
        if (p.type === 'text') out.push(p.text);
        else if (p.type === 'tool_call') out.push(`→ ${p.name}(${jsonArgs(p.arguments)})`);
        else if (p.type === 'opaque') out.push(opaqueMarker(p.label));
        else if (p.text !== undefined && p.text.length > 0) out.push(p.text);
      }
      break;
    case 'notice': {
      const n = body.body;
      if (n.notice === 'image_fit') out.push(`image ${n.from_hash.slice(0, 8)} fitted to ${n.to.width}x${n.to.height}: ${n.reason}`);
      else if (n.notice === 'capabilities_changed') out.push(n.instructions === undefined ? `capabilities changed\n${n.context}` : `capabilities changed\n${n.instructions}\n${n.context}`);
      else if (n.notice === 'excursion') out.push(`excursion started on branch ${n.branch}`);
      else out.push(`excursion on branch ${n.branch} returned\n${n.outcome}`);
      break;
    }
  }
  return out.join('\n');
}

/**
 * What rowText writes besides a body's own strings and numbers: a body of every kind and part
 * rendered with its strings empty, its numbers 0, and tool-call arguments nested past the depth
 * limit (for the marker that stands in for them). A search's first look at a row's raw JSON
 * (storage/search/scan-filter.ts) cannot find these words there; a new marker or notice in
 * rowText belongs here too.
 */
export function renderedWords(): string {
  let deep: Record<string, unknown> = {};
  for (let i = 0; i <= MAX_JSON_DEPTH; i++) deep = { a: deep };
  const image = { type: 'image', hash: '', media_type: '', width: 0, height: 0 } as const;
  const opaque = { type: 'opaque', wire: '', label: '', data: {} } as const;
  const text = { type: 'text', text: '' } as const;
  const bodies: StoredBody[] = [
    { kind: 'user', origin: 'user', content: [text, image, { ...image, elided: true }, opaque] },
    { kind: 'assistant', content: [text, { type: 'reasoning', text: '' }, { type: 'tool_call', id: '', name: '', arguments: deep }, opaque] },
    { kind: 'tool_result', call_id: '', is_error: false, content: [text, image] },
    { kind: 'notice', body: { notice: 'image_fit', from_hash: '', to: image, reason: '' } },
    { kind: 'notice', body: { notice: 'capabilities_changed', context: '', instructions: '' } },
    { kind: 'notice', body: { notice: 'capabilities_changed', context: '' } },
    { kind: 'notice', body: { notice: 'excursion', branch: '' } },
    { kind: 'notice', body: { notice: 'excursion_return', branch: '', marker_seq: 1, outcome: '' } },
  ];
  return bodies.map(rowText).join('\n');
}

/** The one-line header a transcript read puts above each row's text. */
export function rowHeader(seq: number, body: StoredBody): string {
  switch (body.kind) {
    case 'user':
      return body.origin === 'user' ? `#${seq} user` : `#${seq} user (${body.origin})`;
    case 'assistant':
      return `#${seq} assistant`;
    case 'tool_result':
      return `#${seq} tool_result ${body.call_id}${body.is_error ? ' (error)' : ''}`;
    case 'notice':
      return `#${seq} notice ${body.body.notice}`;
  }
}

/** A stored body's JSON as parsed, unchecked; a body that is not JSON fails naming the row's seq. */
export function parseRowJson(seq: number, json: string): unknown {
  try {
    return JSON.parse(json);
  } catch (err) {
    throw new Error(`transcript row ${seq} is corrupt: body is not JSON (${(err as Error).message})`);
  }
}

/**
 * Decodes a stored body's JSON: a body that is not JSON or not a StoredBody fails loudly, naming
 * the row's seq, instead of being trusted.
 */
export function parseStoredBody(seq: number, json: string): StoredBody {
  const body = StoredBody.safeParse(parseRowJson(seq, json));
  if (!body.success) throw new Error(`transcript row ${seq} is corrupt: ${z.prettifyError(body.error).replaceAll('\n', '; ')}`);
  return body.data;
}

/** A stored row's text: its kept legacy text, else the derivation from its body. */
export function storedRowText(seq: number, body: string, legacy: string | null): string {
  return legacy ?? rowText(parseStoredBody(seq, body));
}

/**
 * The same in SQL, over a transcript row's columns, packed or not (albedo_row_text is registered
 * on every connection, storage/db.ts). Every query that reads row text selects this, so there is
 * one derivation.
 */
export const ROW_TEXT_SQL = `albedo_row_text(seq, ${bodySql()}, legacy_text)`;
