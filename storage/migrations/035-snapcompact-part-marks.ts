// Migration 35: each part of snapcompact's archive text holds the marks of the rows it holds
// (JSON [[offset, seq], ...], offsets in the whole archive's text), written with the part. A
// stage's commit then writes what that stage archived, not every mark of the archive again:
// near 100k archived rows, serializing them all took tens of milliseconds of the commit. Parts
// stored before have NULL here; their marks stay in the archive row's `marks`, which a load
// reads first.

export const sql = `
ALTER TABLE snapcompact_text ADD COLUMN marks TEXT;
`;
