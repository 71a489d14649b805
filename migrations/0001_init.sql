-- The ledger's first schema. Every table is append-only (triggers below);
-- every row is sealed by an entry in seal_chain (written by the ledger).

CREATE TABLE policy (
  version INTEGER PRIMARY KEY,
  gate_frac REAL NOT NULL,          -- significance gate as a fraction of the frontier
  tiers TEXT NOT NULL,              -- JSON [[name, lower bound fraction], ...]
  ceiling_ratio REAL NOT NULL,      -- head/base above this is implausible
  parity_min_top1 REAL NOT NULL,
  parity_max_mean_kl REAL NOT NULL,
  surprise_factor REAL NOT NULL,    -- measured > f x predicted or < predicted / f
  created_at TEXT NOT NULL
);

CREATE TABLE boxes (
  id INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL UNIQUE,
  detail TEXT NOT NULL
);

CREATE TABLE changes (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('change', 'revert', 'reapply')),
  title TEXT NOT NULL,
  author TEXT NOT NULL,
  claim_pct REAL,
  predict_pct REAL,
  claim_bit_identical INTEGER NOT NULL,
  metric TEXT NOT NULL,
  base_cmd TEXT NOT NULL,
  head_cmd TEXT NOT NULL,
  parity_cmd TEXT,
  base_parity_cmd TEXT,
  base_ref TEXT,                    -- ref submissions: the refs as given
  head_ref TEXT,
  base_sha TEXT,                    -- ... and the commits they resolved to
  head_sha TEXT,
  target_change INTEGER REFERENCES changes(id),  -- revert: the change; reapply: the revert
  reason TEXT,
  created_at TEXT NOT NULL,
  CHECK (kind != 'change' OR predict_pct IS NOT NULL)
);

CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  change_id INTEGER NOT NULL REFERENCES changes(id),
  purpose TEXT NOT NULL CHECK (purpose IN ('submit', 'remeasure', 'confirm', 'revert', 'reapply')),
  box_id INTEGER NOT NULL REFERENCES boxes(id),
  policy_version INTEGER NOT NULL REFERENCES policy(version),
  min_rounds INTEGER NOT NULL,
  max_rounds INTEGER NOT NULL,
  queue_id INTEGER,                 -- remeasure_queue entry this run answers
  started_at TEXT NOT NULL
);

CREATE TABLE artifacts (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  side TEXT NOT NULL CHECK (side IN ('base', 'head')),
  build_id TEXT NOT NULL,
  artifact_sha256 TEXT NOT NULL
);

CREATE TABLE parity_results (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  side TEXT NOT NULL CHECK (side IN ('base', 'head')),
  mode TEXT NOT NULL CHECK (mode IN ('standard', 'deep')),
  exit_code INTEGER NOT NULL,
  passed INTEGER NOT NULL,
  worst_top1 REAL,
  worst_mean_kl REAL,
  logits_sha256 TEXT,
  message TEXT NOT NULL,
  seconds REAL NOT NULL,            -- the command's own wall time
  raw_json TEXT
);

CREATE TABLE samples (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  round INTEGER NOT NULL,           -- 0 = warm-up (recorded, not scored)
  side TEXT NOT NULL CHECK (side IN ('base', 'head')),
  ord INTEGER NOT NULL,             -- position within the round (ABBA: 0..3)
  value REAL NOT NULL,
  seconds REAL NOT NULL,
  taken_at TEXT NOT NULL,
  box_id INTEGER NOT NULL REFERENCES boxes(id)
);

CREATE TABLE scores (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  policy_version INTEGER NOT NULL REFERENCES policy(version),
  verdict TEXT NOT NULL,
  tier TEXT NOT NULL,
  gain REAL,                        -- fraction of frontier_before
  ci_low REAL,
  ci_high REAL,
  gate REAL,                        -- absolute, in metric units
  frontier_before REAL,
  frontier_after REAL,
  base_median REAL,
  head_median REAL,
  rounds INTEGER NOT NULL,
  surprise INTEGER NOT NULL,
  note TEXT NOT NULL,
  scored_at TEXT NOT NULL
);

CREATE TABLE run_failures (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  message TEXT NOT NULL,
  failed_at TEXT NOT NULL
);

CREATE TABLE frontier_events (
  id INTEGER PRIMARY KEY,
  metric TEXT NOT NULL,
  box_id INTEGER NOT NULL REFERENCES boxes(id),
  value REAL NOT NULL,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  reason TEXT NOT NULL,             -- seed | accepted | confirmed | revert
  at TEXT NOT NULL
);

CREATE TABLE remeasure_queue (
  id INTEGER PRIMARY KEY,
  change_id INTEGER NOT NULL REFERENCES changes(id),
  frontier_event_id INTEGER NOT NULL REFERENCES frontier_events(id),
  queued_at TEXT NOT NULL
);

