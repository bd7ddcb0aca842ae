// The OpenAI Responses wire through the proxy (`POST /openai/v1/responses`), Codex's wire: its
// Wire for conversation.ts, one per upstream (reasoning and opaque items are keyed by it), and
// `/responses/compact`, Codex's own compaction, which is reconciled, forwarded as it came, and
// whose returned items are stored and counted for /context.
import type { ToolSpec } from '../../protocol/prepared.ts';
import { ToolSpec as ToolSpecSchema } from '../../protocol/prepared.ts';
import { noteClientCompaction } from '../../storage/log/proxy-state.ts';
import { placeClientPrompt, splitClientPrompt } from './client-prompt.ts';
import { forward, openRequest, type ProxyCall } from './conversation.ts';
import { header } from './identity.ts';
import { openaiAccount, openaiError, openaiSummaryCall } from './openai-shared.ts';
import { responsesSplicer } from './openai-responses-splice.ts';
import { ResponsesAnswerReader, responseAnswer } from './openai-responses-stream.ts';
import { canonicalItem, inputItems, isPromptItem, itemRows, itemText, preparedItems, RESPONSES_WIRE, responsesRequest, type ResponsesRequest, responsesProvider, type Item } from './openai-responses-wire.ts';
import { appendRound, proxySessionFor, reconcile } from './reconcile.ts';
import type { Wire, WireRequest } from './wire.ts';

function toolSpecs(tools: ResponsesRequest['tools']): ToolSpec[] {
  return (tools ?? []).flatMap((t) => {
    // Function tools carry a schema; built-in ones (web_search, local_shell) are named by their type.
    const name = t.name ?? t.type;
    if (name === undefined) return [];
    const spec = ToolSpecSchema.safeParse({ name, description: typeof t.description === 'string' ? t.description : '', input_schema: typeof t.parameters === 'object' && t.parameters !== null ? t.parameters : {} });
    return spec.success ? [spec.data] : [];
  });
}

function readResponses(json: unknown, headers: Parameters<Wire<Item>['read']>[1]): WireRequest<Item> | { error: string } {
  const parsed = responsesRequest.check(json);
  if ('issue' in parsed) return { error: `not a Responses request: ${parsed.issue.path.join('.')}: ${parsed.issue.message}` };
  const body = parsed.data;
  const { conversation, prompt } = splitClientPrompt(inputItems(body.input), isPromptItem);
  const promptText = [body.instructions ?? '', ...prompt.map((p) => itemText(p.message))].filter((t) => t !== '').join('\n\n');
  const first = conversation.find((m) => m.type === 'message' && m.role === 'user');
  return {
    model: body.model,
    stream: body.stream === true,
    tools: toolSpecs(body.tools),
    conversation,
    prompt: promptText,
    maxTokens: body.max_output_tokens ?? undefined,
    // The history is the provider's: the request carries only what follows it.
    uncompactable: typeof body.previous_response_id === 'string' && body.previous_response_id !== '' ? 'previous_response_id: the history is kept by the provider' : null,
    identity: { account: openaiAccount(headers), sessionId: header(headers, 'session-id') ?? body.prompt_cache_key, prompt: promptText, opening: first === undefined ? '' : canonicalItem(first) },
    outgoing(prepared, image, maxTokens) {
      const own: Item[] = prepared.system === '' ? [] : [{ type: 'message', role: 'developer', content: [{ type: 'input_text', text: prepared.system }] }];
      const out: Record<string, unknown> = { ...body, input: placeClientPrompt(preparedItems(prepared.inputs, image), prompt, own) };
      if (maxTokens !== undefined && maxTokens !== body.max_output_tokens) out.max_output_tokens = maxTokens;
      return out;
    },
    clientFilter: () => null,
  };
}

const wires = new Map<string, Wire<Item>>();

/** The Responses wire for one upstream. */
export function responsesWire(upstream: string): Wire<Item> {
  let wire = wires.get(upstream);
  if (wire === undefined) {
    const provider = responsesProvider(upstream);
    wire = {
      name: RESPONSES_WIRE,
      historyKey: 'input',
      provider: () => provider,
      canonical: canonicalItem,
      rows: (item) => itemRows(provider, item),
      isAnswer: (item) => item.type !== 'function_call_output' && !(item.type === 'message' && item.role !== 'assistant'),
      label: (item) => (item.type === 'message' ? `message (${String(item.role)})` : String(item.type ?? 'item')),
      read: (json, headers) => readResponses(json, headers),
      reader: (streamed) => new ResponsesAnswerReader(streamed),
      errorBody: openaiError,
      summaryCall: (headers, up, model) => openaiSummaryCall('openai-responses', headers, up, model),
      memoryTools: {
        addTools(body, tools, last) {
          const own = Array.isArray(body.tools) ? (body.tools as unknown[]) : [];
          const out: Record<string, unknown> = { ...body, tools: [...own, ...tools.map((t) => ({ type: 'function', name: t.name, description: t.description, parameters: t.input_schema, strict: false }))] };
          if (last) out.tool_choice = 'none';
          return out;
        },
        splicer: (request, isMemoryTool) => responsesSplicer(request.stream, isMemoryTool),
      },
    };
    wires.set(upstream, wire);
  }
  return wire;
}

/**
 * `POST /responses/compact`: the agent compacts its own history. Its new items are stored, the
 * request goes up as it came (the agent asked for its history to be compacted, not ours), and
 * the items the upstream returns are kept in the transcript as the agent's compaction.
 */
export async function handleResponsesCompact(call: ProxyCall): Promise<void> {
  const { daemon } = call;
  const wire = responsesWire(call.upstream);
  const method = 'proxy openai-responses compact';
  const opened = await openRequest(call, wire);
  if (opened === null) return;
  const { abort, request, id } = opened;
  let target: { sid: number; name: string } | null = null;
  let turn = 0;
  try {
    if (request.conversation.length > 0 && request.uncompactable === null) {
      const session = proxySessionFor(daemon.db, wire.name, id);
      const r = await daemon.kernels.run(session.name, () => reconcile(daemon.db, wire, session, request.conversation, { maxImageBytes: daemon.settings.maxImageBytes }), 'transcript');
      daemon.rowsAdded();
      target = r.target;
      turn = r.links.length;
    }
  } catch (err) {
    daemon.log.error({ err, session: id.stem, method }, 'the compaction request could not be reconciled; forwarding it unchanged');
  }
  let json = '';
  await forward(call, wire, call.body, false, abort.signal, {
    chunk: (t) => (json += t),
    end: async (ok) => {
      if (!ok || target === null) return;
      const t = target;
      try {
        const answer = responseAnswer({ status: 'completed', ...(JSON.parse(json) as object) });
        if (answer === null) return;
        await daemon.kernels.run(t.name, () => appendRound(daemon.db, t, turn, 0, answer.messages.flatMap((item) => wire.rows(item))), 'transcript');
        daemon.rowsAdded();
        noteClientCompaction(daemon.db, t.sid);
      } catch (err) {
        daemon.log.warn({ err, session: t.name, method }, "the agent's compaction was forwarded but not stored");
      }
    },
  });
}
