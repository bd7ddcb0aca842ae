// The OpenAI Chat Completions wire through the proxy (`POST /openai/v1/chat/completions`): pi's
// `openai-completions` provider, aider, opencode, and every OpenAI-compatible agent or local
// server. Its Wire for conversation.ts: the body read, the agent's system and developer
// messages kept as its prompt, usage asked for upstream when the agent did not ask for it.
import type { ToolSpec } from '../../protocol/prepared.ts';
import { ToolSpec as ToolSpecSchema } from '../../protocol/prepared.ts';
import { placeClientPrompt, splitClientPrompt } from './client-prompt.ts';
import { header } from './identity.ts';
import { ChatAnswerReader, UsageChunkFilter } from './openai-chat-stream.ts';
import { chatSplicer } from './openai-chat-splice.ts';
import { canonicalChatMessage, CHAT_WIRE, chatRequest, type ChatRequest, chatRows, chatText, chatTool, isPromptRole, preparedChatMessages, type ChatMessage } from './openai-chat-wire.ts';
import { openaiAccount, openaiError, openaiSummaryCall } from './openai-shared.ts';
import type { Wire, WireRequest } from './wire.ts';

function toolSpecs(tools: ChatRequest['tools']): ToolSpec[] {
  return (tools ?? []).flatMap((t) => {
    const fn = t.function;
    if (fn === undefined) return [];
    const spec = ToolSpecSchema.safeParse({ name: fn.name, description: typeof fn.description === 'string' ? fn.description : '', input_schema: typeof fn.parameters === 'object' && fn.parameters !== null ? fn.parameters : {} });
    return spec.success ? [spec.data] : [];
  });
}

/** A Chat Completions body as the proxy reads it. */
interface ChatRead extends WireRequest<ChatMessage> {
  /** The agent asked for the usage chunk itself. */
  wantsUsage: boolean;
}

function readChat(json: unknown, headers: Parameters<Wire<ChatMessage>['read']>[1]): ChatRead | { error: string } {
  const parsed = chatRequest.check(json);
  if ('issue' in parsed) return { error: `not a Chat Completions request: ${parsed.issue.path.join('.')}: ${parsed.issue.message}` };
  const body = parsed.data;
  const { conversation, prompt } = splitClientPrompt(body.messages, (m) => isPromptRole(m.role));
  const promptText = prompt.map((p) => chatText(p.message)).join('\n\n');
  const first = conversation.find((m) => m.role === 'user');
  const stream = body.stream === true;
  // Usage comes in a last chunk only when asked for; the proxy asks, and hides it if the agent did not.
  const addsUsage = stream && body.stream_options?.include_usage !== true;
  const capField = body.max_completion_tokens !== undefined && body.max_completion_tokens !== null ? 'max_completion_tokens' : 'max_tokens';
  return {
    model: body.model,
    stream,
    tools: toolSpecs(body.tools),
    conversation,
    prompt: promptText,
    maxTokens: body[capField] ?? undefined,
    uncompactable: null,
    identity: { account: openaiAccount(headers), sessionId: header(headers, 'session-id') ?? header(headers, 'x-session-id') ?? body.prompt_cache_key, prompt: promptText, opening: first === undefined ? '' : canonicalChatMessage(first) },
    outgoing(prepared, image, maxTokens) {
      const own: ChatMessage[] = prepared.system === '' ? [] : [{ role: 'system', content: prepared.system }];
      const out: Record<string, unknown> = { ...body, messages: placeClientPrompt(preparedChatMessages(prepared.inputs, image), prompt, own) };
      if (maxTokens !== undefined && maxTokens !== body[capField]) out[capField] = maxTokens;
      if (addsUsage) out.stream_options = { ...(body.stream_options ?? {}), include_usage: true };
      return out;
    },
    clientFilter: () => (addsUsage ? new UsageChunkFilter() : null),
    wantsUsage: stream && !addsUsage,
  };
}

/** OpenAI Chat Completions (`POST /openai/v1/chat/completions`). */
export const chatWire: Wire<ChatMessage, ChatRead> = {
  name: CHAT_WIRE,
  historyKey: 'messages',
  provider: () => CHAT_WIRE,
  canonical: canonicalChatMessage,
  rows: chatRows,
  isAnswer: (m) => m.role === 'assistant',
  label: (m) => m.role,
  read: (json, headers) => readChat(json, headers),
  reader: (streamed) => new ChatAnswerReader(streamed),
  errorBody: openaiError,
  summaryCall: (headers, upstream, model) => openaiSummaryCall('openai-chat', headers, upstream, model),
  memoryTools: {
    addTools(body, tools, last) {
      const own = Array.isArray(body.tools) ? (body.tools as unknown[]) : [];
      const out: Record<string, unknown> = { ...body, tools: [...own, ...tools.map(chatTool)] };
      if (last) out.tool_choice = 'none';
      return out;
    },
    splicer: (request, isMemoryTool) => chatSplicer(request.stream, request.wantsUsage, isMemoryTool),
  },
};
