-- Named leases of `loanq lock run` (the farm singleton; docs/algorithm.md,
-- "Named locks"). One row per lock name, created on first use and kept: a
-- free lock has holder NULL. token grows at every take (the fencing token
-- handed to the command), so a holder that lost its lease cannot renew or
-- release the next holder's. Times are UTC from UTC_TIMESTAMP(6).

-- +goose Up
CREATE TABLE loanq_lock (
    name       VARCHAR(200) NOT NULL PRIMARY KEY,
    holder     VARCHAR(200),
    token      BIGINT       NOT NULL DEFAULT 0,
    taken_at   DATETIME(6),
    expires_at DATETIME(6)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE loanq_lock;
