-- loanq schema for PostgreSQL >= 12.
-- Times are timestamptz written from the database clock (clock_timestamp(), not
-- now(): now() is frozen at transaction start, and a `wait` caller may have
-- queued behind a lock for a long time before it assigns).

-- +goose Up
CREATE TABLE loanq_task (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             VARCHAR(100) NOT NULL,
    source_table     VARCHAR(200) NOT NULL,
    key_column       VARCHAR(100) NOT NULL,
    criteria         TEXT         NOT NULL,
    order_by         TEXT         NOT NULL,
    max_active       INTEGER,
    lock_strategy    VARCHAR(10)  NOT NULL,
    query_delay_ms   BIGINT       NOT NULL,
    lease_ttl_ms     BIGINT       NOT NULL,
    -- lease strategy (docs/algorithm.md): who holds it, until when, and a
    -- fencing token that grows at every take-over so a stale holder cannot
    -- commit.
    lease_owner      VARCHAR(200),
    lease_token      BIGINT       NOT NULL DEFAULT 0,
    lease_expires_at TIMESTAMPTZ,
    created_by       VARCHAR(100) NOT NULL,
    created_at       TIMESTAMPTZ  NOT NULL,
    CONSTRAINT loanq_task_name_uq UNIQUE (name),
    CONSTRAINT loanq_task_lock_ck CHECK (lock_strategy IN ('skip', 'nowait', 'wait', 'lease')),
    CONSTRAINT loanq_task_cap_ck CHECK (max_active IS NULL OR max_active > 0)
);

CREATE TABLE loanq_work_request (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id    BIGINT       NOT NULL REFERENCES loanq_task (id),
    user_name  VARCHAR(100) NOT NULL,
    requested  INTEGER      NOT NULL,
    assigned   INTEGER      NOT NULL DEFAULT 0,
    status     VARCHAR(10)  NOT NULL DEFAULT 'pending',
    created_at TIMESTAMPTZ  NOT NULL,
    served_at  TIMESTAMPTZ,
    CONSTRAINT loanq_work_request_status_ck CHECK (status IN ('pending', 'assigned', 'partial', 'empty')),
    CONSTRAINT loanq_work_request_count_ck CHECK (requested > 0 AND assigned >= 0 AND assigned <= requested)
);
-- The lock holder reads the pending requests of its task, oldest first.
CREATE INDEX loanq_work_request_pending_ix ON loanq_work_request (task_id, id) WHERE status = 'pending';

CREATE TABLE loanq_work (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id     BIGINT       NOT NULL REFERENCES loanq_task (id),
    loan_id     BIGINT       NOT NULL,
    user_name   VARCHAR(100) NOT NULL,
    request_id  BIGINT       NOT NULL REFERENCES loanq_work_request (id),
    assigned_at TIMESTAMPTZ  NOT NULL,
    -- NULL while active; set once, never overwritten: the row is the history.
    disposition VARCHAR(10),
    disposed_at TIMESTAMPTZ,
    return_at   TIMESTAMPTZ,
    CONSTRAINT loanq_work_disposition_ck CHECK (disposition IN ('complete', 'return', 'never')),
    CONSTRAINT loanq_work_disposed_ck CHECK ((disposition IS NULL) = (disposed_at IS NULL)),
    CONSTRAINT loanq_work_return_ck CHECK (return_at IS NULL OR disposition = 'return')
);
-- The invariant, enforced by the database and not only by the lock: a loan is
-- active in at most one pipeline per task.
CREATE UNIQUE INDEX loanq_work_one_active_uq ON loanq_work (task_id, loan_id) WHERE disposition IS NULL;
-- Eligibility (NOT EXISTS in the criteria query) looks up every row of a (task, loan).
CREATE INDEX loanq_work_task_loan_ix ON loanq_work (task_id, loan_id, disposition, return_at);
-- Pipeline and the per-user cap read a user's active work.
CREATE INDEX loanq_work_user_active_ix ON loanq_work (user_name, task_id) WHERE disposition IS NULL;
CREATE INDEX loanq_work_request_ix ON loanq_work (request_id);

CREATE TABLE loanq_query_run (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id         BIGINT       NOT NULL REFERENCES loanq_task (id),
    strategy        VARCHAR(10)  NOT NULL,
    holder          VARCHAR(100) NOT NULL,
    started_at      TIMESTAMPTZ  NOT NULL,
    duration_ms     BIGINT       NOT NULL,
    rows_found      INTEGER      NOT NULL,
    requests_served INTEGER      NOT NULL,
    loans_assigned  INTEGER      NOT NULL
);
CREATE INDEX loanq_query_run_task_ix ON loanq_query_run (task_id, id);

-- +goose Down
DROP TABLE loanq_query_run;
DROP TABLE loanq_work;
DROP TABLE loanq_work_request;
DROP TABLE loanq_task;
