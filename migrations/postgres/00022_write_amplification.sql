-- Fewer index entries per request (docs/write-amplification.md, which
-- has the figures: rows, index entries and WAL per loan served).
--
-- * loanq_work_request_pending_ix (task_id, id) WHERE status = 'pending'
--   goes: loanq_request_one_pending_uq (task_id, user_name) has the same
--   predicate and leads with task_id, so every read of a task's pending
--   requests is the same range of it (a task has a few pending requests,
--   one per waiting user; the reads sort them by created_at anyway). One
--   entry fewer per request logged.
-- * loanq_work_request_served_ix (served_at, id) leaves out pending
--   requests: prune reads it only for requests closed before its cutoff
--   (served_at < …, which implies served_at IS NOT NULL), and a request's
--   finish is never a HOT update (it changes status, the predicate of
--   loanq_request_one_pending_uq), so its new row version gets an entry of
--   its own anyway: the pending row's entry was the one written for nothing.
--   One entry fewer per request logged.

-- +goose Up
DROP INDEX loanq_work_request_pending_ix;
DROP INDEX loanq_work_request_served_ix;
CREATE INDEX loanq_work_request_served_ix ON loanq_work_request (served_at, id) WHERE served_at IS NOT NULL;

-- +goose Down
DROP INDEX loanq_work_request_served_ix;
CREATE INDEX loanq_work_request_served_ix ON loanq_work_request (served_at, id);
CREATE INDEX loanq_work_request_pending_ix ON loanq_work_request (task_id, id) WHERE status = 'pending';
