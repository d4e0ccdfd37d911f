-- Cancelled requests and one pending request per user and task
-- (docs/algorithm.md, "Cancelling and attaching"). A cancelled request is
-- never served: the engine reads and finishes only 'pending' ones. Oracle has
-- no partial index, but a B-tree index leaves out keys that are entirely
-- NULL: both expressions are NULL unless the request is pending, so only
-- pending requests are indexed and only they can collide (as for loanq_work's
-- one active row). Same statement rules as 00001_schema.sql.

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

-- +goose Down
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
