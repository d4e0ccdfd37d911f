-- Cancelled requests and one pending request per user and task
-- (docs/algorithm.md, "Cancelling and attaching"). A cancelled request is
-- never served: the engine reads and finishes only 'pending' ones. MySQL has
-- no partial unique index: as for loanq_work's one active row, a stored
-- generated column holds the user name while the request is pending and NULL
-- otherwise, and a unique index treats NULLs as distinct, so only pending
-- requests can collide. A second `work get` of the same user on the same task
-- then attaches to the pending request, decided by the database even when
-- both callers insert at the same moment.

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
-- user and task, cancel the others. The derived table is materialised first
-- (MySQL refuses to read the table an UPDATE changes in a plain subquery).
UPDATE loanq_work_request r
JOIN (SELECT task_id, user_name, MIN(id) AS keep_id FROM loanq_work_request
      WHERE status = 'pending' GROUP BY task_id, user_name) k
  ON k.task_id = r.task_id AND k.user_name = r.user_name
SET r.status = 'cancelled', r.served_at = UTC_TIMESTAMP(6)
WHERE r.status = 'pending' AND r.id <> k.keep_id;
ALTER TABLE loanq_work_request
    ADD COLUMN pending_user VARCHAR(100) AS (CASE WHEN status = 'pending' THEN user_name END) STORED,
    ADD UNIQUE INDEX loanq_request_one_pending_uq (task_id, pending_user);

ALTER TABLE loanq_task ADD COLUMN max_hold_ms BIGINT,
    ADD CONSTRAINT loanq_task_max_hold_ck CHECK (max_hold_ms IS NULL OR max_hold_ms > 0);
ALTER TABLE loanq_work ADD COLUMN disposed_by VARCHAR(100);
ALTER TABLE loanq_work DROP CONSTRAINT loanq_work_disposition_ck;
ALTER TABLE loanq_work ADD CONSTRAINT loanq_work_disposition_ck
    CHECK (disposition IN ('complete', 'return', 'never', 'expired', 'reclaimed'));
-- No partial index: disposition sits between task and age, so the active
-- rows (disposition IS NULL) of a task older than a cut-off are one range.
CREATE INDEX loanq_work_active_age_ix ON loanq_work (task_id, disposition, assigned_at);

-- +goose Down
DROP INDEX loanq_work_active_age_ix ON loanq_work;
UPDATE loanq_work SET disposition = 'return' WHERE disposition IN ('expired', 'reclaimed');
ALTER TABLE loanq_work DROP CONSTRAINT loanq_work_disposition_ck;
ALTER TABLE loanq_work ADD CONSTRAINT loanq_work_disposition_ck CHECK (disposition IN ('complete', 'return', 'never'));
ALTER TABLE loanq_work DROP COLUMN disposed_by;
ALTER TABLE loanq_task DROP CONSTRAINT loanq_task_max_hold_ck, DROP COLUMN max_hold_ms;
ALTER TABLE loanq_work_request DROP INDEX loanq_request_one_pending_uq, DROP COLUMN pending_user;
UPDATE loanq_work_request SET status = 'empty' WHERE status = 'cancelled';
ALTER TABLE loanq_work_request DROP CONSTRAINT loanq_work_request_status_ck;
ALTER TABLE loanq_work_request ADD CONSTRAINT loanq_work_request_status_ck
    CHECK (status IN ('pending', 'assigned', 'partial', 'empty'));
