-- Issue 24 (holes 9 and 11): inputs the rules pin down. New facts in new
-- sealed, append-only tables keyed by the old rows, as always.

-- A submitter's declaration that parity evidence of `dtype` stands for the
-- bench workload's own dtype (submit --reference-dtype): without one, the
-- evidence's dtype must be the workload's.
CREATE TABLE change_reference_dtypes (
  change_id INTEGER PRIMARY KEY REFERENCES changes(id),
  dtype TEXT NOT NULL
);

-- The box lock a run's measurement held: its file and who held it.
CREATE TABLE run_box_locks (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id),
  path TEXT NOT NULL,               -- $VERITY_LOCK_DIR/verity-box-<fingerprint>.lock
  holder_pid INTEGER NOT NULL,      -- the process that held it
  holder_host TEXT NOT NULL,        -- and its host name
  acquired_at TEXT NOT NULL
);

CREATE TRIGGER change_reference_dtypes_no_update BEFORE UPDATE ON change_reference_dtypes BEGIN SELECT RAISE(ABORT, 'change_reference_dtypes is append-only'); END;
CREATE TRIGGER change_reference_dtypes_no_delete BEFORE DELETE ON change_reference_dtypes BEGIN SELECT RAISE(ABORT, 'change_reference_dtypes is append-only'); END;
CREATE TRIGGER run_box_locks_no_update BEFORE UPDATE ON run_box_locks BEGIN SELECT RAISE(ABORT, 'run_box_locks is append-only'); END;
CREATE TRIGGER run_box_locks_no_delete BEFORE DELETE ON run_box_locks BEGIN SELECT RAISE(ABORT, 'run_box_locks is append-only'); END;
