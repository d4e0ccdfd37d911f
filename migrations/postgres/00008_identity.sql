-- Who may act as whom (docs/security.md). The database, not loanq's code,
-- decides which user names an account may write rows for, so that SQL sent
-- by hand through a processor's account is refused the same way.
--
-- loanq_account lists the accounts an admin has set up (`loanq grants`
-- prints the rows): an account acts as its own name, as the user_name an
-- admin mapped to it, or, when trusted (admins, supervisors, `loanq serve`),
-- as anyone. The account that runs this migration is trusted; superusers and
-- roles with BYPASSRLS are trusted by PostgreSQL itself.
--
-- loanq_may_act_as(name) is that rule, used by the row-level security
-- policies below and by the command line before it acts. Its search_path is
-- pinned to this schema with pg_temp last: every account may create
-- temporary tables by default, and pg_temp comes first in an unpinned path,
-- so a temporary loanq_account would otherwise stand in for the real one.
--
-- The policies. Every account reads every row (a serving round must see the
-- whole task). Writes:
-- * a request is logged only as pending, for a user the account may act as;
-- * a request changes only while pending: it is finished (assigned,
--   partial, empty) by whoever serves the round, and cancelled only by an
--   account that may act as its user (its count is not compared with its
--   work rows: a round finishes its requests before it inserts their work);
-- * a work row is written only for a user who asked in that task: the
--   request it names is theirs (not whether it is still pending: a request
--   cancelled while a round runs must make that round's finish find nothing
--   to finish and run again, as the engine expects, not fail its insert);
-- * a work row is ended only by an account that may act as its assignee, or
--   as 'expired' once it is older than its task's max hold.
-- What the database cannot check (the criteria themselves) is said in
-- docs/security.md.
--
-- The owner of these tables is not subject to the policies (no FORCE ROW
-- LEVEL SECURITY): the owner runs migrations, task deletes and audits.

-- +goose Up
CREATE TABLE loanq_account (
    account    VARCHAR(128) NOT NULL PRIMARY KEY,
    user_name  VARCHAR(100),
    trusted    BOOLEAN      NOT NULL DEFAULT FALSE,
    granted_by VARCHAR(128) NOT NULL DEFAULT current_user,
    granted_at TIMESTAMPTZ  NOT NULL DEFAULT clock_timestamp()
);
INSERT INTO loanq_account (account, trusted) VALUES (current_user, TRUE);

ALTER TABLE loanq_task ADD COLUMN updated_by VARCHAR(100);
ALTER TABLE loanq_task ADD COLUMN updated_at TIMESTAMPTZ;

-- +goose StatementBegin
DO $do$
BEGIN
    EXECUTE format($f$
CREATE FUNCTION loanq_may_act_as(acting VARCHAR) RETURNS BOOLEAN
LANGUAGE sql STABLE
SET search_path = %I, pg_temp
AS $body$
SELECT acting = current_user
    OR EXISTS (SELECT 1 FROM loanq_account a
               WHERE a.account = current_user AND (a.trusted OR a.user_name = acting))
    OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
               WHERE r.rolname = current_user AND (r.rolsuper OR r.rolbypassrls))
$body$
$f$, current_schema());
END
$do$;
-- +goose StatementEnd

