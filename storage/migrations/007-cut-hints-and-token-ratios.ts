// Migration 7: where an exchange-level cut resumes (a hint next to rolling's cut_seq), and the
// measured-to-estimated token ratio learned from usage reports, per session and model.

export const sql = `
-- For a cut inside a unit: the first seq after the evicted exchanges (NULL for older saves,
-- which are whole-unit cuts: the tail resumes at cut_seq).
ALTER TABLE rolling_state ADD COLUMN resume_seq INTEGER;

-- Provider-measured input tokens per locally estimated token. model is '' when unknown.
CREATE TABLE token_ratios (
  sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
  model TEXT NOT NULL,
  ratio REAL NOT NULL,
  reports INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (sid, model)
) STRICT;
CREATE INDEX token_ratios_model ON token_ratios(model, updated_at);
`;
