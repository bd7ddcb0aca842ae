// Our own facts for the models catalog: which of the package's providers we map and under what
// provider name, and what the package does not say (input modalities, the native image edge) or
// says less exactly than the vendor. Only `scripts/catalog/generate.ts` reads this; every rule
// names its source. A rule for a family whose every documented model reads images also covers
// its later models; elsewhere an unsure model is text-only, since a text model sent an image
// fails the request while a vision model taken for text-only only loses its images.

/** One provider of the package whose models the catalog takes. */
export interface SourceProvider {
  /** The package's provider id. */
  readonly id: string;
  /** Models of that provider we take, by the package's model id (lower case). */
  readonly include: RegExp;
  /** The provider name the catalog entry carries (what clients report; see `prepare {provider}`). */
  readonly provider: string;
  /** Prefix of the same model's id on OpenRouter, consulted when the provider gives no window. */
  readonly openrouterPrefix?: string;
}

/** In this order: a model id another source already gave is not taken again. */
export const SOURCES: readonly SourceProvider[] = [
  { id: 'anthropic', include: /^claude-/, provider: 'anthropic', openrouterPrefix: 'anthropic/' },
  { id: 'openai', include: /^(?:gpt-|o\d|chatgpt-|codex-)/, provider: 'openai', openrouterPrefix: 'openai/' },
  { id: 'google', include: /^gemini-/, provider: 'google', openrouterPrefix: 'google/' },
  { id: 'deepseek', include: /^deepseek-/, provider: 'deepseek', openrouterPrefix: 'deepseek/' },
  // The package has no Qwen provider of its own; OpenRouter's qwen/ entries carry the ids
  // people use (qwen3-coder, qwen3-max, ...) and OpenRouter's list prices.
  { id: 'openrouter', include: /^qwen\/[^:]+$/, provider: 'qwen' },
];

/** Models that are not text chat (embeddings, speech, realtime audio, image output, fine-tunes). */
export const NOT_CHAT = /(?:^ft:|\.ft-|embed|tts|transcribe|whisper|realtime|audio|image|live|-search|moderation|computer-use)/;

export interface ModalityRule {
  readonly match: RegExp;
  readonly input: readonly ['text'] | readonly ['text', 'image'];
  /** Longest image edge (pixels) read at native resolution, when the vendor documents one. */
  readonly max_image_edge_px?: number;
}

/** First match wins, on the catalog id. A model no rule matches stops the generator. */
export const MODALITIES: readonly ModalityRule[] = [
  // Anthropic, "Vision" docs: image input starts with the Claude 3 family.
  { match: /^claude-(?:2|v1|instant)/, input: ['text'] },
  // Anthropic, "Vision" docs: every Claude 3 and later model reads images; an image whose long
  // edge is over 1568 px is scaled down first (the figure models.json carried before).
  { match: /^claude-/, input: ['text', 'image'], max_image_edge_px: 1568 },
  // OpenAI, gpt-oss model card: text only.
  { match: /^gpt-oss/, input: ['text'] },
  // OpenAI model pages: GPT-3.5, the original GPT-4 (8k, 32k, the 2023 turbo previews), o1-mini,
  // o1-preview and o3-mini take text only.
  { match: /^(?:gpt-3\.5|gpt-4$|gpt-4-0|gpt-4-32k|o1-mini|o1-preview|o3-mini)/, input: ['text'] },
  // OpenAI model pages ("Input: text, image"): GPT-4 Turbo with vision, GPT-4o, GPT-4.1,
  // GPT-4.5, GPT-5.x, o1, o3, o4-mini and their pro/deep-research variants, codex-mini; later
  // GPT generations (gpt-6-*) and the ChatGPT aliases (chatgpt-4o, gpt-chat), which point at them,
  // by the family rule above.
  { match: /^(?:gpt-4|gpt-\d|gpt-chat|chatgpt-4o|o\d|codex-mini)/, input: ['text', 'image'] },
  // Google, Gemini API docs: Gemini 1.0 Pro took text only (its images went to 1.0 Pro Vision).
  { match: /^gemini-(?:pro|1\.0-pro)$/, input: ['text'] },
  // Google, Gemini API "Models" page: every later Gemini model takes text, images, audio and video.
  { match: /^gemini-/, input: ['text', 'image'] },
  // DeepSeek API docs: the chat and reasoner models take text only.
  { match: /^deepseek-/, input: ['text'] },
  // Qwen model cards: the VL and Omni models read images; the others (Qwen3, Qwen3-Coder,
  // Qwen-Max/Plus/Turbo, and Qwen3.5 until its API says otherwise) are taken as text only.
  { match: /^qwen.*(?:vl|omni)/, input: ['text', 'image'] },
  { match: /^qwen/, input: ['text'] },
];

/** Context windows (tokens) we state ourselves: where the package has none, or rounds the vendor's figure. */
export const CONTEXT_WINDOWS: Readonly<Record<string, number>> = {
  // OpenAI model pages list 1,047,576 tokens for the GPT-4.1 family; the package rounds to 1,000,000.
  'gpt-4.1': 1_047_576,
  'gpt-4.1-mini': 1_047_576,
  'gpt-4.1-nano': 1_047_576,
  // Google, Gemini API "Models" page: Gemini 3 Pro Preview reads 1,048,576 input tokens; the package has no window.
  'gemini-3-pro-preview': 1_048_576,
  // Qwen3-Coder-480B-A35B-Instruct model card: 256K (262,144) tokens native; the package has no window.
  'qwen3-coder': 262_144,
};

/** Everything above, as the generator takes it (tests hand it smaller tables). */
export interface CatalogFacts {
  readonly sources: readonly SourceProvider[];
  readonly notChat: RegExp;
  readonly modalities: readonly ModalityRule[];
  readonly contextWindows: Readonly<Record<string, number>>;
}

export const FACTS: CatalogFacts = { sources: SOURCES, notChat: NOT_CHAT, modalities: MODALITIES, contextWindows: CONTEXT_WINDOWS };