CREATE TABLE retractions (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  reason TEXT NOT NULL,
  replaced_by_run INTEGER REFERENCES runs(id),
  by_change INTEGER REFERENCES changes(id),   -- the reapply that retracted it, if any
  retracted_at TEXT NOT NULL
);

-- The seal chain: one entry per sealed row, in insertion order.
CREATE TABLE seal_chain (
  seq INTEGER PRIMARY KEY,
  tbl TEXT NOT NULL,
  row_id INTEGER NOT NULL,
  content_sha256 TEXT NOT NULL,
  prev_seal TEXT NOT NULL,
  seal TEXT NOT NULL
);

-- Append-only: history is never edited or deleted through the ledger's connection.
CREATE TRIGGER policy_no_update BEFORE UPDATE ON policy BEGIN SELECT RAISE(ABORT, 'policy is append-only'); END;
CREATE TRIGGER policy_no_delete BEFORE DELETE ON policy BEGIN SELECT RAISE(ABORT, 'policy is append-only'); END;
CREATE TRIGGER boxes_no_update BEFORE UPDATE ON boxes BEGIN SELECT RAISE(ABORT, 'boxes is append-only'); END;
CREATE TRIGGER boxes_no_delete BEFORE DELETE ON boxes BEGIN SELECT RAISE(ABORT, 'boxes is append-only'); END;
CREATE TRIGGER changes_no_update BEFORE UPDATE ON changes BEGIN SELECT RAISE(ABORT, 'changes is append-only'); END;
CREATE TRIGGER changes_no_delete BEFORE DELETE ON changes BEGIN SELECT RAISE(ABORT, 'changes is append-only'); END;
CREATE TRIGGER runs_no_update BEFORE UPDATE ON runs BEGIN SELECT RAISE(ABORT, 'runs is append-only'); END;
CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs BEGIN SELECT RAISE(ABORT, 'runs is append-only'); END;
CREATE TRIGGER artifacts_no_update BEFORE UPDATE ON artifacts BEGIN SELECT RAISE(ABORT, 'artifacts is append-only'); END;
CREATE TRIGGER artifacts_no_delete BEFORE DELETE ON artifacts BEGIN SELECT RAISE(ABORT, 'artifacts is append-only'); END;
CREATE TRIGGER parity_results_no_update BEFORE UPDATE ON parity_results BEGIN SELECT RAISE(ABORT, 'parity_results is append-only'); END;
CREATE TRIGGER parity_results_no_delete BEFORE DELETE ON parity_results BEGIN SELECT RAISE(ABORT, 'parity_results is append-only'); END;
CREATE TRIGGER samples_no_update BEFORE UPDATE ON samples BEGIN SELECT RAISE(ABORT, 'samples is append-only'); END;
CREATE TRIGGER samples_no_delete BEFORE DELETE ON samples BEGIN SELECT RAISE(ABORT, 'samples is append-only'); END;
CREATE TRIGGER scores_no_update BEFORE UPDATE ON scores BEGIN SELECT RAISE(ABORT, 'scores is append-only'); END;
CREATE TRIGGER scores_no_delete BEFORE DELETE ON scores BEGIN SELECT RAISE(ABORT, 'scores is append-only'); END;
CREATE TRIGGER run_failures_no_update BEFORE UPDATE ON run_failures BEGIN SELECT RAISE(ABORT, 'run_failures is append-only'); END;
CREATE TRIGGER run_failures_no_delete BEFORE DELETE ON run_failures BEGIN SELECT RAISE(ABORT, 'run_failures is append-only'); END;
CREATE TRIGGER frontier_events_no_update BEFORE UPDATE ON frontier_events BEGIN SELECT RAISE(ABORT, 'frontier_events is append-only'); END;
CREATE TRIGGER frontier_events_no_delete BEFORE DELETE ON frontier_events BEGIN SELECT RAISE(ABORT, 'frontier_events is append-only'); END;
CREATE TRIGGER remeasure_queue_no_update BEFORE UPDATE ON remeasure_queue BEGIN SELECT RAISE(ABORT, 'remeasure_queue is append-only'); END;
CREATE TRIGGER remeasure_queue_no_delete BEFORE DELETE ON remeasure_queue BEGIN SELECT RAISE(ABORT, 'remeasure_queue is append-only'); END;
CREATE TRIGGER retractions_no_update BEFORE UPDATE ON retractions BEGIN SELECT RAISE(ABORT, 'retractions is append-only'); END;
CREATE TRIGGER retractions_no_delete BEFORE DELETE ON retractions BEGIN SELECT RAISE(ABORT, 'retractions is append-only'); END;
CREATE TRIGGER seal_chain_no_update BEFORE UPDATE ON seal_chain BEGIN SELECT RAISE(ABORT, 'seal_chain is append-only'); END;
CREATE TRIGGER seal_chain_no_delete BEFORE DELETE ON seal_chain BEGIN SELECT RAISE(ABORT, 'seal_chain is append-only'); END;
