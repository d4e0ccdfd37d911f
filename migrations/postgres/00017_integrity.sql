-- What an untrusted account (processor, refresher) writes is checked column
-- by column, not only by whose name it carries (docs/security.md, "What the
-- database enforces"). The row-level security policies of 00008 and 00016
-- say for whom a row may be written; these triggers say what it may hold:
--
-- * a work row serves a request that is pending, or that this very
--   transaction finished (its row version is this transaction's: xmin), and
--   no request gets more work rows than it asked for (pending) or than it
--   was finished with (assigned); the user's active work in the task stays
--   within the task's max_active; the key fits the task's key type;
--   assigned_at is the database's clock and assigned_by the writing account,
--   whatever the statement wrote;
-- * finished history is not changed: a work row is updated only while
--   active, disposed_at is the database's clock; a request is finished with
--   at most what it asked for, served_at the database's clock;
-- * a request is logged with the database's clock (created_at, alive_at):
--   no backdating to jump a queue, no sign of life in the future;
-- * a pool candidate's key fits the task's key type (a key that does not
--   parse is dropped by the engine too: dispatch/pool.go);
-- * a task's lease: the token never goes down and a lease lasts at most the
--   task's lease_ttl_ms (plus a minute of clock slack) from now.
--
-- Named locks (loanq_lock) are checked for every account, trusted or not:
-- a lock row is created free; it is taken only when free or expired, with
-- the token one higher, and taken_by records the account that took it; it
-- is renewed or released only through that account, token unchanged; no
-- lease is longer than lock run's 24 h (namedlock.MaxTTL) plus a minute.
-- Processors have no write privilege on loanq_lock at all (`loanq grants`).
--
-- Trusted accounts (the owner, admins, supervisors, serve; superusers and
-- BYPASSRLS roles) skip the per-row checks except the named locks', as
-- they skip the policies: they run migrations, audits and repairs.
-- assigned_by is recorded for every account.
--
-- The functions run with the caller's rights (the caller may read every
-- table they read). They name loanq's tables and functions with the schema
-- instead of pinning search_path as loanq_may_act_as does (00008): a
-- function's SET is paid at every call (a search path recomputed, its plans
-- checked again), and a qualified name never resolves to pg_temp, where any
-- account may create a loanq_account of its own. loanq_trusted is PL/pgSQL
-- so that its plan is kept for the session, not made again per transaction
-- (measured: the SQL version cost 0.3-0.6 ms per transaction; engine bench
-- skip on PostgreSQL lost 40 %).

-- +goose Up
-- assigned_by: the writing account; the owner's rows get it from the
-- default. Added first without one: a default given with ADD COLUMN would
-- be written into every existing row, as if the migrating account had
-- assigned the whole history (those rows stay NULL: writer unknown).
ALTER TABLE loanq_work ADD COLUMN assigned_by VARCHAR(128);
ALTER TABLE loanq_work ALTER COLUMN assigned_by SET DEFAULT current_user;
ALTER TABLE loanq_lock ADD COLUMN taken_by VARCHAR(128);

-- +goose StatementBegin
DO $do$
BEGIN
    EXECUTE format($f$
CREATE FUNCTION loanq_trusted() RETURNS BOOLEAN
LANGUAGE plpgsql STABLE
AS $body$
BEGIN
    RETURN EXISTS (SELECT 1 FROM %1$I.loanq_account a WHERE a.account = current_user AND a.trusted)
        OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                   WHERE r.rolname = current_user AND (r.rolsuper OR r.rolbypassrls));
