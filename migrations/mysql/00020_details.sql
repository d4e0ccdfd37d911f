-- Loan details, a link and a priority per task (docs/commands.md, "Loan
-- details and a link" and "loanq work next"): show_columns lists the columns of the task's source
-- shown with each loan (comma-separated, checked against the source when the
-- task is created or changed), link_template a URL template into the lending
-- system ({key}, {COLUMN}), priority orders the tasks of `work next` (higher
-- first). NULL show_columns and link_template: nothing shown, no link.

-- +goose Up
ALTER TABLE loanq_task ADD COLUMN priority INT NOT NULL DEFAULT 0;
ALTER TABLE loanq_task ADD COLUMN show_columns VARCHAR(1000) NULL;
ALTER TABLE loanq_task ADD COLUMN link_template VARCHAR(2000) NULL;

-- +goose Down
ALTER TABLE loanq_task DROP COLUMN link_template;
ALTER TABLE loanq_task DROP COLUMN show_columns;
ALTER TABLE loanq_task DROP COLUMN priority;
