-- Cancelled requests and one pending request per user and task
-- (docs/algorithm.md, "Cancelling and attaching"). A cancelled request is
-- never served: the engine reads and finishes only 'pending' ones. MySQL has
-- no partial unique index: as for loanq_work's one active row, a stored
-- generated column holds the user name while the request is pending and NULL
-- otherwise, and a unique index treats NULLs as distinct, so only pending
-- requests can collide. A second `work get` of the same user on the same task
-- then attaches to the pending request, decided by the database even when
-- both callers insert at the same moment.

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

-- +goose Down
ALTER TABLE loanq_work_request DROP INDEX loanq_request_one_pending_uq, DROP COLUMN pending_user;
UPDATE loanq_work_request SET status = 'empty' WHERE status = 'cancelled';
ALTER TABLE loanq_work_request DROP CONSTRAINT loanq_work_request_status_ck;
ALTER TABLE loanq_work_request ADD CONSTRAINT loanq_work_request_status_ck
    CHECK (status IN ('pending', 'assigned', 'partial', 'empty'));
