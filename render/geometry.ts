// Frame geometry: the cell grid a frame is drawn on, the shape each model family reads best, and
// the clamp that fits a shape inside an upstream's largest image edge. Which shape a session
// uses, and which edge its upstream declares, is for the caller to decide.
import { z } from 'zod';
import { GLYPH_HEIGHT, GLYPH_WIDTH } from './glyphs.ts';

/** Largest frame edge accepted at all, in pixels: well past any provider's limit. */
const MAX_FRAME_PX = 8192;

/**
 * A frame's cell grid. Units: pixels for the first three, rows of cells for the last. A glyph
 * is drawn centred in its advance × pitch cell, so neither may be smaller than the glyph.
 */
export const Geometry = z.strictObject({
  /** Horizontal distance between cells (px). */
  advance: z.number().int().min(GLYPH_WIDTH).max(64),
  /** Vertical distance between rows of cells (px). */
  pitch: z.number().int().min(GLYPH_HEIGHT).max(64),
  /** Widest a frame may be (px); the frame is as wide as the whole cells that fit. */
  frameWidth: z.number().int().min(GLYPH_WIDTH).max(MAX_FRAME_PX),
  /** Rows of cells in a full frame. */
  rows: z.number().int().positive().max(MAX_FRAME_PX),
});
export type Geometry = z.infer<typeof Geometry>;

/**
 * The frame shapes per model family. Each keeps a full frame inside what the family reads at
 * native resolution (Claude before 4.7 shrinks anything past about 1.15 MP or 1568 px, and
 * 8x13 text does not survive the shrink), which is why Claude gets wide cells and fewer rows.
 */
export const SHAPES = {
  /** Claude, and any model we cannot place: 142 × 44 cells, 1562 × 704 px. */
  claude: { advance: 11, pitch: 16, frameWidth: 1568, rows: 44 },
  /** GPT and the o-series: 196 × 56 cells, 1568 × 1232 px. */
  gpt: { advance: 8, pitch: 22, frameWidth: 1568, rows: 56 },
  /** Gemini: 256 × 64 cells, 2048 × 1408 px. */
  gemini: { advance: 8, pitch: 22, frameWidth: 2048, rows: 64 },
} as const satisfies Record<string, Geometry>;
export type ShapeName = keyof typeof SHAPES;

/**
 * The family a request's provider and model belong to. The model id decides first, because
 * aggregators (openrouter, bedrock) serve every family under their own provider name; the
 * provider decides for ids that name no family; anything else reads frames as Claude does,
 * the most conservative shape.
 */
export function shapeNameFor(provider: string | undefined, model: string | undefined): ShapeName {
  const m = (model ?? '').toLowerCase();
  if (m.includes('claude')) return 'claude';
  if (m.includes('gemini')) return 'gemini';
  if (m.includes('gpt') || m.includes('codex') || /(?:^|[/:])o\d/.test(m)) return 'gpt';
  const p = (provider ?? '').toLowerCase();
  if (p === 'openai' || p.startsWith('openai-') || p === 'azure-openai') return 'gpt';
  if (p.startsWith('google')) return 'gemini';
  return 'claude';
}

export function shapeFor(provider: string | undefined, model: string | undefined): Geometry {
  return { ...SHAPES[shapeNameFor(provider, model)] };
}

/** Whole cells across a frame of this geometry. */
export function columnsOf(g: Geometry): number {
  return Math.floor(g.frameWidth / g.advance);
}

/**
 * The geometry narrowed and shortened so that no frame edge exceeds `maxEdgePx`: fewer columns
 * and fewer rows, the cell itself untouched, because a frame that the upstream scaled would
 * blur 8x13 text past reading. Never refuses: an edge smaller than one cell still leaves one
 * cell (that frame is then larger than the edge, which only a nonsensical limit can cause).
 */
export function clampGeometry(geometry: Geometry, maxEdgePx: number): Geometry {
  const g = Geometry.parse(geometry);
  const edge = z.number().int().positive().parse(maxEdgePx);
  return {
    ...g,
    frameWidth: Math.min(g.frameWidth, Math.max(g.advance, edge)),
    rows: Math.min(g.rows, Math.max(1, Math.floor(edge / g.pitch))),
  };
}
