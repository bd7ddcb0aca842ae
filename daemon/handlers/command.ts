// Slash commands as operators and agent UIs type them: /compact [strategy] [focus…],
// /context, /extensions [list | enable … | disable …], /reload. Each maps onto the method of
// the same meaning and also returns a terminal rendering.
import { RpcCode, rpcError } from '../../protocol/errors.ts';
import { methods } from '../../protocol/methods.ts';
import type { CallContext, Handler } from '../context.ts';
import { renderObservation } from '../context-text.ts';
import type { Registry } from '../../strategies/extensions/catalog.ts';
import { compact, context } from './compaction.ts';
import { extensionsList, extensionsSelect, reload } from './extensions.ts';

function needSession(session: string | undefined, command: string): string {
  if (session === undefined) {
    throw rpcError(RpcCode.InvalidParams, 'invalid_params', `/${command} needs a session`, { command });
  }
  return session;
}

/**
 * `/compact lcm keep the API decisions` compacts with lcm, focused on the rest; a first word
 * that names no strategy is part of the focus, as in other agents' /compact.
 */
export function parseCompact(rest: string, registry: Registry): { strategy: string | undefined; focus: string | undefined } {
  const trimmed = rest.trim();
  if (trimmed === '') return { strategy: undefined, focus: undefined };
  const first = trimmed.split(/\s+/)[0] ?? '';
  if (registry.get(first)?.kind === 'strategy') {
    const focus = trimmed.slice(first.length).trim();
    return { strategy: first, focus: focus === '' ? undefined : focus };
  }
  return { strategy: undefined, focus: trimmed };
}

async function run(line: string, session: string | undefined, ctx: CallContext): Promise<{ command: string; result: unknown; text: string }> {
  const m = /^\/([a-z]+)(?:\s+([\s\S]*))?$/.exec(line.trim());
  if (m === null) throw rpcError(RpcCode.InvalidParams, 'unknown_command', `not a slash command: "${line.slice(0, 80)}"`);
  const name = m[1]!;
  const rest = (m[2] ?? '').trim();
  switch (name) {
    case 'compact': {
      const { strategy, focus } = parseCompact(rest, ctx.daemon.config().modules.registry);
      const result = await compact(methods.compact.params.parse({ session: needSession(session, name), strategy, focus }), ctx);
      const head = result.compacted ? `compacted with ${result.strategy}` : `not compacted: ${result.reason ?? 'nothing to do'}`;
      return { command: name, result, text: `${head}\n\n${renderObservation(result.observation)}` };
    }
    case 'context': {
      const result = await context({ session: needSession(session, name), format: 'text' }, ctx);
      return { command: name, result: result.observation, text: result.text ?? '' };
    }
    case 'extensions': {
      const [verb = 'list', ...names] = rest === '' ? [] : rest.split(/\s+/);
      if (verb === 'enable' || verb === 'disable') {
        if (names.length === 0) throw rpcError(RpcCode.InvalidParams, 'invalid_params', `/extensions ${verb} needs extension names`);
        const result = await extensionsSelect(methods['extensions.select'].params.parse({ session, [verb]: names }), ctx);
        return { command: name, result, text: `strategy: ${result.strategy ?? 'none'}\nenabled: ${result.enabled.join(', ')}` };
      }
      if (verb !== 'list') throw rpcError(RpcCode.InvalidParams, 'invalid_params', `/extensions takes list, enable or disable, not "${verb}"`);
      const result = await extensionsList({ session }, ctx);
      const text = result.extensions
        .map((e) => `${e.enabled ? '[x]' : '[ ]'} ${e.name.padEnd(19)} ${e.kind.padEnd(8)} ${e.available ? '' : '(not in this build) '}${e.chosen_by === 'default' ? '' : `(${e.chosen_by}) `}${e.description}`)
        .join('\n');
      return { command: name, result, text: `strategy: ${result.strategy ?? 'none'}\n${text}` };
    }
    case 'reload': {
      const result = await reload({}, ctx);
      const errors = result.config_errors.map((e) => `\nconfig error in ${e.file}: ${e.message}`).join('');
      return { command: name, result, text: `configuration version ${result.version}${errors}` };
    }
    default:
      throw rpcError(RpcCode.InvalidParams, 'unknown_command', `unknown command /${name} (known: /compact, /context, /extensions, /reload)`, {
        command: name,
      });
  }
}

export const command: Handler<'command'> = (params, ctx) => run(params.line, params.session, ctx);
