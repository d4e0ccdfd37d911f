-- Named leases of `loanq lock run` (the farm singleton; docs/algorithm.md,
-- "Named locks"). One row per lock name, created on first use and kept: a
-- free lock has holder NULL. token grows at every take (the fencing token
-- handed to the command), so a holder that lost its lease cannot renew or
-- release the next holder's. Times come from the database clock.

-- +goose Up
CREATE TABLE loanq_lock (
    name       VARCHAR(200) NOT NULL PRIMARY KEY,
    holder     VARCHAR(200),
    token      BIGINT       NOT NULL DEFAULT 0,
    taken_at   TIMESTAMPTZ,
    expires_at TIMESTAMPTZ
);

-- +goose Down
DROP TABLE loanq_lock;