END
$body$
$f$, current_schema());

    -- A key fits its task's key type as loanq writes keys (drivers.KeyFits):
    -- integer keys are a 64-bit integer's decimal text (no sign but '-', no
    -- leading zero), uuid keys the 8-4-4-4-12 hex form; text keys anything.
    EXECUTE format($f$
CREATE FUNCTION loanq_key_fits(kind VARCHAR, k VARCHAR) RETURNS BOOLEAN
LANGUAGE sql IMMUTABLE
AS $body$
SELECT CASE kind
    WHEN 'integer' THEN k ~ '^(0|-?[1-9][0-9]{0,18})$'
    WHEN 'uuid' THEN k ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
    ELSE k IS NOT NULL END
$body$
$f$, current_schema());

    EXECUTE format($f$
CREATE FUNCTION loanq_work_assign_check() RETURNS trigger
LANGUAGE plpgsql
AS $body$
DECLARE
    req_status    VARCHAR;
    req_requested INTEGER;
    req_assigned  INTEGER;
    req_mine      BOOLEAN;
    cap           INTEGER;
    kind          VARCHAR;
    n             BIGINT;
BEGIN
    NEW.assigned_by := current_user;
    IF %1$I.loanq_trusted() THEN
        RETURN NEW;
    END IF;
    NEW.assigned_at := clock_timestamp();
    SELECT r.status, r.requested, r.assigned, r.xmin = pg_current_xact_id()::xid
      INTO req_status, req_requested, req_assigned, req_mine
      FROM %1$I.loanq_work_request r
     WHERE r.id = NEW.request_id AND r.task_id = NEW.task_id AND r.user_name = NEW.user_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'loanq: a work row must serve a request of its user in its task (docs/security.md)'
            USING ERRCODE = '42501';
    END IF;
    IF req_status <> 'pending' AND NOT req_mine THEN
        RAISE EXCEPTION 'loanq: a work row may serve only a pending request, or one this transaction served (docs/security.md)'
            USING ERRCODE = '42501';
    END IF;
    -- Rows of this statement inserted before this one are visible here (a
    -- VOLATILE function's queries see the statement's earlier rows).
    SELECT COUNT(*) INTO n FROM %1$I.loanq_work WHERE request_id = NEW.request_id;
    IF n + 1 > (CASE WHEN req_status = 'pending' THEN req_requested ELSE req_assigned END) THEN
        RAISE EXCEPTION 'loanq: request %% has all the work rows it asked for (docs/security.md)', NEW.request_id
            USING ERRCODE = '42501';
    END IF;
    SELECT t.max_active, t.key_kind INTO cap, kind FROM %1$I.loanq_task t WHERE t.id = NEW.task_id;
    IF NOT %1$I.loanq_key_fits(kind, NEW.loan_id) THEN
        RAISE EXCEPTION 'loanq: loan key does not fit the task''s key type %% (docs/security.md)', kind
            USING ERRCODE = '42501';
    END IF;
    IF cap IS NOT NULL THEN
        SELECT COUNT(*) INTO n FROM %1$I.loanq_work
         WHERE task_id = NEW.task_id AND user_name = NEW.user_name AND disposition IS NULL;
        IF n + 1 > cap THEN
            RAISE EXCEPTION 'loanq: user %% would hold more than the task''s max-active %% (docs/security.md)', NEW.user_name, cap
                USING ERRCODE = '42501';
        END IF;
    END IF;
    RETURN NEW;
END
$body$
$f$, current_schema());

    EXECUTE format($f$
CREATE FUNCTION loanq_work_dispose_check() RETURNS trigger
LANGUAGE plpgsql
AS $body$
BEGIN
    IF %1$I.loanq_trusted() THEN
        RETURN NEW;
    END IF;
    IF OLD.disposition IS NOT NULL THEN
        RAISE EXCEPTION 'loanq: finished work is history and is not changed (docs/security.md)'
            USING ERRCODE = '42501';
    END IF;
    IF NEW.assigned_at IS DISTINCT FROM OLD.assigned_at OR NEW.assigned_by IS DISTINCT FROM OLD.assigned_by THEN
        RAISE EXCEPTION 'loanq: an assignment''s time and writer are not changed (docs/security.md)'
            USING ERRCODE = '42501';
    END IF;
    IF NEW.disposition IS NOT NULL THEN
        NEW.disposed_at := clock_timestamp();
    END IF;
    RETURN NEW;
END
$body$
$f$, current_schema());

    EXECUTE format($f$
CREATE FUNCTION loanq_request_check() RETURNS trigger
LANGUAGE plpgsql
AS $body$
BEGIN
    IF %1$I.loanq_trusted() THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'INSERT' THEN
        NEW.created_at := clock_timestamp();
        NEW.alive_at := NEW.created_at;
        RETURN NEW;
    END IF;
    IF OLD.status <> 'pending' THEN
        RAISE EXCEPTION 'loanq: a finished request is history and is not changed (docs/security.md)'
            USING ERRCODE = '42501';
    END IF;
    IF NEW.assigned > OLD.requested OR NEW.assigned < 0 THEN
        RAISE EXCEPTION 'loanq: a request is finished with at most the loans it asked for (docs/security.md)'
            USING ERRCODE = '42501';
    END IF;
    IF NEW.status <> 'pending' THEN
        NEW.served_at := clock_timestamp();
    END IF;
    RETURN NEW;
END
$body$
$f$, current_schema());

    EXECUTE format($f$
CREATE FUNCTION loanq_pool_check() RETURNS trigger
LANGUAGE plpgsql
AS $body$
BEGIN
    -- The key first: a refill writes hundreds of rows, whose keys fit.
    IF NOT %1$I.loanq_key_fits((SELECT t.key_kind FROM %1$I.loanq_task t WHERE t.id = NEW.task_id), NEW.loan_id)
       AND NOT %1$I.loanq_trusted() THEN
        RAISE EXCEPTION 'loanq: a pool candidate''s key must fit the task''s key type (docs/security.md)'
            USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
END
$body$
$f$, current_schema());

    EXECUTE format($f$
CREATE FUNCTION loanq_task_lease_check() RETURNS trigger
LANGUAGE plpgsql
AS $body$
BEGIN
    IF %1$I.loanq_trusted() THEN
        RETURN NEW;
    END IF;
    IF NEW.lease_token < OLD.lease_token THEN
        RAISE EXCEPTION 'loanq: a task''s lease token never goes down (docs/security.md)'
            USING ERRCODE = '42501';
    END IF;
    IF NEW.lease_expires_at > clock_timestamp() + (NEW.lease_ttl_ms + 60000) * INTERVAL '1 millisecond' THEN
        RAISE EXCEPTION 'loanq: a task''s lease lasts at most its lease-ttl (docs/security.md)'
            USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
END
$body$
$f$, current_schema());

    EXECUTE format($f$
CREATE FUNCTION loanq_lock_check() RETURNS trigger
LANGUAGE plpgsql
AS $body$
DECLARE
    now_ts TIMESTAMPTZ := clock_timestamp();
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.holder IS NOT NULL OR NEW.token <> 0 OR NEW.taken_at IS NOT NULL OR NEW.expires_at IS NOT NULL THEN
            RAISE EXCEPTION 'loanq: a named lock is created free, with token 0 (docs/security.md)'
                USING ERRCODE = '42501';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.name <> OLD.name OR NEW.token < OLD.token THEN
        RAISE EXCEPTION 'loanq: a named lock keeps its name, and its token never goes down (docs/security.md)'
            USING ERRCODE = '42501';
    END IF;
    IF NEW.expires_at > now_ts + INTERVAL '24 hours 1 minute' THEN
        RAISE EXCEPTION 'loanq: a named lock is held at most 24 h at a time (docs/security.md)'
            USING ERRCODE = '42501';
    END IF;
    IF NEW.token = OLD.token + 1 AND NEW.holder IS NOT NULL THEN
        -- a take: only of a free or expired lock, for a holder one may act as
        IF OLD.holder IS NOT NULL AND OLD.expires_at > now_ts THEN
            RAISE EXCEPTION 'loanq: named lock %% is held by %%: it is taken only once free or expired (docs/security.md)', OLD.name, OLD.holder
                USING ERRCODE = '42501';
        END IF;
        NEW.taken_by := current_user;
        RETURN NEW;
    END IF;
    IF NEW.token = OLD.token AND NEW.holder IS NOT DISTINCT FROM OLD.holder
       AND NEW.taken_at IS NOT DISTINCT FROM OLD.taken_at AND NEW.expires_at IS NOT DISTINCT FROM OLD.expires_at
       AND NEW.taken_by IS NOT DISTINCT FROM OLD.taken_by THEN
        RETURN NEW; -- nothing changes
    END IF;
    IF NEW.token = OLD.token AND OLD.holder IS NOT NULL
       AND (NEW.holder IS NULL OR NEW.holder = OLD.holder) AND NEW.taken_by IS NOT DISTINCT FROM OLD.taken_by
       AND (OLD.taken_by IS NULL OR OLD.taken_by = current_user) THEN
        RETURN NEW; -- its holder renews or releases it (taken_by NULL: taken before this migration)
    END IF;
    RAISE EXCEPTION 'loanq: named lock %% is renewed or released only by its holder, taken only with the next token (docs/security.md)', OLD.name
        USING ERRCODE = '42501';
END
$body$
$f$, current_schema());
END
$do$;
-- +goose StatementEnd

