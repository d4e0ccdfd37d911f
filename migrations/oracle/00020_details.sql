-- Loan details, a link and a priority per task (docs/commands.md, "Loan
-- details and a link" and "loanq work next"): show_columns lists the columns of the task's source
-- shown with each loan (comma-separated, checked against the source when the
-- task is created or changed), link_template a URL template into the lending
-- system ({key}, {COLUMN}), priority orders the tasks of `work next` (higher
-- first). NULL show_columns and link_template: nothing shown, no link.
-- Same statement rules as 00001_schema.sql.

-- +goose Up
-- +goose StatementBegin
ALTER TABLE loanq_task ADD (priority NUMBER(10) DEFAULT 0 NOT NULL, show_columns VARCHAR2(1000 CHAR), link_template VARCHAR2(2000 CHAR))
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
ALTER TABLE loanq_task DROP (priority, show_columns, link_template)
-- +goose StatementEnd
