-- The candidate pool of a task (docs/algorithm.md, "The candidate pool"):
-- see migrations/postgres/00010_pool.sql for what each column means. The
-- claim locks pool rows through loanq_lock_rows (migration 00003): a
-- FOR UPDATE SKIP LOCKED cursor locks a row only when it is fetched, so
-- fetching k rows locks exactly k. Same statement rules as 00001_schema.sql.
-- Only the exact text is tested: no Oracle server runs loanq's tests.

-- +goose Up
-- +goose StatementBegin
ALTER TABLE loanq_task ADD (prefetch NUMBER(10), prefetch_ttl_ms NUMBER(19), prefetch_low NUMBER(10),
    CONSTRAINT loanq_task_prefetch_ck
    CHECK ((prefetch IS NULL OR prefetch > 0) AND (prefetch_ttl_ms IS NULL OR prefetch_ttl_ms > 0) AND (prefetch_low IS NULL OR prefetch_low >= 0)))
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work_request ADD (pooled NUMBER(1))
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_query_run ADD (pooled NUMBER(10))
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TABLE loanq_pool (
    task_id   NUMBER(19)   NOT NULL,
    loan_id   NUMBER(19)   NOT NULL,
    pos       NUMBER(10)   NOT NULL,
    filled_at TIMESTAMP(6) NOT NULL,
    CONSTRAINT loanq_pool_pk PRIMARY KEY (task_id, loan_id),
    CONSTRAINT loanq_pool_task_fk FOREIGN KEY (task_id) REFERENCES loanq_task (id)
)
-- +goose StatementEnd

-- +goose StatementBegin
CREATE INDEX loanq_pool_order_ix ON loanq_pool (task_id, pos)
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE loanq_pool PURGE
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_query_run DROP (pooled)
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work_request DROP (pooled)
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_task DROP CONSTRAINT loanq_task_prefetch_ck
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_task DROP (prefetch, prefetch_ttl_ms, prefetch_low)
-- +goose StatementEnd
