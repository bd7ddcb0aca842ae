// Provider projection: durable rows -> provider-neutral plain inputs for one target model.
// Several rows can become one input (a turn's tool results travel together), one row can
// become several (a tool result's images follow it as a user input, which every provider
// accepts), and reasoning the target cannot read is left out. Source references stay here.
import type { OutPart, PlainInput } from '../protocol/prepared.ts';
import type { ImagePart, StoredRow } from '../protocol/rows.ts';
import { inputsTokens } from './estimate.ts';

/**
 * Where a prepared request goes, as far as projection and the strategies need to know. Built
 * once per preparation by the engine from `prepare` params, the upstream's declared limits and
 * the models catalog (in that order of precedence).
 */
export interface ProjectionTarget {
  /** The session's wire id; pointers back into the transcript name it. */
  session: string;
  /** Provider the request goes to (`prepare {provider}`, else the catalog's), if known. */
  provider: string | undefined;
  /** Model id the request goes to, if known. */
  model: string | undefined;
  /** False when the catalog says the model reads no image input; unknown models read images. */
  readsImages: boolean;
  /** Longest image edge the provider keeps before downsizing, in pixels; undefined: none known. */
  maxImageEdgePx: number | undefined;
  /**
   * A tool output (or user paste) estimated above this many tokens goes into the request as its
   * head and tail with a transcript_read pointer between; null: no cap.
   */
  maxOutputTokens: number | null;
}

/** A target with nothing known but the session: no caps, images readable. */
export function plainTarget(session: string): ProjectionTarget {
  return { session, provider: undefined, model: undefined, readsImages: true, maxImageEdgePx: undefined, maxOutputTokens: null };
}

export const ELIDED_IMAGE_TEXT = '[image elided and is no longer available]';

function imageOut(p: ImagePart): OutPart {
  if (p.elided === true) return { type: 'text', text: ELIDED_IMAGE_TEXT };
  return { type: 'image', hash: p.hash, media_type: p.media_type, width: p.width, height: p.height };
}

/** The inputs one row contributes, before neighbouring tool results are merged. */
export function rowInputs(row: StoredRow, target: ProjectionTarget): PlainInput[] {
  const body = row.body;
  switch (body.kind) {
    case 'user': {
      const content = body.content.map((p) => (p.type === 'text' ? p : imageOut(p)));
      if (body.origin !== 'user') content.unshift({ type: 'text', text: `[${body.origin}]` });
      return [{ role: 'user', content }];
    }
    case 'assistant': {
      const content: OutPart[] = [];
      for (const p of body.content) {
        if (p.type !== 'reasoning') {
          content.push(p);
          continue;
        }
        // Opaque reasoning only goes back to the provider that wrote it.
        const ownProvider = p.provider !== undefined && p.provider === target.provider;
        const text = p.text !== undefined && p.text.length > 0 ? p.text : undefined;
        if (ownProvider && p.encrypted !== undefined) content.push({ type: 'reasoning', text, encrypted: p.encrypted, provider: p.provider });
        else if (text !== undefined) content.push({ type: 'reasoning', text });
      }
      return content.length === 0 ? [] : [{ role: 'assistant', content }];
    }
    case 'tool_result': {
      const text = body.content.filter((p) => p.type === 'text');
      const images = body.content.filter((p): p is ImagePart => p.type === 'image');
      const live = images.filter((p) => p.elided !== true);
      const resultContent: OutPart[] = [...text];
      for (const p of images) if (p.elided === true) resultContent.push({ type: 'text', text: ELIDED_IMAGE_TEXT });
      if (live.length > 0) resultContent.push({ type: 'text', text: `[${live.length} image(s) follow in the next message]` });
      const out: PlainInput[] = [
        {
          role: 'tool',
          content: [{ type: 'tool_result', call_id: body.call_id, is_error: body.is_error, content: resultContent as Array<Extract<OutPart, { type: 'text' | 'image' }>> }],
        },
      ];
      if (live.length > 0) {
        out.push({ role: 'user', content: [{ type: 'text', text: `[images from tool result ${body.call_id}]` }, ...live.map(imageOut)] });
      }
      return out;
    }
    case 'notice': {
      const n = body.body;
      // Image fits only change earlier rows' images; they are not model input themselves.
      if (n.notice === 'image_fit') return [];
      if (n.notice === 'capabilities_changed') return [{ role: 'user', content: [{ type: 'text', text: `[capabilities changed]\n${n.context}` }] }];
      if (n.notice === 'excursion') return [{ role: 'user', content: [{ type: 'text', text: `[excursion started on branch ${n.branch}]` }] }];
      return [{ role: 'user', content: [{ type: 'text', text: `[excursion on branch ${n.branch} returned]\n${n.outcome}` }] }];
    }
  }
}

/** Estimated tokens of one row as projected for `target`. */
export function rowTokens(row: StoredRow, target: ProjectionTarget): number {
  return inputsTokens(rowInputs(row, target));
}

/** Projects rows in order and merges consecutive tool inputs into one. */
export function forModel(rows: readonly StoredRow[], target: ProjectionTarget): PlainInput[] {
  const out: PlainInput[] = [];
  for (const row of rows) {
    for (const input of rowInputs(row, target)) {
      const last = out[out.length - 1];
      if (last !== undefined && last.role === 'tool' && input.role === 'tool') last.content.push(...input.content);
      else out.push({ role: input.role, content: [...input.content] });
    }
  }
  return out;
}

/**
 * Copies inputs with each image's base64 bytes attached, for requests that asked for inline
 * images. An image whose payload is gone (elided and collected) becomes the elision text.
 */
export function inlineImages(inputs: readonly PlainInput[], bytesOf: (hash: string) => Buffer | undefined): PlainInput[] {
  const inline = (p: OutPart): OutPart => {
    if (p.type === 'image') {
      const data = bytesOf(p.hash);
      return data === undefined ? { type: 'text', text: ELIDED_IMAGE_TEXT } : { ...p, data: data.toString('base64') };
    }
    if (p.type === 'tool_result') return { ...p, content: p.content.map(inline) as typeof p.content };
    return p;
  };
  return inputs.map((i) => ({ role: i.role, content: i.content.map(inline) }));
}
