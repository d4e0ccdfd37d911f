-- loanq schema for SQLite (the embedded default).
-- SQLite has one writer at a time and no row locks, so the only lock strategy
-- is the lease row (docs/algorithm.md, "The lease strategy"). Times are
-- ISO-8601 UTC text with milliseconds, written by
-- strftime('%Y-%m-%dT%H:%M:%fZ', 'now'): fixed width, so text
-- comparison is time comparison.

-- +goose Up
CREATE TABLE loanq_task (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    name             TEXT    NOT NULL,
    source_table     TEXT    NOT NULL,
    key_column       TEXT    NOT NULL,
    criteria         TEXT    NOT NULL,
    order_by         TEXT    NOT NULL,
    max_active       INTEGER,
    lock_strategy    TEXT    NOT NULL,
    query_delay_ms   INTEGER NOT NULL,
    lease_ttl_ms     INTEGER NOT NULL,
    lease_owner      TEXT,
    lease_token      INTEGER NOT NULL DEFAULT 0,
    lease_expires_at TEXT,
    created_by       TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    CONSTRAINT loanq_task_name_uq UNIQUE (name),
    CONSTRAINT loanq_task_lock_ck CHECK (lock_strategy IN ('skip', 'nowait', 'wait', 'lease')),
    CONSTRAINT loanq_task_cap_ck CHECK (max_active IS NULL OR max_active > 0)
);

CREATE TABLE loanq_work_request (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id    INTEGER NOT NULL REFERENCES loanq_task (id),
    user_name  TEXT    NOT NULL,
    requested  INTEGER NOT NULL,
    assigned   INTEGER NOT NULL DEFAULT 0,
    status     TEXT    NOT NULL DEFAULT 'pending',
    created_at TEXT    NOT NULL,
    served_at  TEXT,
    CONSTRAINT loanq_work_request_status_ck CHECK (status IN ('pending', 'assigned', 'partial', 'empty')),
    CONSTRAINT loanq_work_request_count_ck CHECK (requested > 0 AND assigned >= 0 AND assigned <= requested)
);
CREATE INDEX loanq_work_request_pending_ix ON loanq_work_request (task_id, id) WHERE status = 'pending';

CREATE TABLE loanq_work (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     INTEGER NOT NULL REFERENCES loanq_task (id),
    loan_id     INTEGER NOT NULL,
    user_name   TEXT    NOT NULL,
    request_id  INTEGER NOT NULL REFERENCES loanq_work_request (id),
    assigned_at TEXT    NOT NULL,
    disposition TEXT,
    disposed_at TEXT,
    return_at   TEXT,
    CONSTRAINT loanq_work_disposition_ck CHECK (disposition IN ('complete', 'return', 'never')),
    CONSTRAINT loanq_work_disposed_ck CHECK ((disposition IS NULL) = (disposed_at IS NULL)),
    CONSTRAINT loanq_work_return_ck CHECK (return_at IS NULL OR disposition = 'return')
);
-- The invariant in the schema: one active row per (task, loan).
CREATE UNIQUE INDEX loanq_work_one_active_uq ON loanq_work (task_id, loan_id) WHERE disposition IS NULL;
CREATE INDEX loanq_work_task_loan_ix ON loanq_work (task_id, loan_id, disposition, return_at);
CREATE INDEX loanq_work_user_active_ix ON loanq_work (user_name, task_id) WHERE disposition IS NULL;
CREATE INDEX loanq_work_request_ix ON loanq_work (request_id);

CREATE TABLE loanq_query_run (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id         INTEGER NOT NULL REFERENCES loanq_task (id),
    strategy        TEXT    NOT NULL,
    holder          TEXT    NOT NULL,
    started_at      TEXT    NOT NULL,
    duration_ms     INTEGER NOT NULL,
    rows_found      INTEGER NOT NULL,
    requests_served INTEGER NOT NULL,
    loans_assigned  INTEGER NOT NULL
);
CREATE INDEX loanq_query_run_task_ix ON loanq_query_run (task_id, id);

-- +goose Down
DROP TABLE loanq_query_run;
DROP TABLE loanq_work;
DROP TABLE loanq_work_request;
DROP TABLE loanq_task;
