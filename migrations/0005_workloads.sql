-- A frontier belongs to one workload. Until schema 5 the ladder was keyed by
-- (metric, box) alone, so a change benchmarked on a 260K-parameter model was
-- gated against (and would have moved) the frontier of a 110M one. A bench
-- record names its workload (model file name, dtype, threads, prompt and
-- generated tokens); runs and frontier events record it here, and the ladder
-- is derived per (metric, box, workload). Rows recorded before schema 5 have
-- none and read as the unnamed workload ''.

-- What the run's bench commands measured (base and head must agree).
CREATE TABLE run_workloads (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id),
  workload TEXT NOT NULL
);

-- The ladder a frontier event belongs to.
CREATE TABLE frontier_event_workloads (
  event_id INTEGER PRIMARY KEY REFERENCES frontier_events(id),
  workload TEXT NOT NULL
);
