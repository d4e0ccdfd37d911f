-- Fewer index entries per request (docs/write-amplification.md, which
-- has the figures: rows, index entries and redo per loan served).
-- loanq_work_request_task_ix (task_id) goes: three other indexes of the
-- table lead with task_id (loanq_work_request_pending_ix, _rate_ix and
-- loanq_request_one_pending_uq), no foreign key needs it (the table has
-- none on task_id, see 00001), and no statement names it. One secondary
-- entry fewer per request logged.

-- +goose Up
DROP INDEX loanq_work_request_task_ix ON loanq_work_request;

-- +goose Down
CREATE INDEX loanq_work_request_task_ix ON loanq_work_request (task_id);
