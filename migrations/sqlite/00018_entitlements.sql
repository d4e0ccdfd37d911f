-- Entitlements and four eyes (docs/governance.md): the tables of the other
-- dialects' 00018. SQLite has no database accounts: the engine's checks
-- are the only ones (whoever can write the file can do anything loanq does).

-- +goose Up
CREATE TABLE loanq_group (
    group_name TEXT NOT NULL,
    user_name  TEXT NOT NULL,
    source     TEXT NOT NULL DEFAULT 'admin' CHECK (source IN ('admin', 'proxy')),
    added_by   TEXT NOT NULL DEFAULT '',
    added_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (group_name, user_name)
);
CREATE INDEX loanq_group_user_ix ON loanq_group (user_name, group_name);

CREATE TABLE loanq_task_allow (
    task_id   INTEGER NOT NULL REFERENCES loanq_task (id),
    is_group  INTEGER NOT NULL CHECK (is_group IN (0, 1)),
    principal TEXT    NOT NULL,
    PRIMARY KEY (task_id, is_group, principal)
);

CREATE TABLE loanq_task_not_worked_in (
    task_id       INTEGER NOT NULL REFERENCES loanq_task (id),
    other_task_id INTEGER NOT NULL REFERENCES loanq_task (id),
    PRIMARY KEY (task_id, other_task_id),
    CHECK (task_id <> other_task_id)
);
CREATE INDEX loanq_task_not_worked_in_ix ON loanq_task_not_worked_in (other_task_id);

-- +goose Down
DROP TABLE loanq_task_not_worked_in;
DROP TABLE loanq_task_allow;
DROP TABLE loanq_group;
