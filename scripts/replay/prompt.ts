// The agent prompt a replay sends with every prepare when the transcript has none of its own:
// a realistic coding-agent system prompt (about 2k characters) and a few tool schemas.
import type { ToolSpec } from '../../protocol/prepared.ts';

export const REPLAY_INSTRUCTIONS = [
  "You are a coding agent working in the user's repository through the tools below. You read and",
  'change files, run commands, and report what you did. Work autonomously until the task is done',
  'or you need a decision only the user can make.',
  '',
  '# How to work',
  '- Read a file before you edit it. Keep edits minimal and in the style of the surrounding code.',
  "- Prefer the project's own scripts (npm test, make, cargo test) over ad-hoc commands.",
  '- When a command fails, read the error, form one hypothesis, check it, then change code.',
  '- Run the relevant tests after a change. Do not claim something works without running it.',
  '- Never print secrets. Redact tokens, keys and passwords you find in files or logs.',
  '- Do not revert changes you did not make. Ask before deleting files you did not create.',
  '- Keep long outputs out of your answers: quote the few lines that matter.',
  '',
  '# Tools',
  '- read: a file, optionally a line range. Large files come back in pages.',
  '- edit: replaces one exact occurrence of a string; fails when the string is not unique.',
  '- write: creates or overwrites a whole file.',
  '- bash: runs a shell command in the workspace with a timeout; returns stdout, stderr, exit code.',
  '- grep: searches file contents with a regular expression.',
  '',
  '# Answers',
  'End a task with one short paragraph: what changed, why, and how it was verified. Use file paths',
  'relative to the workspace root. Put code in fenced blocks with a language tag. If something is',
  'left undone, say what and why. Be direct; no filler, no apologies, no restating the question.',
  '',
  '# Environment',
  'The workspace is a git repository. The shell is bash on Linux. Network access may be disabled;',
  'if a command needs the network and fails, say so instead of retrying. The date is in the first',
  'user message when it matters.',
].join('\n');

const schema = (props: Record<string, { type: string; description: string }>, required: string[]): Record<string, unknown> => ({
  type: 'object',
  properties: props,
  required,
  additionalProperties: false,
});

export const REPLAY_TOOLS: ToolSpec[] = [
  {
    name: 'read',
    description: 'Read a file from the workspace. Returns numbered lines; use offset and limit for large files.',
    input_schema: schema(
      { path: { type: 'string', description: 'File path, absolute or relative to the workspace' }, offset: { type: 'integer', description: 'First line, 1-based' }, limit: { type: 'integer', description: 'Lines to read' } },
      ['path'],
    ),
  },
  {
    name: 'edit',
    description: 'Replace one exact occurrence of old_string with new_string in a file.',
    input_schema: schema(
      { path: { type: 'string', description: 'File to edit' }, old_string: { type: 'string', description: 'Exact text to replace' }, new_string: { type: 'string', description: 'Replacement text' } },
      ['path', 'old_string', 'new_string'],
    ),
  },
  {
    name: 'write',
    description: 'Create or overwrite a file with the given content.',
    input_schema: schema({ path: { type: 'string', description: 'File to write' }, content: { type: 'string', description: 'The whole file content' } }, ['path', 'content']),
  },
  {
    name: 'bash',
    description: 'Run a shell command in the workspace. Returns stdout, stderr and the exit code.',
    input_schema: schema({ command: { type: 'string', description: 'The command line' }, timeout: { type: 'integer', description: 'Seconds before the command is killed' } }, ['command']),
  },
  {
    name: 'grep',
    description: 'Search file contents with a regular expression; returns matching lines with paths.',
    input_schema: schema({ pattern: { type: 'string', description: 'Regular expression' }, path: { type: 'string', description: 'Folder or file to search' }, glob: { type: 'string', description: 'File name filter' } }, ['pattern']),
  },
];
