// Migration 33: each part of snapcompact's archive text records its length in UTF-16 code units
// (`chars`), so that loading an archive reads its lengths and not its text. The text is read a
// part at a time, when a layout or a fold page needs it; before, every kernel held the whole
// archive (150 MB of text at 100k archived rows). Parts written before this migration have no
// length and are read once to find it.

export const sql = `
ALTER TABLE snapcompact_text ADD COLUMN chars INTEGER;
`;
