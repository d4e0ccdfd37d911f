-- Cancelled requests and one pending request per user and task
-- (docs/algorithm.md, "Cancelling and attaching"). A cancelled request is
-- never served: the engine reads and finishes only 'pending' ones. The unique
-- index makes a second `work get` of the same user on the same task attach to
-- the pending request instead of logging another, decided by the database
-- even when both callers insert at the same moment.

-- +goose Up
ALTER TABLE loanq_work_request DROP CONSTRAINT loanq_work_request_status_ck;
ALTER TABLE loanq_work_request ADD CONSTRAINT loanq_work_request_status_ck
    CHECK (status IN ('pending', 'assigned', 'partial', 'empty', 'cancelled'));
-- Duplicates logged before this migration would each be served (the double
-- work this migration prevents): keep the oldest pending request of each
-- user and task, cancel the others.
UPDATE loanq_work_request r SET status = 'cancelled', served_at = clock_timestamp()
WHERE r.status = 'pending' AND EXISTS (
    SELECT 1 FROM loanq_work_request o
    WHERE o.task_id = r.task_id AND o.user_name = r.user_name AND o.status = 'pending' AND o.id < r.id);
CREATE UNIQUE INDEX loanq_request_one_pending_uq ON loanq_work_request (task_id, user_name) WHERE status = 'pending';

-- +goose Down
DROP INDEX loanq_request_one_pending_uq;
UPDATE loanq_work_request SET status = 'empty' WHERE status = 'cancelled';
ALTER TABLE loanq_work_request DROP CONSTRAINT loanq_work_request_status_ck;
ALTER TABLE loanq_work_request ADD CONSTRAINT loanq_work_request_status_ck
    CHECK (status IN ('pending', 'assigned', 'partial', 'empty'));
