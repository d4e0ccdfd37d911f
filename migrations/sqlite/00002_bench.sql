-- Superseded by 00014: the bench creates its own table now (bench/dialects.go);
-- this stays for the history of databases migrated before.
-- The item table of `loanq bench` (figures in BENCHMARKS.md). SQLite has no
-- row locks, so only the lease strategy runs here: an item is claimed by an
-- UPDATE in an immediate (write-locked) transaction that is committed at
-- once, and finished by a second, fenced UPDATE. processed counts how often
-- an item was finished: more than 1 is a duplicate, which the bench reports.

-- +goose Up
CREATE TABLE loanq_bench_item (
    id               INTEGER NOT NULL PRIMARY KEY,
    status           TEXT    NOT NULL DEFAULT 'ready',
    owner            TEXT,
    claimed_at       TEXT,
    lease_expires_at TEXT,
    processed_at     TEXT,
    processed        INTEGER NOT NULL DEFAULT 0,
    CONSTRAINT loanq_bench_item_status_ck CHECK (status IN ('ready', 'claimed', 'done'))
);
CREATE INDEX loanq_bench_item_status_ix ON loanq_bench_item (status, id);

-- +goose Down
-- IF EXISTS: 00014 (or a bench run) may have dropped it already.
DROP TABLE IF EXISTS loanq_bench_item;
