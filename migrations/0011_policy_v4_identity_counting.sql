-- Issue 24: policy v4, identity-based counting. A frontier step is a move
-- from one artifact to another on a workload; an artifact counts at most once
-- per frontier; a resubmission of the same artifact pair re-measures the same
-- change on the same error budget. New facts in new sealed tables, as always.

-- What a policy version states about counting (v4 on: one row per version).
CREATE TABLE policy_counting (
  version INTEGER PRIMARY KEY REFERENCES policy(version),
  step_rule TEXT NOT NULL,          -- what a frontier step is, and when a run is not one
  budget_rule TEXT NOT NULL         -- which runs spend one change's error budget
);

-- The run a reapply asked to retract (--retract), applied only once the
-- reapply is accepted: at its score, or at confirm when it was held.
CREATE TABLE reapply_retractions (
  change_id INTEGER PRIMARY KEY REFERENCES changes(id),
  run_id INTEGER NOT NULL REFERENCES runs(id),
  reason TEXT NOT NULL
);

CREATE TRIGGER policy_counting_no_update BEFORE UPDATE ON policy_counting BEGIN SELECT RAISE(ABORT, 'policy_counting is append-only'); END;
CREATE TRIGGER policy_counting_no_delete BEFORE DELETE ON policy_counting BEGIN SELECT RAISE(ABORT, 'policy_counting is append-only'); END;
CREATE TRIGGER reapply_retractions_no_update BEFORE UPDATE ON reapply_retractions BEGIN SELECT RAISE(ABORT, 'reapply_retractions is append-only'); END;
CREATE TRIGGER reapply_retractions_no_delete BEFORE DELETE ON reapply_retractions BEGIN SELECT RAISE(ABORT, 'reapply_retractions is append-only'); END;
