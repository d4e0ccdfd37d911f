-- loanq schema for MySQL >= 8.0.16 and MariaDB >= 10.6 (InnoDB); MySQL parses
-- but ignores CHECK constraints before 8.0.16.
-- Times are DATETIME(6) in UTC, written from UTC_TIMESTAMP(6) (the database clock).
-- Every table is utf8mb4 with the binary collation, whatever the server's
-- defaults: a processor's name may hold any character (a server started with
-- latin1 refused '✓'), and case counts, as on the other databases (with a _ci
-- collation "Ana" and "ana" would share a cap and a pipeline). utf8mb4_bin is
-- PAD SPACE ('ana' = 'ana '): loanq refuses names with trailing spaces.

-- +goose Up
CREATE TABLE loanq_task (
    id               BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name             VARCHAR(100) NOT NULL,
    source_table     VARCHAR(200) NOT NULL,
    key_column       VARCHAR(100) NOT NULL,
    criteria         TEXT         NOT NULL,
    order_by         TEXT         NOT NULL,
    max_active       INT,
    lock_strategy    VARCHAR(10)  NOT NULL,
    query_delay_ms   BIGINT       NOT NULL,
    lease_ttl_ms     BIGINT       NOT NULL,
    lease_owner      VARCHAR(200),
    lease_token      BIGINT       NOT NULL DEFAULT 0,
    lease_expires_at DATETIME(6),
    created_by       VARCHAR(100) NOT NULL,
    created_at       DATETIME(6)  NOT NULL,
    CONSTRAINT loanq_task_name_uq UNIQUE (name),
    CONSTRAINT loanq_task_lock_ck CHECK (lock_strategy IN ('skip', 'nowait', 'wait', 'lease')),
    CONSTRAINT loanq_task_cap_ck CHECK (max_active IS NULL OR max_active > 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE loanq_work_request (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    task_id    BIGINT       NOT NULL,
    user_name  VARCHAR(100) NOT NULL,
    requested  INT          NOT NULL,
    assigned   INT          NOT NULL DEFAULT 0,
    status     VARCHAR(10)  NOT NULL DEFAULT 'pending',
    created_at DATETIME(6)  NOT NULL,
    served_at  DATETIME(6),
    -- No foreign key to loanq_task on purpose: InnoDB checks a foreign key by
    -- taking a shared lock on the parent row, and the task lock holds that
    -- row exclusively for the whole criteria query, so every new request
    -- would wait for it. The engine only writes task ids it has just read.
    INDEX loanq_work_request_task_ix (task_id),
    CONSTRAINT loanq_work_request_status_ck CHECK (status IN ('pending', 'assigned', 'partial', 'empty')),
    CONSTRAINT loanq_work_request_count_ck CHECK (requested > 0 AND assigned >= 0 AND assigned <= requested),
    -- No partial indexes in MySQL: status leads so pending rows are one range.
    INDEX loanq_work_request_pending_ix (task_id, status, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE loanq_work (
    id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    task_id     BIGINT       NOT NULL,
    loan_id     BIGINT       NOT NULL,
    user_name   VARCHAR(100) NOT NULL,
    request_id  BIGINT       NOT NULL,
    assigned_at DATETIME(6)  NOT NULL,
    disposition VARCHAR(10),
    disposed_at DATETIME(6),
    return_at   DATETIME(6),
    -- MySQL has no partial unique index. This generated column holds the loan id
    -- while the row is active and NULL once dispositioned; a unique index treats
    -- NULLs as distinct, so only active rows can collide.
    active_loan_id BIGINT AS (CASE WHEN disposition IS NULL THEN loan_id END) STORED,
    -- No foreign key to loanq_task: see loanq_work_request.
    CONSTRAINT loanq_work_request_fk FOREIGN KEY (request_id) REFERENCES loanq_work_request (id),
    CONSTRAINT loanq_work_disposition_ck CHECK (disposition IN ('complete', 'return', 'never')),
    CONSTRAINT loanq_work_disposed_ck CHECK ((disposition IS NULL) = (disposed_at IS NULL)),
    CONSTRAINT loanq_work_return_ck CHECK (return_at IS NULL OR disposition = 'return'),
    UNIQUE INDEX loanq_work_one_active_uq (task_id, active_loan_id),
    INDEX loanq_work_task_loan_ix (task_id, loan_id, disposition, return_at),
    INDEX loanq_work_user_active_ix (user_name, task_id, disposition),
    INDEX loanq_work_request_ix (request_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE loanq_query_run (
    id              BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    task_id         BIGINT       NOT NULL,
    strategy        VARCHAR(10)  NOT NULL,
    holder          VARCHAR(100) NOT NULL,
    started_at      DATETIME(6)  NOT NULL,
    duration_ms     BIGINT       NOT NULL,
    rows_found      INT          NOT NULL,
    requests_served INT          NOT NULL,
    loans_assigned  INT          NOT NULL,
    INDEX loanq_query_run_task_ix (task_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE loanq_query_run;
DROP TABLE loanq_work;
DROP TABLE loanq_work_request;
DROP TABLE loanq_task;
