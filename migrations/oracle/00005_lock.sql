-- Named leases of `loanq lock run` (the farm singleton; docs/algorithm.md,
-- "Named locks"). One row per lock name, created on first use and kept: a
-- free lock has holder NULL. token grows at every take (the fencing token
-- handed to the command). Times are TIMESTAMP(6) holding UTC from
-- SYS_EXTRACT_UTC(SYSTIMESTAMP). Same rules as 00001_schema.sql: every
-- statement wrapped in StatementBegin/End without a trailing ';'.

-- +goose Up
-- +goose StatementBegin
CREATE TABLE loanq_lock (
    name       VARCHAR2(200 CHAR) NOT NULL,
    holder     VARCHAR2(200 CHAR),
    token      NUMBER(19)         DEFAULT 0 NOT NULL,
    taken_at   TIMESTAMP(6),
    expires_at TIMESTAMP(6),
    CONSTRAINT loanq_lock_pk PRIMARY KEY (name)
)
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE loanq_lock PURGE
-- +goose StatementEnd
