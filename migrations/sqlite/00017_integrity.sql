-- The columns of the other dialects' 00017 (docs/security.md): who wrote an
-- assignment, who took a named lock. SQLite has no database accounts: the
-- checks those migrations add for untrusted accounts have nobody to apply
-- to here (whoever can write the file can do anything loanq does), so the
-- columns stay empty.

-- +goose Up
ALTER TABLE loanq_work ADD COLUMN assigned_by VARCHAR(128);
ALTER TABLE loanq_lock ADD COLUMN taken_by VARCHAR(128);

-- +goose Down
ALTER TABLE loanq_lock DROP COLUMN taken_by;
ALTER TABLE loanq_work DROP COLUMN assigned_by;
