// Migration 27: the instructions a `capabilities changed` notice told a session's model of, when
// a restart found the client's instructions changed and kept the old system prompt (known_told
// holds the extension context such a notice told). Null while no notice stands for them.

export const sql = `
ALTER TABLE sessions ADD COLUMN known_told_instructions TEXT;
`;
