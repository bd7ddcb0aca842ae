// The proxy issue's acceptance scenario as an upstream script: "a session that outgrows a 40,000-
// token window: 30 shell-tool reads of 6 KB files". Writes the files and answers each agent turn
// with one shell call for the next unread file, then a final text; the agent and upstream are others'.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { answer, blocksOf, toolResultText, type Answer, type MessagesBody, type Script, type ScriptRequest } from './scripted-upstream.ts';

export interface FileReadScenarioOptions {
  /** Scratch work dir; the files are written into it (created if missing). */
  dir: string;
  /** How many files (default 30). */
  files?: number;
  /** Bytes per file (default 6000). */
  bytes?: number;
  /** The agent's shell tool: `Bash` for Claude Code, `bash` for pi. */
  toolName: string;
  /**
   * After the last file, the model calls the proxy's `transcript_grep` for the first file's
   * marker (long gone from the request by then) and ends by quoting what it found.
   */
  recall?: boolean;
}

export interface ScenarioFile {
  /** Absolute path. */
  path: string;
  /** A unique line the file repeats, e.g. `MARKER-07-3f9a0c1d2b`. */
  marker: string;
}

export interface FileReadScenario {
  files: readonly ScenarioFile[];
  /** The exact text of the final answer (carries a random token, so stdout can be checked). */
  finalText: string;
  /** With `recall`: what the final answer adds once the grep found the first file's line. */
  recalledText: string;
  /** A prompt for the agent that fits the script (the script does not depend on it). */
  prompt: string;
  /** The upstream script: stateless, decided from each request's messages alone. */
  script: Script;
  /** Indexes of the files a request's messages show as read (see script). */
  readIn(body: MessagesBody): Set<number>;
  /** Markers found in a request's tool_result blocks. */
  markersInToolResults(body: MessagesBody): Set<string>;
}

/**
 * True when, after some history, the last user turn carries its own text besides tool results
 * and `<system-reminder>`s: an instruction, not a tool round. Claude Code's own compaction
 * request has this shape (tools kept, "CRITICAL: Respond with TEXT ONLY..." appended after the
 * last tool_result); so does a new prompt in a continued session.
 */
export function isInstructionTurn(body: MessagesBody): boolean {
  const messages = body.messages ?? [];
  const last = messages[messages.length - 1];
  if (last?.role !== 'user' || !messages.some((m) => m.role === 'assistant')) return false;
  return blocksOf(last).some(
    (b) => b.type === 'text' && typeof b.text === 'string' && b.text.trim() !== '' && !b.text.trimStart().startsWith('<system-reminder>'),
  );
}

/** The file's body: its marker line repeated with a line number, cut to exactly `bytes` bytes. */
function fileBody(marker: string, name: string, bytes: number): string {
  let out = '';
  for (let line = 1; out.length < bytes; line++) {
    out += `${marker} line ${String(line).padStart(3, '0')} of ${name} ${'.'.repeat(24)}\n`;
  }
  return out.slice(0, bytes - 1) + '\n';
}

/**
 * Writes the files and returns the script. The script answers:
 * - a conversation request (one with tools) with earlier history whose last user turn carries
 *   its own text besides tool results and `<system-reminder>`s (the shape of Claude Code's own
 *   compaction request, or a new prompt) with a summary text naming the markers read so far;
 * - any other conversation request with one `toolName` call `cat <next unread file>`, or the
 *   final text when all were read. A file counts as read when a tool_use for it has a
 *   tool_result in the request (even a cleared one) or its marker appears anywhere in the
 *   messages (e.g. in a summary), so retries and compacted histories continue where they were;
 * - a side request (no tools) with a short text, which also names the markers it was shown.
 */
