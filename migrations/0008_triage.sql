-- Issue 14: triage of regressions found across history. Each state change is
-- its own sealed row (the latest row of a key is the regression's state);
-- nothing is ever updated. `key` names the regression: for a drift change
-- point, "drift/<metric>/<box>/<workload>/<run before>-<run after>".
CREATE TABLE triage (
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('acknowledged', 'investigating', 'wontfix', 'fixed')),
  by TEXT NOT NULL,
  reason TEXT NOT NULL,
  fixed_by_change INTEGER REFERENCES changes(id),  -- required for 'fixed'
  at TEXT NOT NULL
);
CREATE TRIGGER triage_no_update BEFORE UPDATE ON triage BEGIN SELECT RAISE(ABORT, 'triage is append-only'); END;
CREATE TRIGGER triage_no_delete BEFORE DELETE ON triage BEGIN SELECT RAISE(ABORT, 'triage is append-only'); END;
