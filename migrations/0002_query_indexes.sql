-- Indexes for the maintainers' queries (show, history, frontier) on large ledgers.
CREATE INDEX runs_by_change ON runs(change_id);
CREATE INDEX samples_by_run ON samples(run_id);
CREATE INDEX scores_by_run ON scores(run_id);
CREATE INDEX scores_by_verdict ON scores(verdict);
CREATE INDEX parity_by_run ON parity_results(run_id);
CREATE INDEX artifacts_by_run ON artifacts(run_id);
CREATE INDEX failures_by_run ON run_failures(run_id);
CREATE INDEX changes_by_kind ON changes(kind, target_change);
CREATE INDEX frontier_by_key ON frontier_events(metric, box_id);
CREATE INDEX retractions_by_run ON retractions(run_id);
CREATE INDEX queue_by_change ON remeasure_queue(change_id);
