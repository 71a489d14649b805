-- The append-only triggers every sealed table has, for the two tables of
-- 0005_workloads (which shipped without them; the test
-- Store.EverySealedTableRefusesUpdatesAndDeletes now checks every table).
CREATE TRIGGER run_workloads_no_update BEFORE UPDATE ON run_workloads BEGIN SELECT RAISE(ABORT, 'run_workloads is append-only'); END;
CREATE TRIGGER run_workloads_no_delete BEFORE DELETE ON run_workloads BEGIN SELECT RAISE(ABORT, 'run_workloads is append-only'); END;
CREATE TRIGGER frontier_event_workloads_no_update BEFORE UPDATE ON frontier_event_workloads BEGIN SELECT RAISE(ABORT, 'frontier_event_workloads is append-only'); END;
CREATE TRIGGER frontier_event_workloads_no_delete BEFORE DELETE ON frontier_event_workloads BEGIN SELECT RAISE(ABORT, 'frontier_event_workloads is append-only'); END;
