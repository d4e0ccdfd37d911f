-- Cancelled requests and one pending request per user and task
-- (docs/algorithm.md, "Cancelling and attaching"). A cancelled request is
-- never served: the engine reads and finishes only 'pending' ones. Oracle has
-- no partial index, but a B-tree index leaves out keys that are entirely
-- NULL: both expressions are NULL unless the request is pending, so only
-- pending requests are indexed and only they can collide (as for loanq_work's
-- one active row). Same statement rules as 00001_schema.sql.

-- Abandoned work goes back (docs/algorithm.md, "Abandoned work: --max-hold"):
-- a task's max_hold_ms is the age past which active work is ended as
-- 'expired' by the engine while it serves, and a supervisor's
-- `work reclaim` ends it as 'reclaimed' with disposed_by naming them. Both
-- leave the loan eligible again and the row as history. The index keeps the
-- expiry check a range of the task's active rows by age.

-- +goose Up
-- +goose StatementBegin
ALTER TABLE loanq_work_request DROP CONSTRAINT loanq_work_request_status_ck
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work_request ADD CONSTRAINT loanq_work_request_status_ck
    CHECK (status IN ('pending', 'assigned', 'partial', 'empty', 'cancelled'))
-- +goose StatementEnd

-- Duplicates logged before this migration would each be served: keep the
-- oldest pending request of each user and task, cancel the others.
-- +goose StatementBegin
UPDATE loanq_work_request r SET status = 'cancelled', served_at = SYS_EXTRACT_UTC(SYSTIMESTAMP)
WHERE r.status = 'pending' AND EXISTS (
    SELECT 1 FROM loanq_work_request o
    WHERE o.task_id = r.task_id AND o.user_name = r.user_name AND o.status = 'pending' AND o.id < r.id)
-- +goose StatementEnd

-- +goose StatementBegin
CREATE UNIQUE INDEX loanq_request_one_pending_uq ON loanq_work_request (
    CASE WHEN status = 'pending' THEN task_id END,
    CASE WHEN status = 'pending' THEN user_name END)
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_task ADD (max_hold_ms NUMBER(19)
    CONSTRAINT loanq_task_max_hold_ck CHECK (max_hold_ms IS NULL OR max_hold_ms > 0))
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work ADD (disposed_by VARCHAR2(100 CHAR))
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work DROP CONSTRAINT loanq_work_disposition_ck
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work ADD CONSTRAINT loanq_work_disposition_ck
    CHECK (disposition IN ('complete', 'return', 'never', 'expired', 'reclaimed'))
-- +goose StatementEnd

-- No partial index: rows with a NULL disposition are indexed too (task_id is
-- never NULL), so the active rows of a task older than a cut-off are one range.
-- +goose StatementBegin
CREATE INDEX loanq_work_active_age_ix ON loanq_work (task_id, disposition, assigned_at)
-- +goose StatementEnd


-- +goose Down
-- +goose StatementBegin
DROP INDEX loanq_work_active_age_ix
-- +goose StatementEnd

-- +goose StatementBegin
UPDATE loanq_work SET disposition = 'return' WHERE disposition IN ('expired', 'reclaimed')
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work DROP CONSTRAINT loanq_work_disposition_ck
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work ADD CONSTRAINT loanq_work_disposition_ck CHECK (disposition IN ('complete', 'return', 'never'))
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work DROP (disposed_by)
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_task DROP (max_hold_ms)
-- +goose StatementEnd

-- +goose StatementBegin
DROP INDEX loanq_request_one_pending_uq
-- +goose StatementEnd

-- +goose StatementBegin
UPDATE loanq_work_request SET status = 'empty' WHERE status = 'cancelled'
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work_request DROP CONSTRAINT loanq_work_request_status_ck
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work_request ADD CONSTRAINT loanq_work_request_status_ck
    CHECK (status IN ('pending', 'assigned', 'partial', 'empty'))
-- +goose StatementEnd
