-- Issue 14: box noise profiles. `verity calibrate --cmd CMD` runs an A/A (the
-- same command as base and head) on a box and records how much a round's
-- ratio wanders there; submissions read the latest profile of their (box,
-- metric, workload) to choose their rounds, or to say the box is too noisy.
CREATE TABLE box_noise (
  id INTEGER PRIMARY KEY,
  box_id INTEGER NOT NULL REFERENCES boxes(id),
  metric TEXT NOT NULL,
  workload TEXT NOT NULL,
  cmd TEXT NOT NULL,
  rounds INTEGER NOT NULL,
  ratios TEXT NOT NULL,              -- JSON array, one oriented ratio per ABBA round
  round_mad REAL NOT NULL,           -- fraction
  sigma REAL NOT NULL,               -- 1.4826 x round_mad
  outlier_rounds INTEGER NOT NULL,   -- rounds more than 5 MADs from the median
  drift_per_round REAL NOT NULL,     -- slope of the round's mean level, fraction per round
  recorded_at TEXT NOT NULL
);
CREATE TRIGGER box_noise_no_update BEFORE UPDATE ON box_noise BEGIN SELECT RAISE(ABORT, 'box_noise is append-only'); END;
CREATE TRIGGER box_noise_no_delete BEFORE DELETE ON box_noise BEGIN SELECT RAISE(ABORT, 'box_noise is append-only'); END;
