-- Issue 23: policy v3, guards that judge size as well as percent. A guard
-- regresses only beyond the gate (as in v2) and beyond an absolute floor for
-- its unit, so that 0.3 MiB more on a 13 MiB process (2%, all of it the
-- process's fixed baseline) cannot block a 4.8x speedup. New facts in new
-- sealed tables, as always.

-- The floor of each unit suffix a policy version states (one row per suffix).
CREATE TABLE policy_guard_floors (
  id INTEGER PRIMARY KEY,
  version INTEGER NOT NULL REFERENCES policy(version),
  suffix TEXT NOT NULL,             -- a metric name's unit suffix: "_mb", "_tok_s", ...
  amount REAL NOT NULL,             -- in the metric's own unit; 0: the gate alone decides
  unit TEXT NOT NULL,               -- how the amount is written: "MiB", "tok/s", ...
  UNIQUE (version, suffix)
);

-- How each guard of a score under v3 or later fared against its floor.
CREATE TABLE score_guard_floors (
  guard_id INTEGER PRIMARY KEY REFERENCES score_guards(id),
  base_median REAL NOT NULL,        -- the guard's medians over the scored rounds, in its own unit
  head_median REAL NOT NULL,
  amount REAL NOT NULL,             -- the floor it was judged against
  unit TEXT NOT NULL,
  beyond_gate INTEGER NOT NULL      -- v2's test held (significantly worse, by at least the gate)
);

CREATE TRIGGER policy_guard_floors_no_update BEFORE UPDATE ON policy_guard_floors BEGIN SELECT RAISE(ABORT, 'policy_guard_floors is append-only'); END;
CREATE TRIGGER policy_guard_floors_no_delete BEFORE DELETE ON policy_guard_floors BEGIN SELECT RAISE(ABORT, 'policy_guard_floors is append-only'); END;
CREATE TRIGGER score_guard_floors_no_update BEFORE UPDATE ON score_guard_floors BEGIN SELECT RAISE(ABORT, 'score_guard_floors is append-only'); END;
CREATE TRIGGER score_guard_floors_no_delete BEFORE DELETE ON score_guard_floors BEGIN SELECT RAISE(ABORT, 'score_guard_floors is append-only'); END;
