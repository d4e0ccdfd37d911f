-- Abandoned requests (docs/algorithm.md, "Abandoned requests"): a pending
-- request nobody waits for any more (a killed process, a client gone) is
-- never served. alive_at is its last sign of life, from the database clock
-- (the stored text form of {{now}}): set when it is logged, renewed by the
-- caller that waits for it and by each recheck of its requester. A request
-- without one for longer than 60 s (drivers.RequestAlive) is not read as
-- pending by a round, not finished by one, and ends as 'expired'. NULL
-- (requests logged before this migration) is no sign of life.
--
-- SQLite cannot change a CHECK constraint in place: loanq_work_request is
-- rebuilt with the new one, and loanq_work, whose rows reference the
-- requests, with it, the way 00006 did (foreign keys stay on: goose runs this
-- in one transaction, where the pragma cannot be changed). The new work
-- table references the new request table, the old child is dropped before
-- its parent, and the renames carry the reference along (SQLite >= 3.26
-- rewrites it on RENAME). Every index of both tables is made again.

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
    pooled     INTEGER,
    alive_at   TEXT,
    CONSTRAINT loanq_work_request_status_ck CHECK (status IN ('pending', 'assigned', 'partial', 'empty', 'cancelled', 'expired')),
    CONSTRAINT loanq_work_request_count_ck CHECK (requested > 0 AND assigned >= 0 AND assigned <= requested)
);
INSERT INTO loanq_work_request_new (id, task_id, user_name, requested, assigned, status, created_at, served_at, pooled)
SELECT id, task_id, user_name, requested, assigned, status, created_at, served_at, pooled FROM loanq_work_request;

CREATE TABLE loanq_work_new (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     INTEGER NOT NULL REFERENCES loanq_task (id),
    user_name   TEXT    NOT NULL,
    request_id  INTEGER NOT NULL REFERENCES loanq_work_request_new (id),
    assigned_at TEXT    NOT NULL,
    disposition TEXT,
    disposed_at TEXT,
    return_at   TEXT,
    disposed_by TEXT,
    loan_id     TEXT    NOT NULL DEFAULT '',
    CONSTRAINT loanq_work_disposition_ck CHECK (disposition IN ('complete', 'return', 'never', 'expired', 'reclaimed')),
    CONSTRAINT loanq_work_disposed_ck CHECK ((disposition IS NULL) = (disposed_at IS NULL)),
    CONSTRAINT loanq_work_return_ck CHECK (return_at IS NULL OR disposition = 'return')
);
INSERT INTO loanq_work_new (id, task_id, user_name, request_id, assigned_at, disposition, disposed_at, return_at, disposed_by, loan_id)
SELECT id, task_id, user_name, request_id, assigned_at, disposition, disposed_at, return_at, disposed_by, loan_id FROM loanq_work;

DROP TABLE loanq_work;
DROP TABLE loanq_work_request;
ALTER TABLE loanq_work_request_new RENAME TO loanq_work_request;
ALTER TABLE loanq_work_new RENAME TO loanq_work;

CREATE INDEX loanq_work_request_pending_ix ON loanq_work_request (task_id, id) WHERE status = 'pending';
CREATE INDEX loanq_work_request_rate_ix ON loanq_work_request (task_id, created_at);
CREATE UNIQUE INDEX loanq_request_one_pending_uq ON loanq_work_request (task_id, user_name) WHERE status = 'pending';
CREATE INDEX loanq_work_request_served_ix ON loanq_work_request (served_at, id);
CREATE INDEX loanq_work_user_active_ix ON loanq_work (user_name, task_id) WHERE disposition IS NULL;
CREATE INDEX loanq_work_request_ix ON loanq_work (request_id);
CREATE INDEX loanq_work_active_age_ix ON loanq_work (task_id, assigned_at) WHERE disposition IS NULL;
CREATE UNIQUE INDEX loanq_work_one_active_uq ON loanq_work (task_id, loan_id) WHERE disposition IS NULL;
CREATE INDEX loanq_work_task_loan_ix ON loanq_work (task_id, loan_id, disposition, return_at);

-- +goose Down
-- The CHECK keeps the new value (another rebuild for nothing); the column
-- and the value in use go.
UPDATE loanq_work_request SET status = 'cancelled' WHERE status = 'expired';
ALTER TABLE loanq_work_request DROP COLUMN alive_at;
