-- The candidate pool of a task (docs/algorithm.md, "The candidate pool").
-- A task with --prefetch N keeps up to N candidate keys found by its latest
-- criteria run, in the criteria order (pos), in loanq_pool: a table used as
-- a queue. `work get` claims the first pool rows nobody else is claiming
-- (FOR UPDATE SKIP LOCKED), rechecks each by key against the criteria and
-- the eligibility rules, assigns the eligible ones and deletes every claimed
-- row, in one short transaction. A pool row is only a hint: the recheck, not
-- the pool, decides what is handed out, so a stale or hand-written row is
-- dropped, never assigned.
--
-- prefetch_ttl_ms: candidates older than this are not claimed; prefetch_low:
-- `loanq task refill` and `serve --refill` refill a task whose fresh pool is
-- below it. loanq_work_request.pooled marks a request served from the pool
-- (the pool's hits); loanq_query_run.pooled counts the candidates a run put
-- in the pool (its refills).
--
-- No row-level security on the pool: every account that serves a task
-- refills and claims it, and nothing in it is trusted.

-- +goose Up
ALTER TABLE loanq_task ADD COLUMN prefetch INTEGER;
ALTER TABLE loanq_task ADD COLUMN prefetch_ttl_ms BIGINT;
ALTER TABLE loanq_task ADD COLUMN prefetch_low INTEGER;
ALTER TABLE loanq_task ADD CONSTRAINT loanq_task_prefetch_ck
    CHECK ((prefetch IS NULL OR prefetch > 0) AND (prefetch_ttl_ms IS NULL OR prefetch_ttl_ms > 0) AND (prefetch_low IS NULL OR prefetch_low >= 0));
ALTER TABLE loanq_work_request ADD COLUMN pooled SMALLINT;
ALTER TABLE loanq_query_run ADD COLUMN pooled INTEGER;

CREATE TABLE loanq_pool (
    task_id   BIGINT      NOT NULL REFERENCES loanq_task (id),
    loan_id   BIGINT      NOT NULL,
    pos       INTEGER     NOT NULL,
    filled_at TIMESTAMPTZ NOT NULL,
    CONSTRAINT loanq_pool_pk PRIMARY KEY (task_id, loan_id)
);
CREATE INDEX loanq_pool_order_ix ON loanq_pool (task_id, pos);

-- +goose Down
DROP TABLE loanq_pool;
ALTER TABLE loanq_query_run DROP COLUMN pooled;
ALTER TABLE loanq_work_request DROP COLUMN pooled;
ALTER TABLE loanq_task DROP CONSTRAINT loanq_task_prefetch_ck;
ALTER TABLE loanq_task DROP COLUMN prefetch_low;
ALTER TABLE loanq_task DROP COLUMN prefetch_ttl_ms;
ALTER TABLE loanq_task DROP COLUMN prefetch;
