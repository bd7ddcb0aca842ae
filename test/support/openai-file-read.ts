// The proxy issues' acceptance scenario for the OpenAI wires, as a script for openai-upstream.ts:
// 30 shell-tool reads of 6 KB files, one call per turn for the next unread file, then a final
// text. The same files and markers as file-read-scenario.ts (the Anthropic one); what differs is
// how a Chat Completions or Responses request shows calls and results.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { openaiAnswer, type OpenAIAnswer, type OpenAIRequest, type OpenAIScript, type OpenAIWire } from './openai-upstream.ts';
import { isRecord } from '../../protocol/is-record.ts';

export interface OpenAIFileRead {
  files: ReadonlyArray<{ path: string; marker: string }>;
  finalText: string;
  /** What the final answer adds once the proxy's transcript_grep found the first file's line. */
  recalledText: string;
  prompt: string;
  script: OpenAIScript;
  /** Every call id of the request without its output, and every output without its call. */
  unpaired(req: OpenAIRequest): string[];
}

/** The calls (id → arguments text) and outputs (id → text) a request carries, and all its text. */
export function historyOf(req: OpenAIRequest): { calls: Map<string, string>; outputs: Map<string, string>; text: string } {
  const calls = new Map<string, string>();
  const outputs = new Map<string, string>();
  const texts: string[] = [];
  const textOf = (c: unknown): string => (typeof c === 'string' ? c : Array.isArray(c) ? c.map((p) => (isRecord(p) && typeof p.text === 'string' ? p.text : '')).join('\n') : '');
  if (req.wire === 'chat') {
    for (const m of Array.isArray(req.body.messages) ? (req.body.messages as unknown[]) : []) {
      if (!isRecord(m)) continue;
      if (m.role === 'tool' && typeof m.tool_call_id === 'string') outputs.set(m.tool_call_id, textOf(m.content));
      else texts.push(textOf(m.content));
      for (const c of Array.isArray(m.tool_calls) ? (m.tool_calls as unknown[]) : []) {
        if (isRecord(c) && typeof c.id === 'string' && isRecord(c.function)) calls.set(c.id, String(c.function.arguments));
      }
    }
  } else {
    for (const it of Array.isArray(req.body.input) ? (req.body.input as unknown[]) : []) {
      if (!isRecord(it)) continue;
      if (it.type === 'function_call' && typeof it.call_id === 'string') calls.set(it.call_id, String(it.arguments));
      else if (it.type === 'function_call_output' && typeof it.call_id === 'string') outputs.set(it.call_id, textOf(it.output));
      else if (it.type === 'message') texts.push(textOf(it.content));
    }
  }
  return { calls, outputs, text: [...texts, ...outputs.values()].join('\n') };
}

export function openaiFileRead(opts: { dir: string; toolName: string; argKey: string; wire: OpenAIWire; files?: number; bytes?: number }): OpenAIFileRead {
  const count = opts.files ?? 30;
  const bytes = opts.bytes ?? 6000;
  const dir = path.resolve(opts.dir);
  fs.mkdirSync(dir, { recursive: true });
  const files = Array.from({ length: count }, (_, i) => {
    const name = `file-${String(i + 1).padStart(2, '0')}.txt`;
    const marker = `MARKER-${String(i + 1).padStart(2, '0')}-${randomBytes(5).toString('hex')}`;
    let body = '';
    for (let line = 1; body.length < bytes; line++) body += `${marker} line ${String(line).padStart(3, '0')} of ${name} ${'.'.repeat(24)}\n`;
    const file = path.join(dir, name);
    fs.writeFileSync(file, body.slice(0, bytes - 1) + '\n');
    return { path: file, marker };
  });
  const finalText = `All ${count} files read. FINAL-${randomBytes(6).toString('hex')}`;
  const recalledText = `The first file said: ${files[0]!.marker} line 001`;
  const prompt = `Read the ${count} files ${dir}/file-01.txt to file-${String(count).padStart(2, '0')}.txt one at a time with the shell tool (cat), then say that you are done.`;

  const script = (req: OpenAIRequest): OpenAIAnswer => {
    const h = historyOf(req);
    if (!req.conversation) return openaiAnswer.text(`Summary so far: ${files.filter((f) => h.text.includes(f.marker)).map((f) => f.marker).join(', ') || 'nothing read yet'}.`);
    const read = new Set<number>();
    for (const [id, args] of h.calls) {
      const i = files.findIndex((f) => args.includes(f.path));
      if (i >= 0 && h.outputs.has(id)) read.add(i);
    }
    files.forEach((f, i) => {
      if (h.text.includes(f.marker)) read.add(i);
    });
    const next = files.findIndex((_, i) => !read.has(i));
    if (next < 0) {
      // Last, the model asks the proxy's memory tool for the first file, long gone from the request.
      const grepIds = new Set([...h.calls].filter(([, args]) => args.includes('"pattern"')).map(([id]) => id));
      const found = [...h.outputs].some(([id, text]) => grepIds.has(id) && text.includes(`${files[0]!.marker} line 001`));
      return found ? openaiAnswer.text(`${finalText} ${recalledText}`) : openaiAnswer.call('transcript_grep', { pattern: `${files[0]!.marker} line 001` });
    }
    return openaiAnswer.call(opts.toolName, { [opts.argKey]: `cat ${files[next]!.path}` });
  };

  const unpaired = (req: OpenAIRequest): string[] => {
    const h = historyOf(req);
    return [...[...h.calls.keys()].filter((c) => !h.outputs.has(c)), ...[...h.outputs.keys()].filter((o) => !h.calls.has(o))];
  };

  return { files, finalText, recalledText, prompt, script, unpaired };
}
