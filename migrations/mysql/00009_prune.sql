-- History retention (`loanq prune`, docs/retention.md). The prune walks the
-- old part of the history only: the oldest and newest id of the requests
-- closed before its cutoff, and of each task's criteria-query runs started
-- before it, are read from these indexes (a range of old rows, not the whole
-- table); the batches then walk the primary key between those ids. Work rows
-- are removed with their request, through loanq_work_request_ix.

-- +goose Up
CREATE INDEX loanq_work_request_served_ix ON loanq_work_request (served_at, id);
CREATE INDEX loanq_query_run_started_ix ON loanq_query_run (task_id, started_at, id);

-- +goose Down
DROP INDEX loanq_query_run_started_ix ON loanq_query_run;
DROP INDEX loanq_work_request_served_ix ON loanq_work_request;
