-- Loan keys of any type: see migrations/postgres/00013_loan_keys.sql. The
-- loan_id columns are utf8mb4_bin like the rest of loanq's text: keys compare
-- exactly (case and trailing spaces count), and the criteria query compares
-- them with the source key cast to text in this collation (KeyAsText), so
-- the comparison never mixes collations. The generated column of the
-- one-active-row index follows loan_id.

-- +goose Up
ALTER TABLE loanq_task ADD COLUMN key_kind VARCHAR(10) NOT NULL DEFAULT 'integer',
    ADD CONSTRAINT loanq_task_key_kind_ck CHECK (key_kind IN ('integer', 'text', 'uuid'));
ALTER TABLE loanq_work
    MODIFY loan_id VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    MODIFY active_loan_id VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin AS (CASE WHEN disposition IS NULL THEN loan_id END) STORED;
ALTER TABLE loanq_pool MODIFY loan_id VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;

-- +goose Down
ALTER TABLE loanq_pool MODIFY loan_id BIGINT NOT NULL;
ALTER TABLE loanq_work
    MODIFY loan_id BIGINT NOT NULL,
    MODIFY active_loan_id BIGINT AS (CASE WHEN disposition IS NULL THEN loan_id END) STORED;
ALTER TABLE loanq_task DROP CONSTRAINT loanq_task_key_kind_ck, DROP COLUMN key_kind;
