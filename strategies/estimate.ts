// Local, byte-based size estimates in tokens. Never provider accounting: the numbers only
// decide when to compact and how much tail fits. Images are sized from their dimensions, so
// base64 length can never inflate (or deflate) an estimate.
import type { OutPart, PlainInput, ToolSpec } from '../protocol/prepared.ts';

/** Fixed overhead per input (role, separators), in tokens. */
export const PER_INPUT_TOKENS = 12;

/** ceil(bytes / 4) of the UTF-8 text. */
export function textTokens(text: string): number {
  return Math.floor((Buffer.byteLength(text, 'utf8') + 3) / 4);
}

/** Tiles of 512 px, as vision models bill them, plus a fixed part. */
export function imageTokens(width: number, height: number): number {
  return 85 + 170 * Math.ceil(width / 512) * Math.ceil(height / 512) + 20;
}

export function partTokens(part: OutPart): number {
  switch (part.type) {
    case 'text':
      return textTokens(part.text);
    case 'image':
      return imageTokens(part.width, part.height);
    case 'tool_call':
      return textTokens(part.name) + textTokens(JSON.stringify(part.arguments));
    case 'tool_result':
      return textTokens(part.call_id) + part.content.reduce((n, p) => n + partTokens(p), 0);
    case 'reasoning':
      return textTokens(part.text ?? '') + textTokens(part.encrypted ?? '');
  }
}

export function inputTokens(input: PlainInput): number {
  return PER_INPUT_TOKENS + input.content.reduce((n, p) => n + partTokens(p), 0);
}

export function inputsTokens(inputs: readonly PlainInput[]): number {
  return inputs.reduce((n, i) => n + inputTokens(i), 0);
}

/** What every request pays before any history: the system prompt and the tool schemas. */
export function pinnedTokens(system: string, tools: readonly ToolSpec[]): number {
  let n = textTokens(system);
  for (const t of tools) n += textTokens(t.name) + textTokens(t.description) + textTokens(JSON.stringify(t.input_schema));
  return n;
}

/** The trigger test in integer arithmetic: estimate·100 >= window·percent. */
export function reachesPercent(estimate: number, window: number, percent: number): boolean {
  return estimate * 100 >= window * percent;
}
