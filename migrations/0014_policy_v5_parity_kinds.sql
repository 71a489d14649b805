-- Issue 27: policy v5, parity evidence for engines that are not verity. Each
-- parity kind a policy version accepts states its own floor: verity's own
-- records and an engine's logits files by depths and positions, an engine's
-- greedy output (token identity) by bytes compared. New facts in a new sealed
-- table, as always.

-- The floor of each parity kind a policy version accepts (one row per kind).
CREATE TABLE policy_parity_kinds (
  id INTEGER PRIMARY KEY,
  version INTEGER NOT NULL REFERENCES policy(version),
  kind TEXT NOT NULL,               -- "verity", "logits", "tokens"
  min_depths INTEGER NOT NULL,      -- depths of logits scored (0: not a depth kind)
  min_positions INTEGER NOT NULL,   -- positions scored per depth
  min_bytes INTEGER NOT NULL,       -- bytes of output compared (0: not a byte kind)
  rule TEXT NOT NULL,               -- the floor in words
  UNIQUE (version, kind)
);

CREATE TRIGGER policy_parity_kinds_no_update BEFORE UPDATE ON policy_parity_kinds BEGIN SELECT RAISE(ABORT, 'policy_parity_kinds is append-only'); END;
CREATE TRIGGER policy_parity_kinds_no_delete BEFORE DELETE ON policy_parity_kinds BEGIN SELECT RAISE(ABORT, 'policy_parity_kinds is append-only'); END;
