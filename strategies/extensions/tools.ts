// The memory tools as the model sees them: the enabled extensions' tools (each defined, with how
// it runs, in its extension's folder and listed by strategies/index.ts), as names,
// descriptions and JSON input schemas. Running them is the daemon's job (daemon/handlers/tools.ts).
import { z } from 'zod';
import type { ToolSpec } from '../../protocol/prepared.ts';
import type { ExtensionSet, MemoryTool } from '../index.ts';

export function enabledMemoryTools(set: ExtensionSet, enabled: readonly string[]): MemoryTool[] {
  return set.tools.filter((t) => enabled.includes(t.extension));
}

const specs = new Map<MemoryTool, ToolSpec>();

/** The tool as the model sees it. Built once per tool: the schemas never change at run time. */
export function toolSpec(t: MemoryTool): ToolSpec {
  let spec = specs.get(t);
  if (spec === undefined) {
    spec = { name: t.name, description: t.description, input_schema: z.toJSONSchema(t.args, { io: 'input' }) };
    specs.set(t, spec);
  }
  return spec;
}
