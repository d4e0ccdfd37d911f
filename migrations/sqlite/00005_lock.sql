-- Named leases of `loanq lock run` (the farm singleton; docs/algorithm.md,
-- "Named locks"). One row per lock name, created on first use and kept: a
-- free lock has holder NULL. token grows at every take (the fencing token
-- handed to the command). Times are fixed-width ISO-8601 UTC text from the
-- database clock, so comparing them as text compares the times.

-- +goose Up
CREATE TABLE loanq_lock (
    name       TEXT    NOT NULL PRIMARY KEY,
    holder     TEXT,
    token      INTEGER NOT NULL DEFAULT 0,
    taken_at   TEXT,
    expires_at TEXT
);

-- +goose Down
DROP TABLE loanq_lock;
