-- Cancelled requests and one pending request per user and task
-- (docs/algorithm.md, "Cancelling and attaching"). A cancelled request is
-- never served: the engine reads and finishes only 'pending' ones. The
-- partial unique index makes a second `work get` of the same user on the
-- same task attach to the pending request instead of logging another.
--
-- SQLite cannot change a CHECK constraint in place: loanq_work_request is
-- rebuilt with the new one. Foreign keys stay on (goose runs this in one
-- transaction, where the pragma cannot be changed), so loanq_work, whose
-- rows reference the requests, is rebuilt too, in an order where no row ever
-- references a missing request: the new work table references the new
-- request table, the old child is dropped before its parent, and the renames
-- carry the reference along (SQLite >= 3.26 rewrites it on RENAME).

-- Abandoned work goes back (docs/algorithm.md, "Abandoned work: --max-hold"):
-- a task's max_hold_ms is the age past which active work is ended as
-- 'expired' by the engine while it serves, and a supervisor's
-- `work reclaim` ends it as 'reclaimed' with disposed_by naming them. Both
-- leave the loan eligible again and the row as history. The index keeps the
-- expiry check a range of the task's active rows by age.

-- +goose Up
CREATE TABLE loanq_work_request_new (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id    INTEGER NOT NULL REFERENCES loanq_task (id),
    user_name  TEXT    NOT NULL,
    requested  INTEGER NOT NULL,
    assigned   INTEGER NOT NULL DEFAULT 0,
    status     TEXT    NOT NULL DEFAULT 'pending',
    created_at TEXT    NOT NULL,
    served_at  TEXT,
    CONSTRAINT loanq_work_request_status_ck CHECK (status IN ('pending', 'assigned', 'partial', 'empty', 'cancelled')),
    CONSTRAINT loanq_work_request_count_ck CHECK (requested > 0 AND assigned >= 0 AND assigned <= requested)
);
INSERT INTO loanq_work_request_new (id, task_id, user_name, requested, assigned, status, created_at, served_at)
SELECT id, task_id, user_name, requested, assigned, status, created_at, served_at FROM loanq_work_request;

CREATE TABLE loanq_work_new (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     INTEGER NOT NULL REFERENCES loanq_task (id),
    loan_id     INTEGER NOT NULL,
    user_name   TEXT    NOT NULL,
    request_id  INTEGER NOT NULL REFERENCES loanq_work_request_new (id),
    assigned_at TEXT    NOT NULL,
    disposition TEXT,
    disposed_at TEXT,
    return_at   TEXT,
    disposed_by TEXT,
    CONSTRAINT loanq_work_disposition_ck CHECK (disposition IN ('complete', 'return', 'never', 'expired', 'reclaimed')),
    CONSTRAINT loanq_work_disposed_ck CHECK ((disposition IS NULL) = (disposed_at IS NULL)),
    CONSTRAINT loanq_work_return_ck CHECK (return_at IS NULL OR disposition = 'return')
);
INSERT INTO loanq_work_new (id, task_id, loan_id, user_name, request_id, assigned_at, disposition, disposed_at, return_at)
SELECT id, task_id, loan_id, user_name, request_id, assigned_at, disposition, disposed_at, return_at FROM loanq_work;

DROP TABLE loanq_work;
DROP TABLE loanq_work_request;
ALTER TABLE loanq_work_request_new RENAME TO loanq_work_request;
ALTER TABLE loanq_work_new RENAME TO loanq_work;

CREATE INDEX loanq_work_request_pending_ix ON loanq_work_request (task_id, id) WHERE status = 'pending';
CREATE INDEX loanq_work_request_rate_ix ON loanq_work_request (task_id, created_at);
CREATE UNIQUE INDEX loanq_work_one_active_uq ON loanq_work (task_id, loan_id) WHERE disposition IS NULL;
CREATE INDEX loanq_work_task_loan_ix ON loanq_work (task_id, loan_id, disposition, return_at);
CREATE INDEX loanq_work_user_active_ix ON loanq_work (user_name, task_id) WHERE disposition IS NULL;
CREATE INDEX loanq_work_request_ix ON loanq_work (request_id);
CREATE INDEX loanq_work_active_age_ix ON loanq_work (task_id, assigned_at) WHERE disposition IS NULL;
ALTER TABLE loanq_task ADD COLUMN max_hold_ms INTEGER CHECK (max_hold_ms IS NULL OR max_hold_ms > 0);

-- Duplicates logged before this migration would each be served (the double
-- work this migration prevents): keep the oldest pending request of each
-- user and task, cancel the others.
UPDATE loanq_work_request SET status = 'cancelled', served_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
WHERE status = 'pending' AND EXISTS (
    SELECT 1 FROM loanq_work_request o
    WHERE o.task_id = loanq_work_request.task_id AND o.user_name = loanq_work_request.user_name
      AND o.status = 'pending' AND o.id < loanq_work_request.id);
CREATE UNIQUE INDEX loanq_request_one_pending_uq ON loanq_work_request (task_id, user_name) WHERE status = 'pending';

-- +goose Down
-- The CHECKs keep the new values (another rebuild for nothing); the index,
-- the columns and the new values in use go.
DROP INDEX loanq_request_one_pending_uq;
DROP INDEX loanq_work_active_age_ix;
UPDATE loanq_work SET disposition = 'return' WHERE disposition IN ('expired', 'reclaimed');
UPDATE loanq_work_request SET status = 'empty' WHERE status = 'cancelled';
ALTER TABLE loanq_work DROP COLUMN disposed_by;
ALTER TABLE loanq_task DROP COLUMN max_hold_ms;
