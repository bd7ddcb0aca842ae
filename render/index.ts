// render/: text to 1-bit PNG frames in the X11 8x13 font. Knows nothing of sessions, transcripts
// or providers' APIs: callers bring text, a geometry (SHAPES, shapeFor) and the upstream's image
// edge, and get frames with their pixel sizes and cache keys. docs/render.md tells the story.
export { frameKey, renderFrame, type RenderedFrame } from './frame.ts';
export { clampGeometry, columnsOf, Geometry, SHAPES, shapeFor, shapeNameFor, type ShapeName } from './geometry.ts';
export { GLYPH_HEIGHT, GLYPH_TABLE_VERSION, GLYPH_WIDTH } from './glyphs.ts';
export { drawnText, layout, layoutFrames, MISSING_GLYPH, NEWLINE_GLYPH, TAB_CELLS, type Frame, type FrameMark, type LayoutOptions } from './layout.ts';