-- PostgreSQL locks a row (FOR NO KEY UPDATE: the task lock, the rows
-- strategy's claim of source rows) only for an account with an UPDATE
-- privilege on its table. `loanq grants --role processor --source TABLE`
-- therefore grants UPDATE of the key column only, and puts this function on
-- the source as a BEFORE UPDATE OF key trigger: an untrusted loanq account
-- may lock loans but not change them. Other accounts (the application's)
-- are not affected.
-- +goose StatementBegin
DO $do$
BEGIN
    EXECUTE format($f$
CREATE FUNCTION loanq_guard_source_update() RETURNS trigger
LANGUAGE plpgsql
SET search_path = %I, pg_temp
AS $body$
BEGIN
    IF EXISTS (SELECT 1 FROM loanq_account a WHERE a.account = current_user AND NOT a.trusted) THEN
        RAISE EXCEPTION 'loanq: account %% may lock the rows of %% but not change them (docs/security.md)',
            current_user, TG_TABLE_NAME USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
END
$body$
$f$, current_schema());
END
$do$;
-- +goose StatementEnd

ALTER TABLE loanq_work_request ENABLE ROW LEVEL SECURITY;
CREATE POLICY loanq_read ON loanq_work_request FOR SELECT USING (true);
CREATE POLICY loanq_log ON loanq_work_request FOR INSERT
    WITH CHECK (status = 'pending' AND assigned = 0 AND loanq_may_act_as(user_name));
CREATE POLICY loanq_finish ON loanq_work_request FOR UPDATE USING (status = 'pending')
    WITH CHECK ((status = 'cancelled' AND loanq_may_act_as(user_name))
             OR status IN ('assigned', 'partial', 'empty'));

ALTER TABLE loanq_work ENABLE ROW LEVEL SECURITY;
CREATE POLICY loanq_read ON loanq_work FOR SELECT USING (true);
CREATE POLICY loanq_assign ON loanq_work FOR INSERT
    WITH CHECK (disposition IS NULL AND EXISTS (
        SELECT 1 FROM loanq_work_request r
        WHERE r.id = loanq_work.request_id AND r.task_id = loanq_work.task_id
          AND r.user_name = loanq_work.user_name));
CREATE POLICY loanq_dispose ON loanq_work FOR UPDATE USING (true)
    WITH CHECK ((loanq_may_act_as(user_name) AND (disposed_by IS NULL OR loanq_may_act_as(disposed_by)))
             OR (disposition = 'expired' AND disposed_by IS NULL AND EXISTS (
                 SELECT 1 FROM loanq_task t
                 WHERE t.id = loanq_work.task_id AND t.max_hold_ms IS NOT NULL
                   AND loanq_work.assigned_at <= clock_timestamp() - t.max_hold_ms * INTERVAL '1 millisecond')));

-- The rows strategy's per-user cap rows: a caller creates its own and locks
-- it (FOR NO KEY UPDATE needs the UPDATE privilege and this policy's USING);
-- nobody changes one.
ALTER TABLE loanq_task_user ENABLE ROW LEVEL SECURITY;
CREATE POLICY loanq_read ON loanq_task_user FOR SELECT USING (true);
CREATE POLICY loanq_own ON loanq_task_user FOR INSERT WITH CHECK (loanq_may_act_as(user_name));
CREATE POLICY loanq_lock ON loanq_task_user FOR UPDATE USING (true) WITH CHECK (false);

-- Deletes (task delete, prune) are an admin's: the DELETE privilege decides,
-- so these policies let every row through.
CREATE POLICY loanq_delete ON loanq_work_request FOR DELETE USING (true);
CREATE POLICY loanq_delete ON loanq_work FOR DELETE USING (true);
CREATE POLICY loanq_delete ON loanq_task_user FOR DELETE USING (true);

-- +goose Down
DROP POLICY loanq_delete ON loanq_work_request;
DROP POLICY loanq_delete ON loanq_work;
DROP POLICY loanq_delete ON loanq_task_user;
DROP POLICY loanq_read ON loanq_task_user;
DROP POLICY loanq_own ON loanq_task_user;
DROP POLICY loanq_lock ON loanq_task_user;
ALTER TABLE loanq_task_user DISABLE ROW LEVEL SECURITY;
DROP POLICY loanq_read ON loanq_work;
DROP POLICY loanq_assign ON loanq_work;
DROP POLICY loanq_dispose ON loanq_work;
ALTER TABLE loanq_work DISABLE ROW LEVEL SECURITY;
DROP POLICY loanq_read ON loanq_work_request;
DROP POLICY loanq_log ON loanq_work_request;
DROP POLICY loanq_finish ON loanq_work_request;
ALTER TABLE loanq_work_request DISABLE ROW LEVEL SECURITY;
DROP FUNCTION loanq_guard_source_update();
DROP FUNCTION loanq_may_act_as(VARCHAR);
ALTER TABLE loanq_task DROP COLUMN updated_at;
ALTER TABLE loanq_task DROP COLUMN updated_by;
DROP TABLE loanq_account;
