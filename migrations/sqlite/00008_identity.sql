-- Who changed a task last (`task update` records it; docs/security.md).
-- SQLite has no database accounts: whoever can write the file can do
-- anything loanq does, so there is no loanq_account table and no rule about
-- who may act as whom here. The file's permissions are the boundary.

-- +goose Up
ALTER TABLE loanq_task ADD COLUMN updated_by TEXT;
ALTER TABLE loanq_task ADD COLUMN updated_at TEXT;

-- +goose Down
ALTER TABLE loanq_task DROP COLUMN updated_at;
ALTER TABLE loanq_task DROP COLUMN updated_by;
