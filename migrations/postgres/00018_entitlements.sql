-- Entitlements and four eyes (docs/governance.md).
--
-- * loanq_group: who is in which group (`loanq group add|remove`); rows of
--   source 'proxy' are the groups a trusted proxy's header named for the
--   user (`serve --auth proxy --proxy-groups-header`), kept in step by
--   serve, so that the database's checks and every node see them too.
-- * loanq_task_allow: who may work a task (`task create|update --allow
--   USER|@GROUP`): a user by name (is_group 0) or a group (is_group 1). A
--   task without a row may be worked by everyone.
-- * loanq_task_not_worked_in: four eyes (`--not-worked-in TASK`): a loan is
--   never assigned in task_id to a user who has a work row for it
--   (active or disposed, while retained) in other_task_id.
--
-- For an untrusted account (processor, refresher) the database refuses a
-- request or a work row for a user who may not work the task, and a work
-- row that breaks four eyes. Like 00017's, the checks skip trusted
-- accounts and, by the trigger's WHEN, the owner: the engine checks the
-- same before it writes (dispatch/governance.go), so a trusted account's
-- writes keep the rules too. The four-eyes lookup reads loanq_work by
-- (task_id, loan_id), the prefix of loanq_work_task_loan_ix.

-- +goose Up
CREATE TABLE loanq_group (
    group_name VARCHAR(100) NOT NULL,
    user_name  VARCHAR(100) NOT NULL,
    source     VARCHAR(10)  NOT NULL DEFAULT 'admin',
    added_by   VARCHAR(128) NOT NULL DEFAULT current_user,
    added_at   TIMESTAMPTZ  NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT loanq_group_pk PRIMARY KEY (group_name, user_name),
    CONSTRAINT loanq_group_source_ck CHECK (source IN ('admin', 'proxy'))
);
-- A user's groups (the entitlement check, the proxy's sync).
CREATE INDEX loanq_group_user_ix ON loanq_group (user_name, group_name);

CREATE TABLE loanq_task_allow (
    task_id   BIGINT       NOT NULL REFERENCES loanq_task (id),
    is_group  SMALLINT     NOT NULL,
    principal VARCHAR(100) NOT NULL,
    CONSTRAINT loanq_task_allow_pk PRIMARY KEY (task_id, is_group, principal),
    CONSTRAINT loanq_task_allow_kind_ck CHECK (is_group IN (0, 1))
);

CREATE TABLE loanq_task_not_worked_in (
    task_id       BIGINT NOT NULL REFERENCES loanq_task (id),
    other_task_id BIGINT NOT NULL REFERENCES loanq_task (id),
    CONSTRAINT loanq_task_not_worked_in_pk PRIMARY KEY (task_id, other_task_id),
    CONSTRAINT loanq_task_not_worked_in_ck CHECK (task_id <> other_task_id)
);
-- Task delete looks for the rules that name a task.
CREATE INDEX loanq_task_not_worked_in_ix ON loanq_task_not_worked_in (other_task_id);

-- +goose StatementBegin
DO $do$
BEGIN
    EXECUTE format($f$
CREATE FUNCTION loanq_may_work(t BIGINT, u VARCHAR) RETURNS BOOLEAN
LANGUAGE sql STABLE
AS $body$
SELECT NOT EXISTS (SELECT 1 FROM %1$I.loanq_task_allow a WHERE a.task_id = t)
    OR EXISTS (SELECT 1 FROM %1$I.loanq_task_allow a WHERE a.task_id = t AND a.is_group = 0 AND a.principal = u)
    OR EXISTS (SELECT 1 FROM %1$I.loanq_task_allow a JOIN %1$I.loanq_group g ON g.group_name = a.principal
               WHERE a.task_id = t AND a.is_group = 1 AND g.user_name = u)
$body$
$f$, current_schema());

    EXECUTE format($f$
CREATE FUNCTION loanq_governance_check() RETURNS trigger
LANGUAGE plpgsql
AS $body$
BEGIN
    IF %1$I.loanq_trusted() THEN
        RETURN NEW;
    END IF;
    IF NOT %1$I.loanq_may_work(NEW.task_id, NEW.user_name) THEN
        RAISE EXCEPTION 'loanq: user %% is not allowed to work task %% (docs/governance.md)',
            NEW.user_name, (SELECT t.name FROM %1$I.loanq_task t WHERE t.id = NEW.task_id)
            USING ERRCODE = '42501';
    END IF;
    -- Nested: a request's row has no loan_id, and PL/pgSQL reads every
    -- field an expression names.
    IF TG_TABLE_NAME = 'loanq_work' THEN
        IF EXISTS (
            SELECT 1 FROM %1$I.loanq_task_not_worked_in f JOIN %1$I.loanq_work w ON w.task_id = f.other_task_id
            WHERE f.task_id = NEW.task_id AND w.loan_id = NEW.loan_id AND w.user_name = NEW.user_name) THEN
            RAISE EXCEPTION 'loanq: four eyes: user %% worked loan %% in a task that task %% names with --not-worked-in (docs/governance.md)',
                NEW.user_name, NEW.loan_id, (SELECT t.name FROM %1$I.loanq_task t WHERE t.id = NEW.task_id)
                USING ERRCODE = '42501';
        END IF;
    END IF;
    RETURN NEW;
END
$body$
$f$, current_schema());

    EXECUTE format($t$
CREATE TRIGGER loanq_request_governance BEFORE INSERT ON loanq_work_request
    FOR EACH ROW WHEN (current_user <> %1$L) EXECUTE FUNCTION loanq_governance_check()$t$, current_user);
    EXECUTE format($t$
CREATE TRIGGER loanq_work_governance BEFORE INSERT ON loanq_work
    FOR EACH ROW WHEN (current_user <> %1$L) EXECUTE FUNCTION loanq_governance_check()$t$, current_user);
END
$do$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER loanq_work_governance ON loanq_work;
DROP TRIGGER loanq_request_governance ON loanq_work_request;
DROP FUNCTION loanq_governance_check();
DROP FUNCTION loanq_may_work(BIGINT, VARCHAR);
DROP TABLE loanq_task_not_worked_in;
DROP TABLE loanq_task_allow;
DROP TABLE loanq_group;
