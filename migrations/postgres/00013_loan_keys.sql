-- Loan keys of any type (docs/algorithm.md, "Loan keys"): a task's key may
-- be an integer, text or UUID column of its source. loanq keeps every loan
-- key as text of at most 200 characters (drivers.MaxKeyLength): an
-- integer's decimal digits, a UUID's canonical lower-case form, text as it
-- is. The existing integer ids convert to their decimal text; the indexes on
-- (task_id, loan_id) are rebuilt with the columns. key_kind is how the task's
-- keys are read and shown (integer: JSON numbers, as before; text and uuid:
-- JSON strings), detected from the key column's type at `task create`.

-- +goose Up
ALTER TABLE loanq_task ADD COLUMN key_kind VARCHAR(10) NOT NULL DEFAULT 'integer'
    CONSTRAINT loanq_task_key_kind_ck CHECK (key_kind IN ('integer', 'text', 'uuid'));
ALTER TABLE loanq_work ALTER COLUMN loan_id TYPE VARCHAR(200) USING loan_id::text;
ALTER TABLE loanq_pool ALTER COLUMN loan_id TYPE VARCHAR(200) USING loan_id::text;

-- +goose Down
ALTER TABLE loanq_pool ALTER COLUMN loan_id TYPE BIGINT USING loan_id::bigint;
ALTER TABLE loanq_work ALTER COLUMN loan_id TYPE BIGINT USING loan_id::bigint;
ALTER TABLE loanq_task DROP COLUMN key_kind;
