-- Issue 9: policy v2 rules, the derived frontier ladder, score statistics,
-- guard metrics and declared regressions. New facts go into new sealed
-- tables: a column added to a sealed table would change the canonical text of
-- every old row and break its seal.

-- Rules a policy version adds to the `policy` row of the same version.
CREATE TABLE policy_rules (
  version INTEGER PRIMARY KEY REFERENCES policy(version),
  min_rounds INTEGER NOT NULL,      -- the floor: a submitter may ask for more, never fewer
  max_rounds INTEGER NOT NULL,
  look_every INTEGER NOT NULL,      -- the decision is evaluated at min_rounds, +look_every, ..., max_rounds
  alpha REAL NOT NULL,              -- one-sided error budget per change, spent over looks and re-measurements
  parity_min_depths INTEGER NOT NULL,
  parity_min_positions INTEGER NOT NULL,
  deep_factor REAL NOT NULL,        -- deep evidence carries >= this x the standard depths and window
  gain_rule TEXT NOT NULL,          -- how a gain is stated (prose, shown in reports)
  created_at TEXT NOT NULL
);

-- How a frontier event moves the ladder. The frontier is derived from the
-- non-retracted events, never read from frontier_events.value (which keeps
-- the value as computed when the event was recorded).
CREATE TABLE frontier_moves (
  event_id INTEGER PRIMARY KEY REFERENCES frontier_events(id),
  ratio REAL,                       -- factor applied (NULL: seed, or a revert on parity evidence)
  undoes_run INTEGER REFERENCES runs(id)  -- parity revert: the change run whose factor it removes;
                                          -- reapply: the revert run whose factor it replaces
);

-- Every metric a bench sample reported (the primary one is also in samples.value).
CREATE TABLE metric_samples (
  id INTEGER PRIMARY KEY,
  sample_id INTEGER NOT NULL REFERENCES samples(id),
  metric TEXT NOT NULL,
  value REAL NOT NULL
);

-- The statistics behind a score (policy v2 and later).
CREATE TABLE score_stats (
  score_id INTEGER PRIMARY KEY REFERENCES scores(id),
  metric TEXT NOT NULL,
  attempt INTEGER NOT NULL,         -- 0 = first measurement, k = k-th re-measurement
  alpha REAL,                       -- one-sided level of each bound at the deciding look
  ratio REAL,                       -- median of per-round head/base ratios
  ratio_low REAL,                   -- order-statistic bounds of that median (NULL: no bound at this n)
  ratio_high REAL,
  decision TEXT NOT NULL            -- above | below | unresolved | none (no speed measured)
);

-- Guard metrics: every reported metric other than the scored one.
CREATE TABLE score_guards (
  id INTEGER PRIMARY KEY,
  score_id INTEGER NOT NULL REFERENCES scores(id),
  metric TEXT NOT NULL,
  higher_is_better INTEGER NOT NULL,
  ratio REAL NOT NULL,              -- median per-round ratio, oriented so > 1 is better
  ratio_low REAL,
  ratio_high REAL,
  regressed INTEGER NOT NULL,       -- significantly worse, beyond the gate
  declared INTEGER NOT NULL         -- the submitter accepted this regression up front
);

-- Regressions a submitter declared before measuring (--accept-regression METRIC).
CREATE TABLE accepted_regressions (
  id INTEGER PRIMARY KEY,
  change_id INTEGER NOT NULL REFERENCES changes(id),
  metric TEXT NOT NULL
);

CREATE INDEX metric_samples_by_sample ON metric_samples(sample_id);
CREATE INDEX score_guards_by_score ON score_guards(score_id);
CREATE INDEX accepted_regressions_by_change ON accepted_regressions(change_id);

CREATE TRIGGER policy_rules_no_update BEFORE UPDATE ON policy_rules BEGIN SELECT RAISE(ABORT, 'policy_rules is append-only'); END;
CREATE TRIGGER policy_rules_no_delete BEFORE DELETE ON policy_rules BEGIN SELECT RAISE(ABORT, 'policy_rules is append-only'); END;
CREATE TRIGGER frontier_moves_no_update BEFORE UPDATE ON frontier_moves BEGIN SELECT RAISE(ABORT, 'frontier_moves is append-only'); END;
CREATE TRIGGER frontier_moves_no_delete BEFORE DELETE ON frontier_moves BEGIN SELECT RAISE(ABORT, 'frontier_moves is append-only'); END;
CREATE TRIGGER metric_samples_no_update BEFORE UPDATE ON metric_samples BEGIN SELECT RAISE(ABORT, 'metric_samples is append-only'); END;
CREATE TRIGGER metric_samples_no_delete BEFORE DELETE ON metric_samples BEGIN SELECT RAISE(ABORT, 'metric_samples is append-only'); END;
CREATE TRIGGER score_stats_no_update BEFORE UPDATE ON score_stats BEGIN SELECT RAISE(ABORT, 'score_stats is append-only'); END;
CREATE TRIGGER score_stats_no_delete BEFORE DELETE ON score_stats BEGIN SELECT RAISE(ABORT, 'score_stats is append-only'); END;
CREATE TRIGGER score_guards_no_update BEFORE UPDATE ON score_guards BEGIN SELECT RAISE(ABORT, 'score_guards is append-only'); END;
CREATE TRIGGER score_guards_no_delete BEFORE DELETE ON score_guards BEGIN SELECT RAISE(ABORT, 'score_guards is append-only'); END;
CREATE TRIGGER accepted_regressions_no_update BEFORE UPDATE ON accepted_regressions BEGIN SELECT RAISE(ABORT, 'accepted_regressions is append-only'); END;
CREATE TRIGGER accepted_regressions_no_delete BEFORE DELETE ON accepted_regressions BEGIN SELECT RAISE(ABORT, 'accepted_regressions is append-only'); END;