-- The owner of loanq's tables (the account running this migration) is
-- trusted: its writes skip the per-row checks without calling a function
-- at all (WHEN is evaluated in the executor, no PL/pgSQL call). The engine
-- run as the owner, a one-account deployment, loses nothing per loan;
-- measured before this: engine bench 7-11 % slower on PostgreSQL. Named
-- locks are checked for the owner too (no WHEN).
-- +goose StatementBegin
DO $do$
BEGIN
    EXECUTE format($t$
CREATE TRIGGER loanq_work_assign_check BEFORE INSERT ON loanq_work
    FOR EACH ROW WHEN (current_user <> %1$L) EXECUTE FUNCTION loanq_work_assign_check()$t$, current_user);
    EXECUTE format($t$
CREATE TRIGGER loanq_work_dispose_check BEFORE UPDATE ON loanq_work
    FOR EACH ROW WHEN (current_user <> %1$L) EXECUTE FUNCTION loanq_work_dispose_check()$t$, current_user);
    EXECUTE format($t$
CREATE TRIGGER loanq_request_check BEFORE INSERT OR UPDATE ON loanq_work_request
    FOR EACH ROW WHEN (current_user <> %1$L) EXECUTE FUNCTION loanq_request_check()$t$, current_user);
    EXECUTE format($t$
CREATE TRIGGER loanq_pool_check BEFORE INSERT OR UPDATE ON loanq_pool
    FOR EACH ROW WHEN (current_user <> %1$L) EXECUTE FUNCTION loanq_pool_check()$t$, current_user);
    EXECUTE format($t$
CREATE TRIGGER loanq_task_lease_check BEFORE UPDATE OF lease_owner, lease_token, lease_expires_at ON loanq_task
    FOR EACH ROW WHEN (current_user <> %1$L) EXECUTE FUNCTION loanq_task_lease_check()$t$, current_user);
END
$do$;
-- +goose StatementEnd
CREATE TRIGGER loanq_lock_check BEFORE INSERT OR UPDATE ON loanq_lock
    FOR EACH ROW EXECUTE FUNCTION loanq_lock_check();

-- +goose Down
DROP TRIGGER loanq_lock_check ON loanq_lock;
DROP TRIGGER loanq_task_lease_check ON loanq_task;
DROP TRIGGER loanq_pool_check ON loanq_pool;
DROP TRIGGER loanq_request_check ON loanq_work_request;
DROP TRIGGER loanq_work_dispose_check ON loanq_work;
DROP TRIGGER loanq_work_assign_check ON loanq_work;
DROP FUNCTION loanq_lock_check();
DROP FUNCTION loanq_task_lease_check();
DROP FUNCTION loanq_pool_check();
DROP FUNCTION loanq_request_check();
DROP FUNCTION loanq_work_dispose_check();
DROP FUNCTION loanq_work_assign_check();
DROP FUNCTION loanq_key_fits(VARCHAR, VARCHAR);
DROP FUNCTION loanq_trusted();
ALTER TABLE loanq_lock DROP COLUMN taken_by;
ALTER TABLE loanq_work DROP COLUMN assigned_by;
