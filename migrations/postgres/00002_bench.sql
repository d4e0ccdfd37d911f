-- Superseded by 00014: the bench creates its own table now (bench/dialects.go);
-- this stays for the history of databases migrated before.
-- The item table of `loanq bench` (figures in BENCHMARKS.md). Nothing in
-- the work queue reads it; it is here so a DBA can measure how this server's
-- row locks share a table between concurrent workers.
--
-- status: ready -> done for the row-lock strategies (claimed and finished in
-- one transaction, the row lock is the claim); ready -> claimed -> done for
-- lease, where the claim is committed with an expiry and no lock is held
-- while the item is worked on. processed counts how often an item was
-- finished: more than 1 is a duplicate, which the bench reports.

-- +goose Up
CREATE TABLE loanq_bench_item (
    id               BIGINT       NOT NULL PRIMARY KEY,
    status           VARCHAR(10)  NOT NULL DEFAULT 'ready',
    owner            VARCHAR(100),
    claimed_at       TIMESTAMPTZ,
    lease_expires_at TIMESTAMPTZ,
    processed_at     TIMESTAMPTZ,
    processed        INTEGER      NOT NULL DEFAULT 0,
    CONSTRAINT loanq_bench_item_status_ck CHECK (status IN ('ready', 'claimed', 'done'))
);

-- The claim reads "WHERE status = 'ready' ORDER BY id LIMIT k": this index
-- gives the rows in claim order, so the locking read stops after k rows.
CREATE INDEX loanq_bench_item_status_ix ON loanq_bench_item (status, id);

-- +goose Down
-- IF EXISTS: 00014 (or a bench run) may have dropped it already.
DROP TABLE IF EXISTS loanq_bench_item;
