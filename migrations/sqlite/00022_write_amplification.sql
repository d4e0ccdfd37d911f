-- Fewer index entries per request, as PostgreSQL's 00022
-- (docs/write-amplification.md has the figures, measured there):
--
-- * loanq_work_request_pending_ix (task_id, id) WHERE status = 'pending'
--   goes: loanq_request_one_pending_uq (task_id, user_name) has the same
--   predicate and leads with task_id, so every read of a task's pending
--   requests is the same range of it. One entry fewer per request logged.
-- * loanq_work_request_served_ix (served_at, id) leaves out pending
--   requests: prune reads it only for requests closed before its cutoff
--   (served_at < …, which SQLite takes as implying served_at IS NOT NULL).
--   A request gets its entry when it is finished, not also when logged.

-- +goose Up
DROP INDEX loanq_work_request_pending_ix;
DROP INDEX loanq_work_request_served_ix;
CREATE INDEX loanq_work_request_served_ix ON loanq_work_request (served_at, id) WHERE served_at IS NOT NULL;

-- +goose Down
DROP INDEX loanq_work_request_served_ix;
CREATE INDEX loanq_work_request_served_ix ON loanq_work_request (served_at, id);
CREATE INDEX loanq_work_request_pending_ix ON loanq_work_request (task_id, id) WHERE status = 'pending';
