-- Cancelled requests and one pending request per user and task
-- (docs/algorithm.md, "Cancelling and attaching"). A cancelled request is
-- never served: the engine reads and finishes only 'pending' ones. The unique
-- index makes a second `work get` of the same user on the same task attach to
-- the pending request instead of logging another, decided by the database
-- even when both callers insert at the same moment.

-- Abandoned work goes back (docs/algorithm.md, "Abandoned work: --max-hold"):
-- a task's max_hold_ms is the age past which active work is ended as
-- 'expired' by the engine while it serves, and a supervisor's
-- `work reclaim` ends it as 'reclaimed' with disposed_by naming them. Both
-- leave the loan eligible again and the row as history. The index keeps the
-- expiry check a range of the task's active rows by age.

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

ALTER TABLE loanq_task ADD COLUMN max_hold_ms BIGINT;
ALTER TABLE loanq_task ADD CONSTRAINT loanq_task_max_hold_ck CHECK (max_hold_ms IS NULL OR max_hold_ms > 0);
ALTER TABLE loanq_work ADD COLUMN disposed_by VARCHAR(100);
ALTER TABLE loanq_work DROP CONSTRAINT loanq_work_disposition_ck;
ALTER TABLE loanq_work ADD CONSTRAINT loanq_work_disposition_ck
    CHECK (disposition IN ('complete', 'return', 'never', 'expired', 'reclaimed'));
CREATE INDEX loanq_work_active_age_ix ON loanq_work (task_id, assigned_at) WHERE disposition IS NULL;

-- +goose Down
DROP INDEX loanq_work_active_age_ix;
UPDATE loanq_work SET disposition = 'return' WHERE disposition IN ('expired', 'reclaimed');
ALTER TABLE loanq_work DROP CONSTRAINT loanq_work_disposition_ck;
ALTER TABLE loanq_work ADD CONSTRAINT loanq_work_disposition_ck CHECK (disposition IN ('complete', 'return', 'never'));
ALTER TABLE loanq_work DROP COLUMN disposed_by;
ALTER TABLE loanq_task DROP CONSTRAINT loanq_task_max_hold_ck;
ALTER TABLE loanq_task DROP COLUMN max_hold_ms;
DROP INDEX loanq_request_one_pending_uq;
UPDATE loanq_work_request SET status = 'empty' WHERE status = 'cancelled';
ALTER TABLE loanq_work_request DROP CONSTRAINT loanq_work_request_status_ck;
ALTER TABLE loanq_work_request ADD CONSTRAINT loanq_work_request_status_ck
    CHECK (status IN ('pending', 'assigned', 'partial', 'empty'));