export function fileReadScenario(opts: FileReadScenarioOptions): FileReadScenario {
  const count = opts.files ?? 30;
  const bytes = opts.bytes ?? 6000;
  const dir = path.resolve(opts.dir);
  fs.mkdirSync(dir, { recursive: true });
  const files: ScenarioFile[] = [];
  for (let i = 0; i < count; i++) {
    const name = `file-${String(i + 1).padStart(2, '0')}.txt`;
    const marker = `MARKER-${String(i + 1).padStart(2, '0')}-${randomBytes(5).toString('hex')}`;
    const file = path.join(dir, name);
    fs.writeFileSync(file, fileBody(marker, name, bytes));
    files.push({ path: file, marker });
  }
  const finalText = `All ${count} files read. FINAL-${randomBytes(6).toString('hex')}`;
  const recalledText = `The first file said: ${files[0]?.marker ?? ''} line 001`;
  const prompt = `Read the ${count} files ${dir}/file-01.txt to file-${String(count).padStart(2, '0')}.txt one at a time ` +
    `with the shell tool (cat), then say that you are done.`;

  const fileOfCommand = (input: unknown): number => {
    const command = typeof input === 'object' && input !== null ? (input as { command?: unknown }).command : undefined;
    if (typeof command !== 'string') return -1;
    return files.findIndex((f) => command.includes(f.path));
  };

  const allText = (body: MessagesBody): string =>
    (body.messages ?? [])
      .flatMap(blocksOf)
      .map((b) => (b.type === 'text' && typeof b.text === 'string' ? b.text : b.type === 'tool_result' ? toolResultText(b) : ''))
      .join('\n');

  const markersInToolResults = (body: MessagesBody): Set<string> => {
    const text = (body.messages ?? [])
      .flatMap(blocksOf)
      .filter((b) => b.type === 'tool_result')
      .map(toolResultText)
      .join('\n');
    return new Set(files.map((f) => f.marker).filter((m) => text.includes(m)));
  };

  const readIn = (body: MessagesBody): Set<number> => {
    const read = new Set<number>();
    const pending = new Map<string, number>();
    for (const block of (body.messages ?? []).flatMap(blocksOf)) {
      if (block.type === 'tool_use' && typeof block.id === 'string') {
        const i = fileOfCommand(block.input);
        if (i >= 0) pending.set(block.id, i);
      } else if (block.type === 'tool_result' && typeof block.tool_use_id === 'string') {
        const i = pending.get(block.tool_use_id);
        if (i !== undefined) read.add(i);
      }
    }
    const text = allText(body);
    files.forEach((f, i) => {
      if (text.includes(f.marker)) read.add(i);
    });
    return read;
  };

  const summary = (body: MessagesBody): string => {
    const read = [...readIn(body)].sort((a, b) => a - b);
    const markers = read.map((i) => files[i]?.marker).filter((m): m is string => m !== undefined);
    const said = markers.length > 0 ? `Read ${markers.length} files so far: ${markers.join(', ')}.` : 'Nothing read yet.';
    // Claude Code asks again, more firmly, when the answer has no <summary> block.
    return `<analysis>Files are read one by one.</analysis>\n<summary>${said}</summary>`;
  };

  /** The grep for the first file's marker, or, once its result is in, the final answer quoting it. */
  const recall = (body: MessagesBody): Answer => {
    const blocks = (body.messages ?? []).flatMap(blocksOf);
    const greps = new Set(blocks.filter((b) => b.type === 'tool_use' && b.name === 'transcript_grep').map((b) => b.id));
    const found = blocks.some((b) => b.type === 'tool_result' && greps.has(b.tool_use_id) && toolResultText(b).includes(recalledText.slice('The first file said: '.length)));
    if (found) return answer.text(`${finalText} ${recalledText}`);
    return answer.tool('transcript_grep', { pattern: `${files[0]?.marker ?? ''} line 001` }, 'Checking the first file once more.');
  };

  const script = (req: ScriptRequest): Answer => {
    const body = req.body;
    if (!req.conversation) {
      // Side calls: titles, topics, quota probes (max_tokens 1), summaries without tools.
      return req.body.max_tokens === 1 ? answer.text('ok') : answer.text(summary(body).slice(0, 2000));
    }
    if (isInstructionTurn(body)) return answer.text(summary(body));
    const read = readIn(body);
    const next = files.findIndex((_, i) => !read.has(i));
    if (next < 0) return opts.recall === true ? recall(body) : answer.text(finalText);
    const file = files[next];
    if (file === undefined) return answer.text(finalText);
    return answer.tool(opts.toolName, { command: `cat ${file.path}` }, `Reading ${path.basename(file.path)}.`);
  };

  return { files, finalText, recalledText, prompt, script, readIn, markersInToolResults };
}
