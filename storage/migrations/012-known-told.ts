// Migration 12: the extension context a session's model was last told of by a `capabilities
// changed` notice, beside the one its system prompt carries (known_context). A kernel that
// adopts a pinned session after an unload then keeps the pin without telling the model twice.

export const sql = `
ALTER TABLE sessions ADD COLUMN known_told TEXT;
`;
