-- Issue 14: `verity bisect`. A bisect session searches the first-parent
-- commits between a good and a bad ref for the first one that is slower than
-- the good one by more than a threshold (or, when parity breaks, the first one
-- that fails parity). Its measurements are the runs of purpose 'bisect'. They
-- live in their own tables, not in `runs`: a `runs` row belongs to a change
-- (and its CHECK on purpose shipped in 0001), and a bisect measurement is not
-- a submission. Because frontier_events.run_id references `runs`, a bisect run
-- cannot move or seed a frontier by construction, and drift (which reads
-- `runs` and `samples`) never mixes old commits measured out of order into
-- main's series.
CREATE TABLE bisect_sessions (
  id INTEGER PRIMARY KEY,
  repo TEXT NOT NULL,
  good_ref TEXT NOT NULL,
  good_sha TEXT NOT NULL,
  bad_ref TEXT NOT NULL,
  bad_sha TEXT NOT NULL,
  metric TEXT NOT NULL,
  threshold_pct REAL NOT NULL,        -- a commit is bad when slower than good by more than this
  commits INTEGER NOT NULL,           -- first-parent commits in (good, bad]
  box_id INTEGER NOT NULL REFERENCES boxes(id),
  policy_version INTEGER NOT NULL REFERENCES policy(version),
  bench_args TEXT NOT NULL,           -- what each commit's binary ran, e.g. " bench --model ... --steps 64"
  started_at TEXT NOT NULL
);

-- One measurement of one commit: its parity, then ABBA rounds against good.
CREATE TABLE bisect_runs (
  id INTEGER PRIMARY KEY,
  session_id INTEGER NOT NULL REFERENCES bisect_sessions(id),
  purpose TEXT NOT NULL CHECK (purpose = 'bisect'),
  commit_sha TEXT NOT NULL,
  against_sha TEXT NOT NULL,          -- the good commit it is measured against
  bench_cmd TEXT,                     -- NULL when the commit never built
  parity_cmd TEXT,
  min_rounds INTEGER NOT NULL,
  max_rounds INTEGER NOT NULL,
  started_at TEXT NOT NULL
);

-- The parity evidence of a bisect run's commit, as judged by the ledger's gate.
CREATE TABLE bisect_parity (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES bisect_runs(id),
  exit_code INTEGER NOT NULL,
  passed INTEGER NOT NULL,
  worst_top1 REAL,
  worst_mean_kl REAL,
  artifact_sha256 TEXT,
  message TEXT NOT NULL,
  raw_json TEXT
);

-- Every timed sample of a bisect run; round 0 is the warm-up.
CREATE TABLE bisect_samples (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES bisect_runs(id),
  round INTEGER NOT NULL,
  side TEXT NOT NULL CHECK (side IN ('good', 'step')),
  ord INTEGER NOT NULL,
  value REAL NOT NULL,
  seconds REAL NOT NULL,
  build_id TEXT NOT NULL,
  artifact_sha256 TEXT NOT NULL,
  taken_at TEXT NOT NULL
);

-- One row per step, written when the step is decided.
CREATE TABLE bisect_steps (
  id INTEGER PRIMARY KEY,
  session_id INTEGER NOT NULL REFERENCES bisect_sessions(id),
  run_id INTEGER NOT NULL REFERENCES bisect_runs(id),
  role TEXT NOT NULL CHECK (role IN ('endpoint', 'step')),
  search TEXT NOT NULL CHECK (search IN ('speed', 'correctness')),
  commit_sha TEXT NOT NULL,
  subject TEXT NOT NULL,
  verdict TEXT NOT NULL CHECK (verdict IN ('good', 'bad', 'untestable', 'parity-fail')),
  decided_by TEXT NOT NULL CHECK (decided_by IN ('parity', 'bounds', 'median', 'build')),
  workload TEXT,
  ratio REAL,                         -- median round ratio, oriented so that > 1 is faster than good
  ci_low REAL,
  ci_high REAL,
  alpha REAL,                         -- one-sided level of each bound
  rounds INTEGER NOT NULL,
  remeasured INTEGER NOT NULL,        -- 1 when the CI straddled the threshold and more rounds were taken
  note TEXT NOT NULL,
  decided_at TEXT NOT NULL
);

-- How a session ended. kind: 'speed' (first commit slower than good by more
-- than the threshold), 'correctness' (first commit failing parity),
-- 'nothing' (the endpoints gave nothing to search). culprit_sha is NULL when
-- skipped commits leave several candidates (listed, JSON).
CREATE TABLE bisect_results (
  id INTEGER PRIMARY KEY,
  session_id INTEGER NOT NULL REFERENCES bisect_sessions(id),
  kind TEXT NOT NULL CHECK (kind IN ('speed', 'correctness', 'nothing')),
  culprit_sha TEXT,
  candidates TEXT NOT NULL,
  workload TEXT,
  steps INTEGER NOT NULL,
  skipped INTEGER NOT NULL,
  summary TEXT NOT NULL,
  finished_at TEXT NOT NULL
);

CREATE TRIGGER bisect_sessions_no_update BEFORE UPDATE ON bisect_sessions BEGIN SELECT RAISE(ABORT, 'bisect_sessions is append-only'); END;
CREATE TRIGGER bisect_sessions_no_delete BEFORE DELETE ON bisect_sessions BEGIN SELECT RAISE(ABORT, 'bisect_sessions is append-only'); END;
CREATE TRIGGER bisect_runs_no_update BEFORE UPDATE ON bisect_runs BEGIN SELECT RAISE(ABORT, 'bisect_runs is append-only'); END;
CREATE TRIGGER bisect_runs_no_delete BEFORE DELETE ON bisect_runs BEGIN SELECT RAISE(ABORT, 'bisect_runs is append-only'); END;
CREATE TRIGGER bisect_parity_no_update BEFORE UPDATE ON bisect_parity BEGIN SELECT RAISE(ABORT, 'bisect_parity is append-only'); END;
CREATE TRIGGER bisect_parity_no_delete BEFORE DELETE ON bisect_parity BEGIN SELECT RAISE(ABORT, 'bisect_parity is append-only'); END;
CREATE TRIGGER bisect_samples_no_update BEFORE UPDATE ON bisect_samples BEGIN SELECT RAISE(ABORT, 'bisect_samples is append-only'); END;
CREATE TRIGGER bisect_samples_no_delete BEFORE DELETE ON bisect_samples BEGIN SELECT RAISE(ABORT, 'bisect_samples is append-only'); END;
CREATE TRIGGER bisect_steps_no_update BEFORE UPDATE ON bisect_steps BEGIN SELECT RAISE(ABORT, 'bisect_steps is append-only'); END;
CREATE TRIGGER bisect_steps_no_delete BEFORE DELETE ON bisect_steps BEGIN SELECT RAISE(ABORT, 'bisect_steps is append-only'); END;
CREATE TRIGGER bisect_results_no_update BEFORE UPDATE ON bisect_results BEGIN SELECT RAISE(ABORT, 'bisect_results is append-only'); END;
CREATE TRIGGER bisect_results_no_delete BEFORE DELETE ON bisect_results BEGIN SELECT RAISE(ABORT, 'bisect_results is append-only'); END;
